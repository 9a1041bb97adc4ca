"""What a run prints on the terminal: progress lines each on a line of its own, numbered in the
order they appear, only this run's (a re-analysis labels what it re-scores); after an interrupt
the count of what finished and how to continue; the stop condition in one line."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import pytest
from support.fake_stages import make_project
from support.sessions import only_session

from pytest_faultloop.plugin.progress import ProgressPrinter
from pytest_faultloop.store.ledger import RunLedger, started_keys
from pytest_faultloop.store.session_dir import SessionDir

POOL = {"p": "GPU_SLEEP:1:5:2\nGPU_SLEEP:0:5:2\nSIGKILL:1:5:2\n"}
PROGRESS = re.compile(r"\[\d\d:\d\d:\d\d\] (>>> .*)")


def _progress(out: str) -> list[str]:
    """The progress lines, checking that each starts a line of its own."""
    found = []
    for line in out.splitlines():
        if ">>> " in line:
            match = PROGRESS.fullmatch(line)
            assert match, f"progress glued to other output: {line!r}"
            found.append(match.group(1))
    return found


@pytest.mark.parametrize("mode", [["-q"], [], ["-v"], ["-n", "2", "-q"], ["-n", "2", "-v"], ["-s"]])
def test_each_progress_line_starts_a_line_and_numbers_follow_their_order(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, mode: list[str]
) -> None:
    """One job at a time: each experiment's line arrives while pytest writes the previous
    experiment's results (``.....`` under -q, ``[gwN]`` lines under xdist)."""
    make_project(pytester, monkeypatch, pools=POOL)
    monkeypatch.setenv("FAKE_JOB_SECONDS", "0.4")
    result = pytester.runpytest(
        "experiments/", "--faultloop-pool=p", "--faultloop-batch-size=1", *mode
    )
    result.assert_outcomes(passed=15)
    lines = _progress(result.stdout.str())
    numbers = [
        int(m.group(1)) for line in lines if (m := re.match(r">>> Experiment (\d) of 3", line))
    ]
    assert numbers == [1, 2, 3], lines


def test_a_line_waits_while_pytest_reports_a_test(tmp_path: Path) -> None:
    """pytest writes ``path::test`` and, later, `` PASSED`` after checking its line is still
    the current one; a progress line written between the check and the word would take the
    word (seen once in CI under -v). The printer holds off while pytest reports."""
    events = tmp_path / "events.log"
    events.write_text(json.dumps({"run": "r", "t": "12:00:00", "line": ">>> x"}) + "\n")
    written: list[str] = []
    printer = ProgressPrinter(lambda: events, written.append, "r")
    reporting = printer.pytest_runtest_logreport()
    next(reporting)  # pytest is writing a test's result
    drain = threading.Thread(target=printer.close)
    drain.start()
    drain.join(timeout=0.5)
    assert written == [] and drain.is_alive()
    with pytest.raises(StopIteration):
        next(reporting)  # the result is written
    drain.join()
    assert written == ["[12:00:00] >>> x"]


def test_a_later_experiment_that_starts_first_is_number_one(tmp_path: Path) -> None:
    session = tmp_path / "session"
    session.mkdir()
    ledger = RunLedger(tmp_path, SessionDir(session, "# report\n"))
    pool = {"A", "B"}
    with ledger.started("B", pool) as first:
        assert first == 1
    with ledger.started("A", pool) as second:
        assert second == 2
    with ledger.started("B", pool) as again:
        assert again is None  # a resubmission is not announced again
    with ledger.started("asked-by-a-test", pool) as other:
        assert other == 2  # counts pool experiments only
    assert started_keys(tmp_path) == {"A", "B", "asked-by-a-test"}


