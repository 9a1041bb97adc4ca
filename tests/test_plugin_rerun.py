"""Run-once per pytest run: --lf/--ff/--sw, reordering, xdist; the in-flight limit."""

from __future__ import annotations

import html
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest
from support.fake_stages import job_runs, make_project, max_in_flight, started

POOL = {"p": "GPU_SLEEP:1:5:2\nGPU_SLEEP:0:5:2\nSIGKILL:1:5:2\nSIGTERM:1:5:2\nLOCK_GIL:0:5:2\n"}
MIXED = {"GPU_SLEEP:0:5:2": {"rank_primary": "false"}, "SIGTERM:1:5:2": {"rank_any": "false"}}


def test_last_failed_reruns_only_the_failed_cells(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester, monkeypatch, pools=POOL, verdicts=MIXED)
    pytester.runpytest("experiments/", "--faultloop-pool=p").assert_outcomes(passed=23, failed=2)
    (pytester.path / "jobs.log").unlink()
    result = pytester.runpytest("experiments/", "--faultloop-pool=p", "--lf", "-v")
    result.assert_outcomes(failed=2, deselected=23)
    result.stdout.fnmatch_lines(
        [
            "*p.pool::GPU_SLEEP:0:5:2::rank_primary FAILED*",
            "*p.pool::SIGTERM:1:5:2::rank_any FAILED*",
        ]
    )
    assert sorted(started(pytester)) == ["GPU_SLEEP:0:5:2", "SIGTERM:1:5:2"]
    # the summary's rates count the two selected cells, not the experiments' other eight
    result.stdout.fnmatch_lines(["faultloop: pass rates (95 % interval): *"])
    rates = next(line for line in result.outlines if line.startswith("faultloop: pass rates"))
    assert "rank_primary 0/1 " in rates and "rank_any 0/1 " in rates, rates
    assert "restart_correct" not in rates and "fault_described" not in rates, rates


DEFAULT = {"default": "NONE:0:5:2\nGPU_ERROR:1:5:2\nSIGKILL:0:5:2\n"}
"""A default pool the runs below never name: ``--lf`` must not fall back to it."""


def test_last_failed_reruns_the_failing_cells_of_the_pool_last_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``pytest experiments/ --lf`` after a run of another pool than the default: the failing
    cells of that run, not the default pool."""
    make_project(pytester, monkeypatch, pools={**POOL, **DEFAULT}, verdicts=MIXED)
    pytester.runpytest("experiments/", "--faultloop-pool=p").assert_outcomes(passed=23, failed=2)
    (pytester.path / "jobs.log").unlink()
    result = pytester.runpytest("experiments/", "--lf", "-v")
    result.assert_outcomes(failed=2, deselected=23)
    result.stdout.fnmatch_lines(
        [
            "faultloop: * pools=p (--lf: the pools of the last run's failures) *",
            "run-last-failure: rerun previous 2 failures*",
            "*p.pool::GPU_SLEEP:0:5:2::rank_primary FAILED*",
            "*p.pool::SIGTERM:1:5:2::rank_any FAILED*",
        ]
    )
    assert sorted(started(pytester)) == ["GPU_SLEEP:0:5:2", "SIGTERM:1:5:2"]


def test_last_failed_reruns_the_failing_cells_of_a_pool_given_by_pool(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last run's pool was POOL (``experiments/POOL::KEY::dimension``): ``--lf`` without
    POOL runs its failing entries' failing cells."""
    make_project(pytester, monkeypatch, pools=DEFAULT, verdicts=MIXED)
    monkeypatch.setenv("POOL", POOL["p"])
    pytester.runpytest("experiments/").assert_outcomes(passed=23, failed=2)
    monkeypatch.delenv("POOL")
    (pytester.path / "jobs.log").unlink()
    result = pytester.runpytest("experiments/", "--lf", "-v")
    result.assert_outcomes(failed=2, deselected=8)
    result.stdout.fnmatch_lines(
        [
            "*POOL::GPU_SLEEP:0:5:2::rank_primary FAILED*",
            "*POOL::SIGTERM:1:5:2::rank_any FAILED*",
        ]
    )
    assert sorted(started(pytester)) == ["GPU_SLEEP:0:5:2", "SIGTERM:1:5:2"]


