"""Continuing a session and re-analysing stored artifacts without submitting anything."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.fake_stages import make_project, started
from support.sessions import only_session

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
    session = only_session(base)
    rows = (session / "experiments.tsv").read_text().splitlines()[1:]
    assert len(rows) == 3


def test_reanalyze_rejudges_stored_results_without_jobs(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = make_project(pytester, monkeypatch, pools=POOL)
    pytester.runpytest("experiments/", "--faultloop-pool=p").assert_outcomes(passed=15)
    (pytester.path / "jobs.log").unlink()
    (pytester.path / "verdicts.json").write_text(
        json.dumps({"SIGKILL:1:5:2": {"rank_any": "false"}})
    )
    result = pytester.runpytest(
        "experiments/", "--faultloop-pool=p", "--faultloop-reanalyze", "--faultloop-session", "last"
    )
    result.assert_outcomes(passed=14, failed=1)
    assert started(pytester) == []
    session = only_session(base)
    stored = json.loads((session / "n2_SIGKILL_r1_i5" / "result.json").read_text())
    assert stored["verdict"]["rank_any"] == "false"
    assert "| SIGKILL | 2 | 1 | 5 |" in (session / "experiments_report.md").read_text()

    (pytester.path / "verdicts.json").write_text("{}")
    again = pytester.runpytest(
        "experiments/",
        "--faultloop-pool=p",
        "--faultloop-reanalyze",
        "--faultloop-session",
        "last",
        "--lf",
    )
    again.assert_outcomes(passed=1, deselected=14)
    assert started(pytester) == []


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def test_reanalyze_scores_exactly_the_sessions_experiments(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a pool selection a re-analysis scores what the session stored, whatever the
    default pool lists: no errors, no new experiment directories, the history record right."""
    base = make_project(pytester, monkeypatch, pools={**POOL, "default": "SIGTERM:1:5:2\n"})
    pytester.runpytest("experiments/", "--faultloop-pool=p", "-k", "SIGKILL").assert_outcomes(
        passed=5, deselected=10
    )
    session = only_session(base)
    dirs = sorted(p.name for p in session.iterdir() if p.is_dir())
    (pytester.path / "jobs.log").unlink()
    result = pytester.runpytest(
        "experiments/", "--faultloop-reanalyze", "--faultloop-session", "last"
    )
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines(["faultloop: * pools=p (1 experiments stored in the session)*"])
    assert started(pytester) == []
    # the re-analysis keeps both scorings as revisions; no experiment directory is added
    assert sorted(p.name for p in session.iterdir() if p.is_dir()) == [*dirs, "revisions"]
    rows = [
        r
        for r in (session / "experiments_report.md").read_text().splitlines()
        if "| SIGKILL | 2 | 1 | 5 |" in r
    ]
    assert len(rows) == 1
    record = json.loads((base / "fault_injection" / "history.jsonl").read_text().splitlines()[-1])
    assert "SIGKILL:1:5:2" in json.dumps(record) and "GPU_SLEEP" not in json.dumps(record)


def test_reanalyze_narrows_with_k(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester, monkeypatch, pools=POOL)
    pytester.runpytest("experiments/", "--faultloop-pool=p").assert_outcomes(passed=15)
    result = pytester.runpytest(
        "experiments/", "--faultloop-reanalyze", "--faultloop-session", "last", "-k", "GPU_SLEEP:0"
    )
    result.assert_outcomes(passed=5, deselected=10)


@pytest.mark.parametrize("selection", [("--faultloop-pool=other",), ("experiments/other.pool",)])
def test_reanalyze_with_a_pool_the_session_never_ran_is_refused_untouched(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, selection: tuple[str, ...]
) -> None:
    base = make_project(pytester, monkeypatch, pools={**POOL, "other": "SIGTERM:1:5:2\n"})
    pytester.runpytest("experiments/", "--faultloop-pool=p", "-k", "SIGKILL")
    root = base / "fault_injection"
    before = _snapshot(root)
    args = selection if selection[0].endswith(".pool") else ("experiments/", *selection)
    result = pytester.runpytest(*args, "--faultloop-reanalyze", "--faultloop-session", "last")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --faultloop-reanalyze: pool * lists 1 experiment(s) that "
            "session * never ran (SIGTERM:1:5:2); drop the pool selection*"
        ]
    )
    assert _snapshot(root) == before


