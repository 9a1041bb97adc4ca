"""Experiments as Python tests (the ``faultloop`` fixture and marker) on the run's one scheduler:
the fake-stage project counts jobs and checks the in-flight limit from the jobs' own times."""

from __future__ import annotations

from collections import Counter

import pytest
from support.fake_stages import make_project, max_in_flight, started
from support.sessions import only_session

POOLS = {"p": "SIGKILL:1:5:2 GPU_SLEEP:3:5:2 SIGTERM:0:5:2 SEGFAULT:2:5:2 OS_ABORT:5:5:2\n"}

TESTS = """
import pytest

@pytest.mark.faultloop("SIGKILL:1:5:2", "LOCK_GIL:4:5:2", "SIGINT:6:5:2")
def test_marked(faultloop_result):
    faultloop_result.assert_dimension("rank_primary")
    assert faultloop_result.experiment.entry.rank in (1, 4, 6)

def test_compared(faultloop):
    plain = faultloop.run("GPU_ERROR:2:5:2")
    later = faultloop.run("GPU_ERROR:2:5:2", fault_delay=7)
    assert later.experiment.key == "GPU_ERROR:2:5:2@fault_delay=7"
    assert plain.analyses.log.attribution_text == later.analyses.log.attribution_text
    assert faultloop.run("GPU_ERROR:2:5:2") == plain
"""
PYTHON_KEYS = {"LOCK_GIL:4:5:2", "SIGINT:6:5:2", "GPU_ERROR:2:5:2", "GPU_ERROR:2:5:2@fault_delay=7"}
POOL_KEYS = set(POOLS["p"].split())


@pytest.mark.parametrize("workers", [[], ["-n", "2"], ["-n", "3"]], ids=["single", "n2", "n3"])
def test_pool_items_and_python_tests_share_the_slots_and_run_each_job_once(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, workers: list[str]
) -> None:
    base = make_project(pytester, monkeypatch, pools=POOLS)
    pytester.makepyfile(test_experiments=TESTS)
    monkeypatch.setenv("FAKE_JOB_SECONDS", "0.3")
    result = pytester.runpytest_subprocess(
        "experiments/", "test_experiments.py", "--faultloop-pool=p", *workers
    )
    result.assert_outcomes(passed=25 + 4)
    jobs = Counter(started(pytester))
    assert jobs == Counter(POOL_KEYS | PYTHON_KEYS)  # SIGKILL:1:5:2 ran once, for both
    assert max_in_flight(pytester) <= 2
    result.stdout.fnmatch_lines(
        [
            f"faultloop: {len(POOL_KEYS | PYTHON_KEYS)} experiment(s): "
            f"{len(POOL_KEYS | PYTHON_KEYS)} scored"
        ]
    )
    session = only_session(base)
    report = (session / "experiments_report.md").read_text()
    assert "GPU_ERROR" in report and "LOCK_GIL" in report
    variant = [d.name for d in session.iterdir() if d.name.startswith("n2_GPU_ERROR_r2_i5_")]
    assert len(variant) == 1 and (session / variant[0] / "result.json").is_file()


def test_marker_entries_parametrise_the_test_with_the_entries_as_ids(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester, monkeypatch, pools=POOLS)
    pytester.makepyfile(
        test_ids="""
import pytest

@pytest.mark.faultloop("SIGKILL:1:5:2", "GPU_SLEEP:3:5:2", fault_delay=2)
def test_marked(faultloop_result):
    pass

@pytest.mark.parametrize("faultloop_result", [pytest.param("SEGFAULT:2:5:2"),
                                              pytest.param("OS_ABORT:5:5:2", id="abort")],
                         indirect=True)
def test_indirect(faultloop_result):
    pass

@pytest.mark.faultloop("SIGTERM:0:5:2")
def test_single(faultloop_result):
    pass
"""
    )
    result = pytester.runpytest("test_ids.py", "--collect-only", "-q")
    result.stdout.fnmatch_lines(
        [
            "test_ids.py::test_marked[[]SIGKILL:1:5:2[]]",
            "test_ids.py::test_marked[[]GPU_SLEEP:3:5:2[]]",
            "test_ids.py::test_indirect[[]SEGFAULT:2:5:2[]]",
            "test_ids.py::test_indirect[[]abort[]]",
            "test_ids.py::test_single",
        ]
    )
    ran = pytester.runpytest("test_ids.py", "-k", "GPU_SLEEP or abort")
    ran.assert_outcomes(passed=2, deselected=3)
    # no pool collected: the header still names the backend and what answers each stage
    ran.stdout.fnmatch_lines(
        [
            "faultloop: backend=local workload=tiny_gloo *",
            "faultloop: judge=conftest.py:pytest_faultloop_judge log_analyzer=conftest.py:*",
        ]
    )
    assert sorted(started(pytester)) == ["GPU_SLEEP:3:5:2@fault_delay=2", "OS_ABORT:5:5:2"]


