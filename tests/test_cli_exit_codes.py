"""``python -m pytest_faultloop``: exit status 0 for an answer, whatever was found; 2 with one
``error:`` line naming the path and the fix when an input is missing or unreadable or an output
cannot be written, so that scripts can tell a missing input from a clean log."""

from __future__ import annotations

import json
import sys
from fnmatch import fnmatch
from pathlib import Path

import pytest
from test_freeze import stored

from pytest_faultloop.__main__ import SUBCOMMANDS, main
from pytest_faultloop.models.faults import FaultType

LOG_FIX = "analyze-log needs the path of a readable training log file"


def exit_status(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(argv)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


MISSING = {
    "analyze-log": (["{absent}"], f"error: {{absent}}: No such file or directory; {LOG_FIX}"),
    "analyze-fr": (
        ["{absent}"],
        "error: {absent}: no such directory or dump prefix; pass the directory holding the "
        "dumps (…/checkpoints) or a dump file prefix",
    ),
    "compare": (["{absent}", "{absent}"], "error: {absent}: no such session directory; pass *"),
    "freeze": (
        ["{absent}", "--into", "{tmp}/cases"],
        "error: {absent}: not a session directory (no experiments.tsv); pass "
        "…/fault_injection/<stamp>, its <stamp> or 'last'",
    ),
    "leaderboard": (["{absent}"], "error: {absent}: no such directory; give a session *"),
    "perturb": (
        ["{absent}", "--with", "ts", "-o", "{tmp}/out"],
        "error: {absent}: no such file or directory; give a log or directory",
    ),
    "rebuild-tsv": (["{absent}"], "error: {absent}: no such session directory; pass *"),
    "report": (
        ["{absent}"],
        "error: {absent}: not a session directory (no experiments.tsv); pass "
        "…/fault_injection/<stamp>, its <stamp> or 'last'",
    ),
}


READS_NOTHING = ("signatures",)
"""Subcommands without an input (the catalogue is part of the package)."""


def test_every_subcommand_that_reads_an_input_is_checked() -> None:
    assert set(MISSING) | set(READS_NOTHING) == set(SUBCOMMANDS)


@pytest.mark.parametrize("command", list(MISSING))
def test_a_missing_input_exits_2_with_one_line(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``analyze-log`` and ``analyze-fr`` printed their NO LOGS / no-dumps answers and exited 0."""
    args, expected = MISSING[command]
    names = {"absent": str(tmp_path / "absent"), "tmp": str(tmp_path)}
    status, out, err = exit_status([command, *(a.format(**names) for a in args)], capsys)
    assert (status, out) == (2, "")
    assert len(err.splitlines()) == 1 and fnmatch(err.strip(), expected.format(**names)), err


def test_a_directory_given_as_the_log_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = exit_status(["analyze-log", str(tmp_path)], capsys)
    assert (status, out, err) == (2, "", f"error: {tmp_path}: Is a directory; {LOG_FIX}\n")


@pytest.mark.parametrize(
    ("command", "text", "first_line"),
    [
        ("analyze-log", "iteration 1 loss 0.5\niteration 2 loss 0.4\n", "ERRORS NOT FOUND"),
        ("analyze-log", "", "NO LOGS"),
        ("analyze-fr", None, "PGID | Process Group Desc | Op Type | Size | Dtype | Missing Ranks"),
    ],
    ids=["log-without-errors", "empty-log", "directory-without-dumps"],
)
def test_an_answer_exits_0(
    command: str,
    text: str | None,
    first_line: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Whatever it found: an empty log is NO LOGS, a directory without dumps 0 dumps read."""
    path = tmp_path / "train.log"
    if text is None:
        path = tmp_path / "checkpoints"
        path.mkdir()
    else:
        path.write_text(text)
    status, out, err = exit_status([command, str(path)], capsys)
    assert (status, err) == (0, "")
    assert out.splitlines()[0] == first_line


@pytest.fixture
def session(tmp_path: Path) -> Path:
    directory = tmp_path / "session"
    stored(directory, FaultType.SIGKILL, 1)
    return directory


@pytest.mark.parametrize(
    ("command", "output", "needs"),
    [
        ("freeze", "--into", "a readable session directory and a writable --into directory"),
        ("leaderboard", "--markdown", "a readable session directory (and a writable --markdown "),
    ],
    ids=["freeze", "leaderboard"],
)
def test_an_output_that_cannot_be_written_exits_2(
    command: str,
    output: str,
    needs: str,
    session: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """It was an OSError traceback (exit 1)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    status, _, err = exit_status([command, str(session), output, str(blocker / "out")], capsys)
    assert status == 2 and len(err.splitlines()) == 1, err
    assert err.startswith(f"error: {blocker}/out") and f": Not a directory; {command} needs" in err
    assert needs in err


NO_ARTIFACTS_CONFTEST = """
import time
import pytest
from pytest_faultloop.models import Artifacts, FaultMarker, Job, JobState


@pytest.hookimpl
def pytest_faultloop_run_job(config, spec):
    now = time.time()
    return Job(job_id="1", backend="fake", state=JobState.FAILED, exit_code="1:0",
               experiment_dir=spec.experiment_dir, submitted_at=now, ended_at=now)


@pytest.hookimpl
def pytest_faultloop_collect_artifacts(config, experiment, job, experiment_dir):
    e = experiment.entry
    marker = FaultMarker(fault=e.fault, rank=e.rank, node=0, iteration=e.iter, armed_at=1.0,
                         fired_at=2.0, pid=1)
    return Artifacts(experiment_dir=experiment_dir, fr_dir=experiment_dir / "nowhere",
                     marker=marker, log=None)
"""


def test_inside_a_run_our_cli_as_analyzer_scores_missing_inputs(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job that left no log and no dumps is NO LOGS and no dumps, a measurement (its items
    are scored), also with this CLI as the run's ``cmd:`` analyzers."""
    monkeypatch.setenv("BASE_EXPERIMENTS_DIR", str(pytester.path / "out"))
    pytester.makeconftest(NO_ARTIFACTS_CONFTEST)
    (pytester.path / "experiments").mkdir()
    (pytester.path / "experiments" / "p.pool").write_text("SIGKILL:1:5:2\n")
    cli = f"cmd:{sys.executable} -m pytest_faultloop"
    result = pytester.runpytest(
        "experiments/",
        "--faultloop-pool=p",
        f"--faultloop-log-analyzer={cli} analyze-log {{log}}",
        f"--faultloop-fr-analyzer={cli} analyze-fr {{fr_dir}}",
    )
    outcomes = result.parseoutcomes()
    assert "errors" not in outcomes and sum(outcomes.values()) == 5, result.stdout.str()
    (stored,) = (pytester.path / "out" / "fault_injection").glob("*/*/result.json")
    analyses = json.loads(stored.read_text())
    assert analyses["log_analysis"]["decision_text"] == "NO LOGS"
    assert analyses["fr_analysis"]["dumps_read"] == 0
    assert analyses["verdict"]["fr_rank_correct"] == "no_dumps"
