"""A re-analysis keeps the session's earlier scoring as a revision and pairs with it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.fake_stages import make_project, started
from support.sessions import only_session, sessions

from pytest_faultloop.__main__ import main

POOL = {"p": "GPU_SLEEP:1:5:2\nGPU_SLEEP:0:5:2\nSIGKILL:1:5:2\n"}
RESCORE = ("experiments/", "--faultloop-reanalyze", "--faultloop-session")


def _results(directory: Path) -> dict[str, bytes]:
    return {p.parent.name: p.read_bytes() for p in sorted(directory.glob("*/result.json"))}


def _verdicts(pytester: pytest.Pytester, verdicts: dict[str, dict[str, str]]) -> None:
    (pytester.path / "verdicts.json").write_text(json.dumps(verdicts))


def test_each_reanalysis_keeps_the_scoring_it_replaced_and_compares_with_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = make_project(pytester, monkeypatch, pools=POOL)
    pytester.runpytest("experiments/", "--faultloop-pool=p").assert_outcomes(passed=15)
    session = only_session(base)
    first_scoring = _results(session)
    (pytester.path / "jobs.log").unlink()

    _verdicts(pytester, {"SIGKILL:1:5:2": {"rank_any": "false"}})
    pytester.runpytest(*RESCORE, "last").assert_outcomes(passed=14, failed=1)
    _verdicts(pytester, {"GPU_SLEEP:0:5:2": {"rank_primary": "false"}})
    third = pytester.runpytest(*RESCORE, "last", "--faultloop-compare", "previous")

    third.assert_outcomes(passed=14, failed=1)
    assert started(pytester) == []
    revisions = session / "revisions"
    index = [json.loads(line) for line in (revisions / "revisions.jsonl").read_text().splitlines()]
    assert [(r["name"], r["rescored"]) for r in index] == [("r0", None), ("r1", "r0"), ("r2", "r1")]
    assert _results(revisions / "r0") == first_scoring  # byte for byte
    assert _results(revisions / "r2") == _results(session)  # the newest is the session's own
    r1 = json.loads((revisions / "r1" / "n2_SIGKILL_r1_i5" / "result.json").read_text())
    assert r1["verdict"]["rank_any"] == "false"
    history = (base / "fault_injection" / "history.jsonl").read_text().splitlines()
    assert [(json.loads(h)["revision"], json.loads(h)["rescored"]) for h in history] == [
        (None, None),
        ("r1", "r0"),
        ("r2", "r1"),
    ]
    third.stdout.fnmatch_lines(
        [
            f"faultloop: revision {session}@r2 (re-scored r1)",
            f"faultloop: compared {session}@r1 -> {session}: 3 cell(s) scored in both",
            "faultloop: rank_primary: 0 improved, 1 regressed, 2 same; *",
            "faultloop: rank_any: 1 improved, 0 regressed, 2 same; *",
        ]
    )

    by_name = pytester.runpytest(*RESCORE, "last", "--faultloop-compare", "r0")
    by_name.stdout.fnmatch_lines([f"faultloop: compared {session}@r0 -> {session}: *"])
    assert "SIGKILL:1:5:2 rank_any" not in by_name.stdout.str()  # r0 and now agree on it


def test_compare_last_after_reanalysing_an_older_session_pairs_that_session(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not whatever record came before in the history (another session, other jobs)."""
    base = make_project(pytester, monkeypatch, pools=POOL)
    pytester.runpytest("experiments/", "--faultloop-pool=p").assert_outcomes(passed=15)
    older = only_session(base)
    _verdicts(
        pytester, {key: {"rank_any": "false"} for key in ("GPU_SLEEP:1:5:2", "SIGKILL:1:5:2")}
    )
    pytester.runpytest("experiments/", "--faultloop-pool=p").assert_outcomes(passed=13, failed=2)
    assert len(sessions(base)) == 2
    _verdicts(
        pytester, {key: {"rank_any": "false"} for key in ("GPU_SLEEP:1:5:2", "SIGKILL:1:5:2")}
    )

    result = pytester.runpytest(*RESCORE, str(older), "--faultloop-compare", "last")

    result.assert_outcomes(passed=13, failed=2)
    result.stdout.fnmatch_lines(
        [
            f"faultloop: compared {older}@r0 -> {older}: 3 cell(s) scored in both",
            "faultloop: overall: 0 improved, 2 regressed, 1 same; *",
        ]
    )


@pytest.mark.parametrize(
    ("target", "says"),
    [
        ("/nope", "not 'last', 'previous', a revision of the run's session"),
        ("previous", "pairs a re-analysis with the revision it re-scores"),
    ],
)
def test_an_unknown_compare_target_is_refused_before_any_job(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, target: str, says: str
) -> None:
    make_project(pytester, monkeypatch, pools=POOL)
    result = pytester.runpytest("experiments/", "--faultloop-pool=p", "--faultloop-compare", target)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--faultloop-compare {target}: {says}*"])
    assert started(pytester) == []


def test_an_unknown_revision_names_the_ones_the_session_has(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = make_project(pytester, monkeypatch, pools=POOL)
    pytester.runpytest("experiments/", "--faultloop-pool=p").assert_outcomes(passed=15)
    pytester.runpytest(*RESCORE, "last").assert_outcomes(passed=15)
    session = only_session(base)
    result = pytester.runpytest(*RESCORE, "last", "--faultloop-compare", f"{session}@r7")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*session {session} has no revision 'r7' (it has r0, r1)*"])


def test_the_cli_compares_revisions_and_takes_last(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    base = make_project(pytester, monkeypatch, pools=POOL)
    pytester.runpytest("experiments/", "--faultloop-pool=p").assert_outcomes(passed=15)
    _verdicts(pytester, {"SIGKILL:1:5:2": {"rank_any": "false"}})
    pytester.runpytest(*RESCORE, "last").assert_outcomes(passed=14, failed=1)
    session = only_session(base)
    capsys.readouterr()

    assert main(["compare", "last@r0", "last@r1", "--base-dir", str(base)]) == 0

    out = capsys.readouterr().out
    assert f"compared {session}@r0 -> {session}@r1: 3 cell(s) paired" in out
    assert "| rank_any | 0 | 1 | 2 |" in out
