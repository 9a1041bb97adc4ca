"""Repeated trials: N jobs per experiment, one item per dimension passing at a pass rate."""

from __future__ import annotations

from collections import Counter

import pytest
from support.fake_stages import make_project, max_in_flight, started
from support.sessions import only_session

POOLS = {"p": "GPU_SLEEP:1:5:2 SIGKILL:0:5:2\n", "own": "GPU_SLEEP:1:5:2*3 SIGKILL:0:5:2\n"}
FLAKY = {"GPU_SLEEP:1:5:2#2": {"rank_primary": "false"}}


def test_trials_run_n_jobs_per_experiment_with_one_item_per_dimension(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = make_project(pytester, monkeypatch, pools=POOLS)
    monkeypatch.setenv("FAKE_JOB_SECONDS", "0.2")
    result = pytester.runpytest_subprocess(
        "experiments/", "--faultloop-pool=p", "--faultloop-trials", "3", "-n", "2"
    )
    result.assert_outcomes(passed=10)
    assert Counter(started(pytester)) == Counter(
        f"{key}#{t}" for key in ("GPU_SLEEP:1:5:2", "SIGKILL:0:5:2") for t in (1, 2, 3)
    )
    assert max_in_flight(pytester) <= 2
    session = only_session(base)
    rows = [r.split("\t") for r in (session / "experiments.tsv").read_text().splitlines()[1:]]
    assert sorted((r[1], r[6]) for r in rows) == [
        (fault, str(t)) for fault in ("GPU_SLEEP", "SIGKILL") for t in (1, 2, 3)
    ]
    assert (session / "n2_GPU_SLEEP_r1_i5_t3" / "result.json").is_file()


def test_a_pool_entry_may_carry_its_own_trial_count(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester, monkeypatch, pools=POOLS)
    result = pytester.runpytest("experiments/", "--faultloop-pool=own", "--collect-only", "-q")
    assert sum("::" in line for line in result.outlines) == 10
    pytester.runpytest("experiments/", "--faultloop-pool=own").assert_outcomes(passed=10)
    assert sorted(started(pytester)) == [
        "GPU_SLEEP:1:5:2#1",
        "GPU_SLEEP:1:5:2#2",
        "GPU_SLEEP:1:5:2#3",
        "SIGKILL:0:5:2",
    ]


def test_a_dimension_failing_one_trial_fails_below_the_pass_rate_with_each_trial_named(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester, monkeypatch, pools=POOLS, verdicts=FLAKY)
    strict = pytester.runpytest("experiments/", "--faultloop-pool=own")
    strict.assert_outcomes(passed=9, failed=1)
    strict.stdout.fnmatch_lines(
        [
            "GPU_SLEEP:1:5:2 rank_primary passed 2/3 trials (needs 100%)",
            "GPU_SLEEP:1:5:2#2 rank_primary = false (expected true)",
            "judge notes: fake notes for GPU_SLEEP:1:5:2#2",
        ]
    )
    lenient = pytester.runpytest(
        "experiments/", "--faultloop-pool=own", "--faultloop-min-pass-rate", "0.6"
    )
    lenient.assert_outcomes(passed=10)


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        ("GPU_SLEEP:1:5:2*0", "trial count after '*' must be a positive integer, got '0'"),
        ("GPU_SLEEP:1:5:2*x", "trial count after '*' must be a positive integer, got 'x'"),
    ],
)
def test_a_bad_trial_count_fails_collection_naming_its_place(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, token: str, reason: str
) -> None:
    make_project(pytester, monkeypatch, pools={"bad": f"SIGKILL:0:5:2\n{token}\n"})
    result = pytester.runpytest("experiments/", "--faultloop-pool=bad")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines([f"experiments/bad.pool:2: '{token}': {reason}"])


def test_a_flaky_cell_is_listed_apart_in_the_report_and_the_summary(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = make_project(pytester, monkeypatch, pools=POOLS, verdicts=FLAKY)
    result = pytester.runpytest("experiments/", "--faultloop-pool=own")
    result.stdout.fnmatch_lines(
        [
            "faultloop: pass rates (95 % interval): restart_correct 4/4 (*), rank_primary 3/4 (*",
            "faultloop: Flaky cells (1; each counts as a failure for the stop condition):",
            "faultloop: - `GPU_SLEEP:1:5:2` rank_primary: 2/3, failed in #2",
        ]
    )
    session = only_session(base)
    report = (session / "experiments_report.md").read_text()
    assert "### Trials" in report
    assert "| GPU_SLEEP:1:5:2 | 3/3 [44–100%] | 2/3 [21–94%] |" in report
    assert "pass^N (every trial passed): 4/5 cells." in report
    assert "- `GPU_SLEEP:1:5:2` rank_primary: 2/3, failed in #2" in report


def test_replayed_cases_run_n_times_and_deterministic_answers_are_said_to_be(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    from test_plugin_replay import SIGKILL_RANK3, write_case

    monkeypatch.setenv("BASE_EXPERIMENTS_DIR", str(pytester.path / "out"))
    write_case(
        pytester.path / "corpus" / "demo",
        "kill3",
        'culprit = [3]\nnature = ["crash", "signal"]\ndecision = "STOP"',
        SIGKILL_RANK3,
    )
    result = pytester.runpytest("corpus/", "--faultloop-trials", "2")
    result.assert_outcomes(passed=4, skipped=1)
    session = only_session(pytester.path / "out")
    assert sorted(p.name for p in session.glob("kill3_t*")) == ["kill3_t1", "kill3_t2"]
    report = (session / "experiments_report.md").read_text()
    assert (
        "Experiments whose trials all agreed on every dimension: 1/1 (deterministic here" in report
    )
