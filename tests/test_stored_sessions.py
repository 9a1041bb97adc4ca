"""Stored sessions and their schema version: the committed real sessions of
``tests/fixtures/sessions/v1`` (written before stored files carried a ``schema_version``: version
1) are read, reported, compared and re-scored by today's code with the answers they were stored
with; what is saved now carries its version, and a newer version than this code reads is refused
in one line naming the file and the version."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pytest_faultloop.__main__ import main
from pytest_faultloop.engine.leaderboard import configurations, score_session
from pytest_faultloop.models.experiment_result import RESULT_SCHEMA_VERSION
from pytest_faultloop.report.history import (
    HISTORY_SCHEMA_VERSION,
    append_history,
    read_history,
    record_from_results,
)
from pytest_faultloop.scoring.dimensions import DIMENSIONS
from pytest_faultloop.scoring.pass_rule import DEFAULT_RULE
from pytest_faultloop.store.results import load_results
from pytest_faultloop.store.session_dir import SessionDir

REPO = Path(__file__).resolve().parents[1]
V1 = REPO / "tests" / "fixtures" / "sessions" / "v1"
SESSIONS = {"builtin": "20261207_132053", "naive": "20261207_132117"}
"""The log analyzer each stored session ran, and its stamp (the FR analyzer and judge are the
built-in ones in both)."""


@pytest.fixture
def base(tmp_path: Path) -> Path:
    """A copy of the stored base directory (reports are written into a session)."""
    shutil.copytree(V1, tmp_path / "v1")
    return tmp_path / "v1"


def stored_verdicts(session: Path) -> dict[str, dict[str, str]]:
    """Experiment directory -> its stored verdict labels, read from the JSON as it lies."""
    return {
        path.parent.name: {
            d.name: json.loads(path.read_text())["verdict"][d.name] for d in DIMENSIONS
        }
        for path in sorted(session.glob("*/result.json"))
    }


@pytest.mark.parametrize("stamp", SESSIONS.values())
def test_a_stored_v1_session_loads_with_its_verdicts(stamp: str) -> None:
    session = V1 / "fault_injection" / stamp
    unreadable: list[str] = []
    results = load_results(session, unreadable=unreadable)
    assert unreadable == []
    loaded = {
        r.experiment.dirname: {d.name: r.verdict.value(d.name) for d in DIMENSIONS}
        for r in results
        if r.verdict is not None
    }
    assert loaded == stored_verdicts(session)
    assert len(loaded) == 2
    assert {r.schema_version for r in results} == {1}  # not stored: version 1


@pytest.mark.parametrize("stamp", SESSIONS.values())
def test_a_stored_v1_session_reports_as_its_run_did(
    base: Path, stamp: str, capsys: pytest.CaptureFixture[str]
) -> None:
    report = base / "fault_injection" / stamp / "experiments_report.md"
    written_by_the_run = report.read_bytes()
    report.unlink()
    assert main(["report", stamp, "--base-dir", str(base)]) == 0
    assert capsys.readouterr().out.strip() == str(report)
    assert report.read_bytes() == written_by_the_run


@pytest.mark.parametrize("analyzer", SESSIONS)
def test_a_stored_v1_session_re_scores_to_its_stored_verdicts(analyzer: str) -> None:
    session = V1 / "fault_injection" / SESSIONS[analyzer]
    (scored,) = score_session(session, configurations([analyzer], [], []))
    stored = {r.experiment.key: r.verdict for r in load_results(session)}
    assert scored.verdicts == stored
    assert all(v is not None for v in stored.values())


def test_the_stored_v1_history_holds_what_its_sessions_scored() -> None:
    unreadable: list[str] = []
    history = read_history(V1 / "fault_injection" / "history.jsonl", unreadable=unreadable)
    assert unreadable == []
    assert [Path(r.session).name for r in history] == list(SESSIONS.values())
    for record in history:
        results = load_results(V1 / "fault_injection" / Path(record.session).name)
        assert record.cells == record_from_results(record.session, results).cells


def test_two_stored_v1_sessions_compare(base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before, after = (stored_verdicts(base / "fault_injection" / s) for s in SESSIONS.values())
    assert main(["compare", *SESSIONS.values(), "--base-dir", str(base)]) == 0
    out = capsys.readouterr().out
    assert "2 cell(s) paired" in out
    for dimension in DIMENSIONS:
        passed = [
            (DEFAULT_RULE.passes(dimension.name, before[cell][dimension.name]),
             DEFAULT_RULE.passes(dimension.name, after[cell][dimension.name]))
            for cell in before
        ]  # fmt: skip
        regressed = sum(was and not now for was, now in passed)
        improved = sum(now and not was for was, now in passed)
        row = f"| {dimension.name} | {improved} | {regressed} | {2 - improved - regressed} |"
        assert row in out, out


def test_a_result_and_a_history_record_are_saved_with_their_schema_version(
    tmp_path: Path,
) -> None:
    result = load_results(V1 / "fault_injection" / SESSIONS["builtin"])[0]
    session = SessionDir(tmp_path / "session", "# report\n")
    session.write_result(result)
    (stored,) = (tmp_path / "session").glob("*/result.json")
    assert json.loads(stored.read_text())["schema_version"] == RESULT_SCHEMA_VERSION
    history = tmp_path / "history.jsonl"
    append_history(history, record_from_results("s1", [result]))
    assert json.loads(history.read_text())["schema_version"] == HISTORY_SCHEMA_VERSION
    assert read_history(history)[0].cells == record_from_results("s1", [result]).cells


def test_a_result_of_a_newer_schema_is_refused_naming_its_file_and_version(
    base: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = base / "fault_injection" / SESSIONS["builtin"]
    newer = session / "n2_NONE_r0_i5" / "result.json"
    stored = json.loads(newer.read_text())
    newer.write_text(json.dumps({**stored, "schema_version": RESULT_SCHEMA_VERSION + 1}))
    assert main(["report", SESSIONS["builtin"], "--base-dir", str(base)]) == 0
    assert capsys.readouterr().err == (
        f"skipped unreadable result {newer}: schema_version {RESULT_SCHEMA_VERSION + 1} is newer "
        f"than this pytest-faultloop reads ({RESULT_SCHEMA_VERSION}): read it with the "
        "pytest-faultloop that wrote it, or a newer one\n"
    )
    assert [r.experiment.dirname for r in load_results(session)] == ["n2_GPU_SLEEP_r1_i5"]


def test_a_history_record_of_a_newer_schema_is_skipped_naming_its_line_and_version(
    base: Path,
) -> None:
    history = base / "fault_injection" / "history.jsonl"
    first = json.loads(history.read_text().splitlines()[0])
    with history.open("a") as out:
        out.write(json.dumps({**first, "schema_version": HISTORY_SCHEMA_VERSION + 1}) + "\n")
    unreadable: list[str] = []
    assert len(read_history(history, unreadable=unreadable)) == 2
    assert unreadable == [
        f"{history}:3: schema_version {HISTORY_SCHEMA_VERSION + 1} is newer than this "
        f"pytest-faultloop reads ({HISTORY_SCHEMA_VERSION}): read it with the pytest-faultloop "
        "that wrote it, or a newer one"
    ]


def test_a_stored_v1_session_re_analyzes_under_pytest(
    pytester: pytest.Pytester, base: Path
) -> None:
    """A re-analysis keeps the v1 results as its revision r0, byte for byte, and re-scores them
    to the same labels, now saved with their schema version."""
    session = base / "fault_injection" / SESSIONS["builtin"]
    stored = {p.parent.name: p.read_bytes() for p in session.glob("*/result.json")}
    (pytester.path / "experiments").mkdir()
    for name in ("workloads.toml", "smoke.pool"):  # a re-analysis collects below a pool's dir
        shutil.copy(REPO / "experiments" / name, pytester.path / "experiments")
    result = pytester.runpytest(
        "experiments/", f"--faultloop-session={session}", "--faultloop-reanalyze"
    )
    result.assert_outcomes(passed=2 * len(DIMENSIONS))
    kept = {p.parent.name: p.read_bytes() for p in (session / "revisions" / "r0").glob("*/*.json")}
    assert kept == stored
    assert stored_verdicts(session) == stored_verdicts(session / "revisions" / "r0")
    for path in session.glob("*/result.json"):
        assert json.loads(path.read_text())["schema_version"] == RESULT_SCHEMA_VERSION