def test_reanalysis_labels_what_it_rescores_and_never_replays_old_lines(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester, monkeypatch, pools=POOL)
    first = pytester.runpytest("experiments/", "--faultloop-pool=p")
    first.assert_outcomes(passed=15)
    assert len([line for line in _progress(first.stdout.str()) if "Experiment" in line]) == 3
    again = pytester.runpytest(
        "experiments/", "--faultloop-pool=p", "--faultloop-reanalyze", "--faultloop-session", "last"
    )
    again.assert_outcomes(passed=15)
    out = again.stdout.str()
    lines = _progress(out)
    assert not [line for line in lines if "Experiment" in line], lines
    rescored = [
        re.fullmatch(r">>> Re-scoring (\d) of 3: (\S+) \(stored job=\d+ FAILED\)", x) for x in lines
    ]
    assert all(rescored), lines
    assert [m.group(1) for m in rescored if m] == ["1", "2", "3"]
    assert {m.group(2) for m in rescored if m} == set(POOL["p"].split())
    again.stdout.fnmatch_lines(
        ["(not repeated: 3 progress line(s) of earlier runs of this session, in */events.log)"]
    )


def test_a_continued_session_numbers_the_experiments_it_keeps(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester, monkeypatch, pools=POOL)
    options = ["experiments/", "--faultloop-pool=p", "--faultloop-batch-size=1"]
    pytester.runpytest(*options, "-k", "GPU_SLEEP and 1:5").assert_outcomes(passed=5, deselected=10)
    result = pytester.runpytest(*options, "--faultloop-session", "last")
    result.assert_outcomes(passed=15)
    lines = [re.sub(r"job=\d+", "job=N", line) for line in _progress(result.stdout.str())]
    assert lines == [
        ">>> Experiment 1 of 3: GPU_SLEEP:1:5:2 (kept from an earlier run: job=N FAILED)",
        ">>> Experiment 2 of 3: GPU_SLEEP:0:5:2",
        ">>> Experiment 3 of 3: SIGKILL:1:5:2",
    ]
    result.stdout.fnmatch_lines(["(not repeated: 1 progress line(s) of earlier runs of *"])


INTERRUPT = """
import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_faultloop_run_job(config, spec):
    if spec.experiment.key == "SIGKILL:1:5:2":
        raise KeyboardInterrupt  # Ctrl-C while this job runs
"""


@pytest.mark.parametrize("continued", [False, True], ids=["new", "continued"])
def test_an_interrupt_counts_what_finished_and_says_how_to_continue(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, continued: bool
) -> None:
    base = make_project(pytester, monkeypatch, pools=POOL)
    options = ["experiments/", "--faultloop-pool=p", "--faultloop-batch-size=1"]
    if continued:
        pytester.runpytest(*options, "-k", "GPU_SLEEP and 1:5").assert_outcomes(
            passed=5, deselected=10
        )
        options += ["--faultloop-session", "last"]
    (pytester.path / "experiments" / "conftest.py").write_text(INTERRUPT)
    result = pytester.runpytest(*options, no_reraise_ctrlc=True)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    session = only_session(base)
    hint = (
        f"run the same command again (it continues session {session})"
        if continued
        else f"add --faultloop-session last (or --faultloop-session {session})"
    )
    result.stdout.fnmatch_lines(
        [
            "faultloop: 3 experiment(s): 2 scored, 1 unfinished",
            f"faultloop: interrupted; to continue, {hint}: finished experiments are kept, "
            "the rest run",
        ]
    )


def test_the_stop_condition_is_one_plain_line_shown_with_v_or_when_met(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester, monkeypatch, pools=POOL)
    quiet = pytester.runpytest("experiments/", "--faultloop-pool=p")
    assert "stop condition" not in quiet.stdout.str()
    asked = pytester.runpytest("experiments/", "--faultloop-pool=p", "-v")
    stop = [line for line in asked.stdout.lines if "stop condition" in line]
    assert stop == [
        "faultloop: stop condition not met: only one analyzer version scored so far "
        f"({_fingerprint(pytester)}); run again after changing an analyzer"
    ]


def _fingerprint(pytester: pytest.Pytester) -> str:
    (history,) = pytester.path.glob("out/fault_injection/history.jsonl")
    return str(json.loads(history.read_text().splitlines()[-1])["fingerprint"])
