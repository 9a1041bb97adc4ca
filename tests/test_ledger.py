"""The run's ledger: the one writer of the markers every process reads and of the TSV rows."""

from __future__ import annotations

from pathlib import Path

from support.report_samples import make_result

from pytest_faultloop.models import ExperimentResult, Job, JobState
from pytest_faultloop.models.faults import FaultType
from pytest_faultloop.store.ledger import RunLedger, done_keys
from pytest_faultloop.store.session_dir import TSV_NAME, SessionDir


def ledger_in(tmp_path: Path) -> RunLedger:
    session = tmp_path / "session"
    session.mkdir()
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    return RunLedger(run_dir, SessionDir(session, "# report\n"))


def test_a_job_is_recorded_once_however_often_it_is_told(tmp_path: Path) -> None:
    """The built-in job runner tells the ledger at submission, the pipeline again when the job
    returns (for a run_job hook that never told it): one TSV row, and the pending result.json
    written only the first time (never over what the job's stages wrote since)."""
    ledger = ledger_in(tmp_path)
    experiment = make_result(FaultType.SIGKILL, 1).experiment
    directory = ledger.session.experiment_dir(experiment)
    job = Job(job_id="77", backend="local", state=JobState.RUNNING, experiment_dir=directory)
    ledger.job_submitted(job, experiment)
    pending = ExperimentResult.model_validate_json((directory / "result.json").read_text())
    assert pending.job == job and pending.verdict is None
    ledger.session.write_result(make_result(FaultType.SIGKILL, 1, job_id="77"))
    ledger.job_submitted(job.model_copy(update={"state": JobState.FAILED}), experiment)
    rows = (ledger.session.path / TSV_NAME).read_text().splitlines()[1:]
    assert [row.split("\t")[:3] for row in rows] == [["77", "SIGKILL", "1"]]
    kept = ExperimentResult.model_validate_json((directory / "result.json").read_text())
    assert kept.verdict is not None


def test_markers_are_read_back_by_any_process_of_the_run(tmp_path: Path) -> None:
    ledger = ledger_in(tmp_path)
    other = RunLedger(ledger.run_dir, ledger.session)  # another worker's view
    assert not other.has_ended("A") and not other.is_done("A")
    ledger.mark_ended("A")
    ledger.mark_done("A")
    assert other.has_ended("A") and other.is_done("A")
    assert done_keys(ledger.run_dir) == {"A"}
