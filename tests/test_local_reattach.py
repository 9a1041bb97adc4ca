"""Re-attaching to local jobs an earlier pytest run left behind (``--faultloop-keep-jobs``, or a
killed controller): the job is adopted from its record and followed to its end, never submitted
again, and nothing of it survives."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.processes import events_with, foreground_sigint, live_processes_with_env
from support.sessions import only_session

from pytest_faultloop.jobs.backends.local import LocalBackend
from pytest_faultloop.jobs.backends.local_record import note_stopped
from pytest_faultloop.models import Job, JobState

REPO = Path(__file__).resolve().parents[1]

SUBMIT_AND_LEAVE = """
import json, os, sys
from pathlib import Path
from pytest_faultloop.jobs.backends.local import LocalBackend
from pytest_faultloop.jobs.backends.protocol import standalone_spec
from pytest_faultloop.models.faults import FaultType
from pytest_faultloop.models import PoolEntry
from pytest_faultloop.jobs.workload.registry import TINY_GLOO_SCRIPT

fault = FaultType(sys.argv[2])
entry = PoolEntry(fault=fault, rank=1, iter=3, nodes=2)
spec = standalone_spec(entry, Path(sys.argv[1]), TINY_GLOO_SCRIPT, gpus_per_node=2,
                       time_limit_s=300, workload="tiny_gloo", env={"FAULT_DELAY": "3"})
job = LocalBackend().submit(spec)
print(job.model_dump_json(), flush=True)
os._exit(0)  # gone, as a killed controller is: the job runs on
"""


def leave_a_job(tmp_path: Path, fault: str) -> Job:
    done = subprocess.run(
        [sys.executable, "-c", SUBMIT_AND_LEAVE, str(tmp_path), fault],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return Job.model_validate_json(done.stdout.strip().splitlines()[-1])


def follow(backend: LocalBackend, job: Job, timeout_s: float = 600) -> Job:
    """The job once it has ended; fails the test after ``timeout_s`` (generous under load)."""
    deadline = time.monotonic() + timeout_s
    job = backend.poll(job)
    while job.state.active:
        assert time.monotonic() < deadline, (
            f"job {job.job_id} still {job.state} after {timeout_s:g} s"
        )
        time.sleep(0.2)
        job = backend.poll(job)
    return job


@pytest.mark.parametrize(
    ("fault", "state", "exit_code"),
    [("NONE", JobState.COMPLETED, "0:0"), ("SIGKILL", JobState.FAILED, "1:0")],
)
def test_a_job_left_running_is_adopted_and_followed_to_its_end(
    tmp_path: Path, fault: str, state: JobState, exit_code: str
) -> None:
    left = leave_a_job(tmp_path, fault)
    backend = LocalBackend()
    adopted = backend.poll(left)
    assert adopted.state is JobState.RUNNING, adopted.reason  # still running, now ours
    ended = follow(backend, left)
    assert (ended.state, ended.exit_code) == (state, exit_code), ended.reason
    assert live_processes_with_env("SLURM_JOB_ID", left.job_id) == []
    log = next((left.experiment_dir / "logs" / "slurm").glob("*.main_workload.log")).read_text()
    assert "Rank 0" in log or "iteration" in log


def test_a_job_that_ended_unwatched_reports_how_it_ended(tmp_path: Path) -> None:
    left = leave_a_job(tmp_path, "SIGKILL")
    exits = [left.experiment_dir / "logs" / "slurm" / f"{left.job_id}.node{n}.exit" for n in (0, 1)]
    deadline = time.monotonic() + 240
    while not all(p.exists() for p in exits) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert all(p.exists() for p in exits), "the job never ended"
    ended = follow(LocalBackend(), left)
    assert (ended.state, ended.exit_code) == (JobState.FAILED, "1:0")


def test_a_cancelled_job_is_adopted_as_cancelled(tmp_path: Path) -> None:
    """The exit codes of the backend's own SIGTERM are not the job's end: a later run that
    adopts the job reports CANCELLED."""
    left = leave_a_job(tmp_path, "NONE")
    cancelled = LocalBackend().cancel(left)
    assert cancelled.state is JobState.CANCELLED
    assert follow(LocalBackend(), left).state is JobState.CANCELLED


def test_a_job_whose_run_stopped_while_cancelling_it_is_ended_by_the_adopter(
    tmp_path: Path,
) -> None:
    """The run decided to cancel (and recorded it) but was killed before its signal: the run
    that adopts the job ends it, and reports it CANCELLED."""
    left = leave_a_job(tmp_path, "NONE")
    note_stopped(left.experiment_dir, left.job_id, JobState.CANCELLED)
    assert live_processes_with_env("SLURM_JOB_ID", left.job_id) != []
    assert follow(LocalBackend(), left).state is JobState.CANCELLED
    assert live_processes_with_env("SLURM_JOB_ID", left.job_id) == []


def test_a_job_without_a_record_cannot_be_adopted(tmp_path: Path) -> None:
    stranger = Job(
        job_id="999999", backend="local", state=JobState.RUNNING, experiment_dir=tmp_path
    )
    polled = LocalBackend().poll(stranger)
    assert polled.state is JobState.UNKNOWN
    assert "left no record" in (polled.reason or "")


def test_a_job_whose_record_is_damaged_cannot_be_adopted(tmp_path: Path) -> None:
    """A record whose bytes are not UTF-8 any more (a damaged disk) is no record: it was a
    UnicodeDecodeError out of the resumed session's poll."""
    record = tmp_path / "logs" / "slurm" / "999999.local.json"
    record.parent.mkdir(parents=True)
    record.write_bytes(b'{"job_id": "999999", "caf\xe9": 1}')
    stranger = Job(
        job_id="999999", backend="local", state=JobState.RUNNING, experiment_dir=tmp_path
    )
    polled = LocalBackend().poll(stranger)
    assert polled.state is JobState.UNKNOWN
    assert "left no record" in (polled.reason or "")