def test_a_failing_dimension_shows_the_judges_notes_and_the_line(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(
        pytester,
        monkeypatch,
        pools=POOLS,
        verdicts={"SIGKILL:1:5:2": {"rank_primary": "false", "fault_described": "N/A"}},
    )
    pytester.makepyfile(
        test_fail="""
import pytest

@pytest.mark.faultloop("SIGKILL:1:5:2")
def test_primary(faultloop_result):
    faultloop_result.assert_dimension("restart_correct")
    faultloop_result.assert_dimension("rank_primary")

def test_not_applicable(faultloop):
    faultloop.run("SIGKILL:1:5:2").assert_dimension("fault_described")

def test_all(faultloop):
    faultloop.run("SIGKILL:1:5:2").assert_all()
"""
    )
    result = pytester.runpytest("test_fail.py", "-rs")
    result.assert_outcomes(failed=2, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "*_ test_primary _*",
            "SIGKILL:1:5:2 rank_primary = false (expected true)",
            "judge notes: fake notes for SIGKILL:1:5:2",
            '(test_fail.py:6: faultloop_result.assert_dimension("rank_primary"))',
            "*_ test_all _*",
            "SIGKILL:1:5:2 rank_primary = false (expected true)",
            "*fault_described is N/A: no expectation for SIGKILL:1:5:2*",
        ]
    )
    assert "Traceback" not in result.stdout.str()
    assert started(pytester) == ["SIGKILL:1:5:2"]


def test_an_experiment_without_a_valid_run_errors_the_marked_test(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester, monkeypatch, pools=POOLS, never_fired=["SIGKILL:1:5:2"])
    pytester.makepyfile(
        test_broken="""
import pytest

@pytest.mark.faultloop("SIGKILL:1:5:2")
def test_primary(faultloop_result):
    pass
"""
    )
    result = pytester.runpytest("test_broken.py", "--faultloop-retries-invalid=0")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["SIGKILL:1:5:2: run_invalid: the fault was armed but never fired*"]
    )


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            'faultloop.run("SIGKIL:1:5:2")',
            "faultloop.run('SIGKIL:1:5:2'): unknown fault type 'SIGKIL' (valid: GPU_ERROR*",
        ),
        (
            'faultloop.run("SIGKILL:9:5:2")',
            "faultloop.run('SIGKILL:9:5:2'): rank 9 is outside [[]0, 8) for 2 node(s) x "
            "GPUS_PER_NODE=4",
        ),
        (
            'faultloop.run("SIGKILL:1:5:2", batch_size=4)',
            "faultloop.run('SIGKILL:1:5:2'): 'batch_size' is not a per-experiment setting (those are "
            "workload, gpus_per_node, time, fault_delay, sbatch_script, env)*",
        ),
        (
            'faultloop.run("SIGKILL:1:5:2", time="soon")',
            "faultloop.run('SIGKILL:1:5:2'): time='soon': not a Slurm time limit*",
        ),
        (
            'faultloop.run("SIGKILL:1:5:2", workload="nope")',
            "WORKLOAD='nope' (from faultloop.run('SIGKILL:1:5:2', workload=...)): unknown workload*",
        ),
        (
            'faultloop.run("SIGKILL:1:5:2", fault_delay=-1)',
            "faultloop.run('SIGKILL:1:5:2'): fault_delay=-1: Input should be greater than or equal "
            "to 0",
        ),
    ],
)
def test_bad_calls_fail_with_a_message_naming_the_value(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, call: str, message: str
) -> None:
    make_project(pytester, monkeypatch, pools=POOLS)
    pytester.makepyfile(test_bad=f"def test_call(faultloop):\n    {call}\n")
    result = pytester.runpytest("test_bad.py")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([message, f"(test_bad.py:2: {call})"])
    assert "Traceback" not in result.stdout.str() and started(pytester) == []


def test_a_marked_test_without_an_entry_says_how_to_give_one(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester, monkeypatch, pools=POOLS)
    pytester.makepyfile(test_none="def test_nothing(faultloop_result):\n    pass\n")
    result = pytester.runpytest("test_none.py")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "test_none.py::test_nothing: faultloop_result needs the "
            "experiment: mark the test @pytest.mark.faultloop(*"
        ]
    )


def test_a_reanalysis_rescores_python_test_experiments_without_a_job(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester, monkeypatch, pools=POOLS)
    pytester.makepyfile(test_experiments=TESTS)
    pytester.runpytest("experiments/", "test_experiments.py", "--faultloop-pool=p").assert_outcomes(
        passed=29
    )
    before = len(started(pytester))
    again = pytester.runpytest(
        "experiments/",
        "test_experiments.py",
        "--faultloop-reanalyze",
        "--faultloop-session",
        "last",
    )
    again.assert_outcomes(passed=29)
    assert len(started(pytester)) == before


def test_the_plugin_stays_out_of_runs_that_do_not_use_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain="def test_plain():\n    assert True\n")
    result = pytester.runpytest("test_plain.py", "-n", "2")
    result.assert_outcomes(passed=1)
    assert "faultloop:" not in result.stdout.str()


def test_replay_scores_a_stored_case_with_the_builtin_modules_and_no_job(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    from test_plugin_replay import SIGKILL_RANK3, write_case

    monkeypatch.setenv("BASE_EXPERIMENTS_DIR", str(pytester.path / "out"))
    write_case(
        pytester.path / "cases",
        "kill3",
        'culprit = [3]\nnature = ["crash", "signal"]\ndecision = "STOP"',
        SIGKILL_RANK3,
    )
    pytester.makepyfile(
        test_replay="""
def test_kill3(faultloop):
    result = faultloop.replay("cases/kill3")
    result.assert_all()
    assert result.job is None and result.analyses.log.primary[0].rank == 3
"""
    )
    result = pytester.runpytest("test_replay.py")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["faultloop: 1 experiment(s): 1 scored"])