def test_failed_first_keeps_each_experiment_together_and_runs_it_once(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester, monkeypatch, pools=POOL, verdicts=MIXED)
    pytester.runpytest("experiments/", "--faultloop-pool=p")
    (pytester.path / "jobs.log").unlink()
    result = pytester.runpytest("experiments/", "--faultloop-pool=p", "--ff", "-v")
    result.assert_outcomes(passed=23, failed=2)
    ran = [
        line.split("::")[1]
        for line in result.outlines
        if "PASSED" in line or "FAILED" in line
        if line.startswith("experiments/")
    ]
    groups = [key for i, key in enumerate(ran) if i == 0 or ran[i - 1] != key]
    assert len(groups) == len(set(groups)) == 5
    assert Counter(started(pytester)) == Counter(k.split()[0] for k in POOL["p"].split())


def test_stepwise_stops_and_resumes(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester, monkeypatch, pools=POOL, verdicts=MIXED)
    first = pytester.runpytest("experiments/", "--faultloop-pool=p", "--sw")
    first.assert_outcomes(passed=6, failed=1)
    second = pytester.runpytest("experiments/", "--faultloop-pool=p", "--sw", "--sw-skip")
    second.assert_outcomes(passed=10, failed=2, deselected=6)


@pytest.mark.parametrize("dist", ["loadscope", "load", "worksteal"])
def test_xdist_runs_every_job_once(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, dist: str
) -> None:
    make_project(pytester, monkeypatch, pools=POOL, verdicts=MIXED)
    monkeypatch.setenv("FAKE_JOB_SECONDS", "0.3")
    result = pytester.runpytest_subprocess(
        "experiments/", "--faultloop-pool=p", "-n", "2", "--dist", dist
    )
    result.assert_outcomes(passed=23, failed=2)
    assert Counter(started(pytester)) == Counter(k.split()[0] for k in POOL["p"].split())
    assert max_in_flight(pytester) <= 2
    result.stdout.fnmatch_lines(["faultloop: 5 experiment(s): 5 scored"])