def test_kept_jobs_are_re_attached_by_the_resumed_session(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(REPO / "experiments", pytester.path / "experiments")
    base = pytester.path / "out"
    monkeypatch.setenv("BASE_EXPERIMENTS_DIR", str(base))
    monkeypatch.setenv("POOL", "NONE:0:5:2 SIGKILL:1:5:2")
    # both jobs must still run when the interrupt lands, however loaded the machine: the fault
    # fires 30 s after its anchor, and the clean run trains on for 40 s
    monkeypatch.setenv("FAULT_DELAY", "30")
    monkeypatch.setenv("FAULTLOOP_EXIT_MARGIN_S", "40")
    first = subprocess.Popen(
        [sys.executable, "-m", "pytest", "experiments/", "--faultloop-keep-jobs", "-p",
         "no:cacheprovider"],
        cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        preexec_fn=foreground_sigint,  # noqa: PLW1509 - only sets a signal disposition
    )  # fmt: skip
    try:
        events_with(base, first, "submitted:", count=2)  # both jobs run (checked below)
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=300)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    session = only_session(base)
    rows_before = (session / "experiments.tsv").read_text().splitlines()
    assert len(rows_before) == 3  # header + the two submissions, both left running

    resumed = pytester.runpytest_subprocess(
        "experiments/", "--faultloop-session", "last", "-p", "no:cacheprovider", timeout=600
    )
    resumed.assert_outcomes(passed=10)
    resumed.stdout.fnmatch_lines(["*re-attached: job=*"])
    assert "submitted:" not in resumed.stdout.str()  # nothing submitted again
    assert (session / "experiments.tsv").read_text().splitlines() == rows_before
    for row in rows_before[1:]:
        job_id = row.split("\t")[0]
        assert live_processes_with_env("SLURM_JOB_ID", job_id) == []
    stored = json.loads((session / "n2_SIGKILL_r1_i5" / "result.json").read_text())
    assert stored["job"]["state"] == "FAILED"
