"""Continuing a session and re-analysing stored artifacts without submitting anything."""

from __future__ import annotations

import json

import pytest
from support.fake_stages import make_project, started

POOL = {"p": "GPU_SLEEP:1:5:2\nGPU_SLEEP:0:5:2\nSIGKILL:1:5:2\n"}


def test_session_last_reuses_finished_experiments(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = make_project(pytester, monkeypatch, pools=POOL)
    pytester.runpytest("experiments/", "--faultloop-pool=p", "-k", "GPU_SLEEP:1").assert_outcomes(
        passed=5, deselected=10
    )
    (pytester.path / "jobs.log").unlink()
    result = pytester.runpytest("experiments/", "--faultloop-pool=p", "--faultloop-session", "last")
    result.assert_outcomes(passed=15)
    assert sorted(started(pytester)) == ["GPU_SLEEP:0:5:2", "SIGKILL:1:5:2"]
    (session,) = (base / "fault_injection").glob("2*")
    rows = (session / "experiments.tsv").read_text().splitlines()[1:]
    assert len(rows) == 3


def test_reanalyze_rejudges_stored_results_without_jobs(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = make_project(pytester, monkeypatch, pools=POOL)
    pytester.runpytest("experiments/", "--faultloop-pool=p").assert_outcomes(passed=15)
    (pytester.path / "jobs.log").unlink()
    (pytester.path / "verdicts.json").write_text(json.dumps({"SIGKILL:1:5:2": {"rank_any": "false"}}))
    result = pytester.runpytest("experiments/", "--faultloop-pool=p", "--faultloop-reanalyze",
                                "--faultloop-session", "last")
    result.assert_outcomes(passed=14, failed=1)
    assert started(pytester) == []
    (session,) = (base / "fault_injection").glob("2*")
    stored = json.loads((session / "n2_SIGKILL_r1_i5" / "result.json").read_text())
    assert stored["verdict"]["rank_any"] == "false"
    assert "| SIGKILL | 2 | 1 | 5 |" in (session / "experiments_report.md").read_text()

    (pytester.path / "verdicts.json").write_text("{}")
    again = pytester.runpytest("experiments/", "--faultloop-pool=p", "--faultloop-reanalyze",
                               "--faultloop-session", "last", "--lf")
    again.assert_outcomes(passed=1, deselected=14)
    assert started(pytester) == []


def test_reanalyze_of_an_experiment_never_run_is_an_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester, monkeypatch, pools=POOL)
    pytester.runpytest("experiments/", "--faultloop-pool=p", "-k", "SIGKILL")
    result = pytester.runpytest("experiments/", "--faultloop-pool=p", "--faultloop-reanalyze",
                                "--faultloop-session", "last")
    result.assert_outcomes(passed=5, errors=10)
    result.stdout.fnmatch_lines(["*GPU_SLEEP:1:5:2: infrastructure: --faultloop-reanalyze: no stored job for GPU_SLEEP:1:5:2*"])


def test_history_records_each_run_and_compare_lists_changes(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = make_project(pytester, monkeypatch, pools=POOL)
    pytester.runpytest("experiments/", "--faultloop-pool=p").assert_outcomes(passed=15)
    (pytester.path / "verdicts.json").write_text(json.dumps({"SIGKILL:1:5:2": {"rank_any": "false"}}))
    result = pytester.runpytest("experiments/", "--faultloop-pool=p", "--faultloop-reanalyze",
                                "--faultloop-session", "last", "--faultloop-compare", "last")
    lines = (base / "fault_injection" / "history.jsonl").read_text().splitlines()
    assert len(lines) == 2
    out = result.stdout.str()
    assert "SIGKILL:1:5:2" in out and "rank_any" in out
    result.stdout.fnmatch_lines(["faultloop: stop condition: *"])