def test_plain_n_2_keeps_two_jobs_in_flight(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``-n 2`` alone is xdist's ``--dist load``: it handed one experiment's items to both
    workers, which then waited for the same job (one job at a time); the plugin hands each
    worker whole experiments instead."""
    make_project(pytester, monkeypatch, pools=POOL)
    monkeypatch.setenv("FAKE_JOB_BARRIER", "2")  # the peak is reached, however slow the start
    result = pytester.runpytest_subprocess("experiments/", "--faultloop-pool=p", "-n", "2")
    result.assert_outcomes(passed=25)
    assert max_in_flight(pytester) == 2
    assert Counter(started(pytester)) == Counter(k.split()[0] for k in POOL["p"].split())


def test_in_flight_limit_holds_with_three_workers(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester, monkeypatch, pools=POOL)
    monkeypatch.setenv("FAKE_JOB_BARRIER", "2")  # the peak is reached, however slow the start
    result = pytester.runpytest_subprocess(
        "experiments/", "--faultloop-pool=p", "-n", "3", "--dist", "loadscope"
    )
    result.assert_outcomes(passed=25)
    assert max_in_flight(pytester) == 2


@pytest.mark.parametrize(("batch", "expected"), [("1", "1"), ("3", "3")])
def test_batch_size_sets_the_limit_without_xdist(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, batch: str, expected: int
) -> None:
    make_project(pytester, monkeypatch, pools=POOL)
    monkeypatch.setenv("FAKE_JOB_BARRIER", expected)
    result = pytester.runpytest(
        "experiments/", "--faultloop-pool=p", f"--faultloop-batch-size={batch}"
    )
    result.assert_outcomes(passed=25)
    assert max_in_flight(pytester) == int(expected)


def test_pairs_mode_waits_for_the_whole_batch(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester, monkeypatch, pools=POOL)
    monkeypatch.setenv("FAKE_JOB_SECONDS", "0.3")
    result = pytester.runpytest("experiments/", "--faultloop-pool=p", "--faultloop-schedule=pairs")
    result.assert_outcomes(passed=25)
    result.stdout.fnmatch_lines(
        ["*>>> Batch 1: experiments 1–2 of 5*", "*>>> Batch 3: experiments 5–5 of 5*"]
    )
    from support.fake_stages import job_runs

    runs = job_runs(pytester)
    ends = {k: t for e, k, t, _ in runs if e == "end"}
    starts = {k: t for e, k, t, _ in runs if e == "start"}
    keys = POOL["p"].split()
    for later in keys[2:4]:
        assert starts[later] >= max(ends[k] for k in keys[:2])
    assert starts[keys[4]] >= max(ends[k] for k in keys[2:4])


TWO = {"p": "GPU_SLEEP:1:5:2\nSIGKILL:1:5:2\n"}


def run_killing_a_worker(pytester: pytest.Pytester, key: str, *args: str) -> str:
    """``pytest experiments/ -n 2 ARGS``, the worker that runs ``key``'s (fake) job killed
    with SIGKILL while the job runs; the run's output."""
    command = [sys.executable, "-m", "pytest", "experiments/", "--faultloop-pool=p", "-n", "2"]
    with subprocess.Popen(
        [*command, *args], cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True,
    ) as proc:  # fmt: skip
        deadline = time.monotonic() + 120
        while not (
            pids := [pid for e, k, _, pid in job_runs(pytester) if (e, k) == ("start", key)]
        ):
            assert proc.poll() is None and time.monotonic() < deadline, "the job never started"
            time.sleep(0.05)
        os.kill(pids[0], signal.SIGKILL)  # the fake job runs in the worker itself
        out, _ = proc.communicate(timeout=300)
    return out


def test_a_cell_whose_worker_went_down_errors_naming_it_when_nothing_was_scored(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cell of a worker that went down runs again on another worker; when that run scores
    nothing, its cells ERROR naming the crash too. Each cell is reported once, also in the
    HTML report (no rerun row)."""
    make_project(pytester, monkeypatch, pools=TWO, verdicts={"GPU_SLEEP:1:5:2": {"broken": "down"}})
    monkeypatch.setenv("FAKE_JOB_SECONDS", "5")  # the worker is killed while its job runs
    out = run_killing_a_worker(pytester, "GPU_SLEEP:1:5:2", "--html=report.html", "-rA")
    assert re.fullmatch(r"=+ 5 passed, 5 errors in .* =+", out.strip().splitlines()[-1]), out
    errors = [line for line in out.splitlines() if line.startswith("ERROR experiments/")]
    assert len(errors) == 5 and all("GPU_SLEEP:1:5:2" in line for line in errors), out
    assert out.count("before this run of it, xdist worker gw") >= 5, out
    blob = re.search(r'data-jsonblob="([^"]*)"', (pytester.path / "report.html").read_text())
    assert blob is not None
    rows = json.loads(html.unescape(blob.group(1)))["tests"]
    assert len(rows) == 10 and all(len(runs) == 1 for runs in rows.values()), rows.keys()
    assert Counter(run["result"] for runs in rows.values() for run in runs) == {
        "Passed": 5,
        "Error": 5,
    }


def test_a_cell_whose_worker_went_down_and_cannot_run_again_is_an_error_naming_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No worker restarts left: the cell is an ERROR naming the crash and the way on, never a
    FAILED attribution, and --lf has it."""
    make_project(pytester, monkeypatch, pools=TWO)
    monkeypatch.setenv("FAKE_JOB_SECONDS", "5")
    out = run_killing_a_worker(pytester, "GPU_SLEEP:1:5:2", "--max-worker-restart=0", "-rE")
    assert re.fullmatch(r"=+ 5 passed, 1 error in .* =+", out.strip().splitlines()[-1]), out
    (error,) = [line for line in out.splitlines() if line.startswith("ERROR experiments/")]
    assert error.startswith("ERROR experiments/p.pool::GPU_SLEEP:1:5:2::restart_correct - "), out
    assert re.search(
        r"xdist worker gw\d went down while running experiments/p.pool::GPU_SLEEP:1:5:2::"
        r"restart_correct; it cannot run again in this run \(no worker restarts left: "
        r"--max-worker-restart 0\): nothing was scored; .*\(--faultloop-session last\)",
        out,
    ), out
    lastfailed = pytester.path / ".pytest_cache" / "v" / "cache" / "lastfailed"
    assert list(json.loads(lastfailed.read_text())) == [
        "experiments/p.pool::GPU_SLEEP:1:5:2::restart_correct"
    ]