def test_reanalyze_of_a_pool_the_session_holds_in_part_is_refused(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester, monkeypatch, pools=POOL)
    pytester.runpytest("experiments/", "--faultloop-pool=p", "-k", "SIGKILL")
    result = pytester.runpytest(
        "experiments/", "--faultloop-pool=p", "--faultloop-reanalyze", "--faultloop-session", "last"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*lists 2 experiment(s) that session * never ran (GPU_SLEEP:0:5:2, GPU_SLEEP:1:5:2)*"]
    )


def test_a_reanalysis_that_breaks_keeps_the_stored_verdict(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = make_project(pytester, monkeypatch, pools=POOL)
    pytester.runpytest("experiments/", "--faultloop-pool=p").assert_outcomes(passed=15)
    session = only_session(base)
    stored = (session / "n2_SIGKILL_r1_i5" / "result.json").read_bytes()
    (pytester.path / "verdicts.json").write_text(json.dumps({"SIGKILL:1:5:2": {"broken": "down"}}))
    result = pytester.runpytest(
        "experiments/", "--faultloop-reanalyze", "--faultloop-session", "last"
    )
    result.assert_outcomes(passed=10, errors=5)
    assert (session / "n2_SIGKILL_r1_i5" / "result.json").read_bytes() == stored


def test_compare_last_after_a_reanalysis_pairs_it_with_the_run_it_rescored(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = make_project(pytester, monkeypatch, pools=POOL)
    pytester.runpytest("experiments/", "--faultloop-pool=p").assert_outcomes(passed=15)
    session = only_session(base)
    (pytester.path / "verdicts.json").write_text(
        json.dumps({"SIGKILL:1:5:2": {"rank_any": "false"}})
    )
    rescore = ["experiments/", "--faultloop-pool=p", "--faultloop-reanalyze"]
    result = pytester.runpytest(
        *rescore, "--faultloop-session", "last", "--faultloop-compare", "last"
    )
    result.assert_outcomes(passed=14, failed=1)
    lines = (base / "fault_injection" / "history.jsonl").read_text().splitlines()
    assert len(lines) == 2
    out = result.stdout.str()
    assert "no such session" not in out and "no record" not in out
    chance = "McNemar p=1: not distinguishable from chance"
    result.stdout.fnmatch_lines(
        [
            f"faultloop: compared {session}@r0 -> {session}: 3 cell(s) scored in both",
            f"faultloop: restart_correct: 0 improved, 0 regressed, 3 same; {chance}",
            f"faultloop: rank_any: 0 improved, 1 regressed, 2 same; {chance}",
            f"faultloop: overall: 0 improved, 1 regressed, 2 same; {chance}",
            "faultloop:   regressed: SIGKILL:1:5:2 rank_any: true -> false",
        ]
    )
    # a session directory: its latest record other than this run's (the re-analysis above)
    again = pytester.runpytest(
        *rescore, "--faultloop-session", str(session), "--faultloop-compare", str(session)
    )
    again.stdout.fnmatch_lines([f"faultloop: rank_any: 0 improved, 0 regressed, 3 same; {chance}"])
    assert "regressed: SIGKILL" not in again.stdout.str()


def test_compare_last_counts_changed_verdicts_between_two_runs(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = [f"GPU_SLEEP:{rank}:5:2" for rank in range(6)]
    verdicts = {key: {"rank_primary": "false"} for key in keys}
    make_project(pytester, monkeypatch, pools={"six": "\n".join(keys)}, verdicts=verdicts)
    pytester.runpytest("experiments/", "--faultloop-pool=six").assert_outcomes(passed=24, failed=6)
    (pytester.path / "verdicts.json").write_text(
        json.dumps({"GPU_SLEEP:5:5:2": {"restart_correct": "false"}})
    )
    result = pytester.runpytest(
        "experiments/", "--faultloop-pool=six", "--faultloop-compare", "last"
    )
    result.assert_outcomes(passed=29, failed=1)
    # hand: rank_primary 6 of 6 discordant pairs improved, 2 * C(6,0) / 2^6 = 0.03125; whole
    # cells 5 improved (GPU_SLEEP:5 fails both runs), 2 / 2^5 = 0.0625; restart_correct 1 of 1
    # regressed, 2 * C(1,0) / 2^1 = 1
    result.stdout.fnmatch_lines(
        [
            "faultloop: compared * -> *: 6 cell(s) scored in both",
            "faultloop: restart_correct: 0 improved, 1 regressed, 5 same; McNemar p=1: "
            "not distinguishable from chance",
            "faultloop: rank_primary: 6 improved, 0 regressed, 0 same; McNemar p=0.03125: "
            "distinguishable from chance",
            "faultloop: overall: 5 improved, 0 regressed, 1 same; McNemar p=0.0625: "
            "not distinguishable from chance",
            "faultloop:   improved: GPU_SLEEP:0:5:2 rank_primary: false -> true",
        ]
    )


def test_continuing_a_session_keeps_the_job_whose_result_is_unreadable(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A truncated result.json: before the experiment runs again, every file its earlier job
    left moves to attempts/<JOB_ID>/ byte for byte, and the run says so (progress, report)."""
    base = make_project(pytester, monkeypatch, pools=POOL)
    pytester.runpytest("experiments/", "--faultloop-pool=p", "-k", "SIGKILL").assert_outcomes(
        passed=5, deselected=10
    )
    session = only_session(base)
    directory = session / "n2_SIGKILL_r1_i5"
    job_id = (session / "experiments.tsv").read_text().splitlines()[1].split("\t")[0]
    (directory / "checkpoints" / "_dump_1").write_bytes(b"the earlier job's dump")
    truncated = (directory / "result.json").read_bytes()[:40]
    (directory / "result.json").write_bytes(truncated)
    before = _snapshot(directory)
    (pytester.path / "jobs.log").unlink()

    result = pytester.runpytest(
        "experiments/", "--faultloop-pool=p", "--faultloop-session", "last", "-k", "SIGKILL"
    )

    result.assert_outcomes(passed=5, deselected=10)
    assert started(pytester) == ["SIGKILL:1:5:2"]
    assert _snapshot(directory / "attempts" / job_id) == before
    stored = json.loads((directory / "result.json").read_text())
    assert [a["kind"] for a in stored["attempts"]] == ["unreadable_result"]
    assert stored["attempts"][0]["job"]["job_id"] == job_id
    events = (session / "events.log").read_text()
    assert "stored result of SIGKILL:1:5:2 unreadable" in events
    assert (
        "unreadable_result: its stored result was unreadable (result.json: not a valid "
        in (session / "experiments_report.md").read_text()
    )


def test_a_reanalysis_errors_the_experiment_whose_result_is_unreadable(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Never a silent drop: the unreadable result is an ERROR item naming the file, the header
    counts it, the run exits non-zero, and the file stays as it was."""
    base = make_project(pytester, monkeypatch, pools=POOL)
    pytester.runpytest("experiments/", "--faultloop-pool=p").assert_outcomes(passed=15)
    session = only_session(base)
    broken = session / "n2_GPU_SLEEP_r0_i5" / "result.json"
    broken.write_text('{"experiment": ')
    (pytester.path / "jobs.log").unlink()

    result = pytester.runpytest(
        "experiments/", "--faultloop-reanalyze", "--faultloop-session", "last"
    )

    result.assert_outcomes(passed=10, errors=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "faultloop: * pools=p (2 experiments stored in the session; 1 unreadable "
            "result.json (each an ERROR item))*",
            f"*{broken}: not a valid result*: this experiment cannot be re-scored*",
        ]
    )
    assert broken.read_text() == '{"experiment": '
    assert started(pytester) == []


def test_a_stored_job_the_infrastructure_ended_is_set_aside_before_it_runs_again(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job refused (or cancelled, or of unknown end) in an earlier run: continuing the
    session keeps its files under attempts/<JOB_ID>/ and the result lists that attempt."""
    base = make_project(pytester, monkeypatch, pools=POOL, submit_failed=["SIGKILL:1:5:2"])
    first = pytester.runpytest("experiments/", "--faultloop-pool=p", "-k", "SIGKILL")
    first.assert_outcomes(errors=5, deselected=10)
    session = only_session(base)
    directory = session / "n2_SIGKILL_r1_i5"
    job_id = json.loads((directory / "result.json").read_text())["job"]["job_id"]
    (directory / "logs" / "evidence.log").write_text("what the refused job left\n")
    before = _snapshot(directory)
    (pytester.path / "submit_failed.json").write_text("[]")

    again = pytester.runpytest(
        "experiments/", "--faultloop-pool=p", "--faultloop-session", "last", "-k", "SIGKILL"
    )

    again.assert_outcomes(passed=5, deselected=10)
    assert _snapshot(directory / "attempts" / job_id) == before
    attempts = json.loads((directory / "result.json").read_text())["attempts"]
    assert [(a["kind"], a["job"]["job_id"]) for a in attempts] == [("infrastructure", job_id)]
