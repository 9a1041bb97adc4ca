"""The CLI's session inputs: what is no session is refused as ``report`` refuses it, an
experiment directory given for its dumps points at ``checkpoints/``, and a session whose
``experiments.tsv`` was deleted says how to rebuild it, which ``rebuild-tsv`` does from the
``result.json`` files (its rows said to be rebuilt)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.fake_stages import make_project
from support.sessions import only_session

from pytest_faultloop.__main__ import main
from pytest_faultloop.store.session_dir import TSV_NAME

REPO = Path(__file__).resolve().parents[1]
POOL = "GPU_SLEEP:1:5:2\nSIGKILL:0:5:2\n"


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(argv)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.fixture
def session(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A finished session (fake stages): two experiments, the first resubmitted once (its
    fault never fired the first time): three jobs, three TSV rows."""
    base = make_project(pytester, monkeypatch, pools={"p": POOL}, never_fired=["GPU_SLEEP:1:5:2@1"])
    pytester.runpytest("experiments/", "--faultloop-pool=p").assert_outcomes(passed=10)
    return only_session(base)


@pytest.mark.parametrize("given", ["base directory", "experiment directory"])
def test_freeze_refuses_what_is_no_session_as_report_does(
    session: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], given: str
) -> None:
    """It said "froze 0 case(s)" and exited 0 (the job files it found read as unreadable
    results)."""
    path = session.parents[1] if given == "base directory" else session / "n2_GPU_SLEEP_r1_i5"
    for command in (["report", str(path)], ["freeze", str(path), "--into", str(tmp_path / "c")]):
        status, out, err = run_cli(command, capsys)
        assert (status, out) == (2, ""), err
        assert err == (
            f"error: {path}: not a session directory (no {TSV_NAME}); pass "
            "…/fault_injection/<stamp>, its <stamp> or 'last'\n"
        )
    assert not (tmp_path / "c").exists()


def test_analyze_fr_on_an_experiment_directory_points_at_its_checkpoints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It read 0 dumps (exit 0) without a word about where they are."""
    experiment = tmp_path / "n2_GPU_SLEEP_r1_i5"
    shutil.copytree(
        REPO / "tests" / "fixtures" / "fr" / "gloo_rank_killed", experiment / "checkpoints"
    )
    status, out, err = run_cli(["analyze-fr", str(experiment)], capsys)
    assert (status, out) == (2, "")
    assert err == (
        f"error: {experiment}: no dumps matching '_dump_*' here; an experiment directory keeps "
        f"them in checkpoints/: pass {experiment / 'checkpoints'}\n"
    )
    status, out, _ = run_cli(["analyze-fr", str(experiment / "checkpoints")], capsys)
    assert status == 0 and out.startswith("PGID")


def test_a_deleted_tsv_is_rebuilt_from_the_result_files_and_said_to_be(
    pytester: pytest.Pytester, session: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It was refused with no hint of recovery, although every result.json was intact."""
    tsv = session / TSV_NAME
    rows = tsv.read_text().splitlines()
    tsv.unlink()
    hint = (
        f"{session} has no {TSV_NAME}, but 2 experiment(s) keep their result.json: rebuild it "
        f"from them with: python -m pytest_faultloop rebuild-tsv {session}"
    )
    status, _, err = run_cli(["report", str(session)], capsys)
    assert (status, err) == (2, f"error: {hint}\n")
    refused = pytester.runpytest(
        "experiments/", "--faultloop-pool=p", "--faultloop-session", str(session)
    )
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines([f"ERROR: --faultloop-session {session}: {hint}"])
    capsys.readouterr()  # what the in-process run wrote

    status, out, err = run_cli(["rebuild-tsv", str(session)], capsys)
    assert (status, err) == (0, ""), err
    assert out == f"rebuilt {tsv}: 3 row(s) from 2 result.json file(s), marked rebuilt\n"
    rebuilt = tsv.read_text().splitlines()
    assert rebuilt[0] == rows[0] and sorted(rebuilt[1:]) == sorted(rows[1:])  # the same rows
    status, _, err = run_cli(["rebuild-tsv", str(session)], capsys)
    assert (status, err) == (2, f"error: {tsv} exists: rebuild-tsv only writes a missing one\n")

    continued = pytester.runpytest(
        "experiments/", "--faultloop-pool=p", "--faultloop-session", str(session)
    )
    continued.assert_outcomes(passed=10)
    continued.stdout.fnmatch_lines(
        [f"faultloop: {tsv}: lines 2-4 were rebuilt from the result.json files *"]
    )
