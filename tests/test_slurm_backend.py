"""SlurmBackend against a real Slurm cluster (sbatch/local-cluster/start.sh 4): every end state,
rejection, purged jobs and a slurmctld restart while polling."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest
from slurm_support import (
    ended,
    job_spec,
    wait_for,
    write_script,
)

from pytest_faultloop.jobs.backends.slurm import SlurmBackend
from pytest_faultloop.jobs.backends.slurm_cli import JobRecord, SlurmCli, SlurmCommandError
from pytest_faultloop.jobs.backends.slurm_cluster import SlurmCluster
from pytest_faultloop.models import Job, JobState

pytestmark = pytest.mark.slurm

OUTAGE_S = 20
"""How long the restart test keeps slurmctld down."""


@pytest.fixture
def backend(slurm_cluster: SlurmCluster) -> SlurmBackend:
    return SlurmBackend()


def running(job: Job) -> bool:
    return job.state is JobState.RUNNING


def test_success_with_seed_layout_and_exports(backend: SlurmBackend, tmp_path: Path) -> None:
    script = write_script(tmp_path, 'echo "fault=$FAULT_TYPE list=$LIST nodes=$SLURM_NNODES"')
    spec = job_spec(tmp_path, script, nodes=2, env={"FAULT_TYPE": "GPU_SLEEP", "LIST": "a,b"})
    submitted = backend.submit(spec)
    assert submitted.state is JobState.PENDING and submitted.job_id.isdigit()
    job = wait_for(backend, submitted, ended)
    assert (job.state, job.exit_code) == (JobState.COMPLETED, "0:0")
    assert job.started_at is not None and job.ended_at is not None
    out = spec.experiment_dir / "logs" / "slurm" / f"{job.job_id}.launch.out"
    assert out.read_text().strip() == "fault=GPU_SLEEP list=a,b nodes=2"
    assert (spec.experiment_dir / "logs" / "slurm" / f"{job.job_id}.launch.err").exists()


def test_failing_job(backend: SlurmBackend, tmp_path: Path) -> None:
    job = backend.submit(job_spec(tmp_path, write_script(tmp_path, "exit 3")))
    job = wait_for(backend, job, ended)
    assert (job.state, job.exit_code, job.reason) == (JobState.FAILED, "3:0", "NonZeroExitCode")


def test_cancelled_from_outside(backend: SlurmBackend, tmp_path: Path) -> None:
    job = backend.submit(job_spec(tmp_path, write_script(tmp_path, "sleep 300")))
    wait_for(backend, job, running)
    subprocess.run(["scancel", job.job_id], check=True)
    job = wait_for(backend, job, ended)
    assert job.state is JobState.CANCELLED


def step_processes(tag: str) -> list[str]:
    """Pids of the processes named ``tag`` (``exec -a``; srun's own command line only carries
    it). The local cluster's nodes all run on this machine, so their steps are visible here."""
    found = subprocess.run(["pgrep", "-f", f"^{tag} "], capture_output=True, text=True, check=False)
    return found.stdout.split()


def poll_until(condition: Callable[[], bool], what: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} not seen after {timeout_s:.0f} s")
        time.sleep(0.2)


def test_backend_cancel_ends_the_steps_on_every_node(backend: SlurmBackend, tmp_path: Path) -> None:
    """What the batch shell runs after Slurm has killed its step (the line after ``srun``) is
    Slurm's own race between the step and the batch script; the backend's promise is the job's
    end and that no step process survives, on any node."""
    tag = f"faultloop-cancel-{os.getpid()}-{time.monotonic_ns()}"
    script = write_script(tmp_path, f"srun bash -c 'exec -a {tag} sleep 300'")
    job = backend.submit(job_spec(tmp_path, script, nodes=2))
    wait_for(backend, job, running)
    poll_until(lambda: len(step_processes(tag)) == 2, "a step process on each of 2 nodes")
    job = backend.cancel(job)
    assert job.state is JobState.CANCELLED
    assert backend.cancel(job).state is JobState.CANCELLED  # cancelling an ended job is fine
    poll_until(lambda: not step_processes(tag), "the end of every step process")


def test_timeout(backend: SlurmBackend, tmp_path: Path) -> None:
    job = backend.submit(job_spec(tmp_path, write_script(tmp_path, "sleep 300")))
    wait_for(backend, job, running)
    subprocess.run(["scontrol", "update", f"JobId={job.job_id}", "TimeLimit=0"], check=True)
    job = wait_for(backend, job, ended, timeout_s=90)
    assert (job.state, job.reason) == (JobState.TIMEOUT, "TimeLimit")


def test_rejection_carries_sbatch_message(
    backend: SlurmBackend, slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    spec = job_spec(tmp_path, write_script(tmp_path, "true"), nodes=slurm_cluster.nodes + 1)
    job = backend.submit(spec)
    assert job.state is JobState.SUBMIT_FAILED
    assert job.reason == "Batch job submission failed: Node count specification invalid"
    assert backend.poll(job) == job


class PurgedFromController(SlurmCli):
    """slurmctld has forgotten every job (as after MinJobAge): scontrol knows nothing."""

    def scontrol_job(self, job_id: str) -> JobRecord | None:
        return None


def test_end_state_of_purged_job_from_completion_file(
    backend: SlurmBackend, tmp_path: Path
) -> None:
    job = wait_for(
        backend, backend.submit(job_spec(tmp_path, write_script(tmp_path, "exit 3"))), ended
    )
    purged = SlurmBackend(cli=PurgedFromController()).poll(
        job.model_copy(update={"state": JobState.RUNNING})
    )
    assert (purged.state, purged.exit_code) == (JobState.FAILED, "3:0")
    assert purged.ended_at == job.ended_at


def test_unknown_job(backend: SlurmBackend, tmp_path: Path) -> None:
    ghost = Job(
        job_id="999999999", backend="slurm", state=JobState.RUNNING, experiment_dir=tmp_path
    )
    job = backend.poll(ghost)
    assert job.state is JobState.UNKNOWN and "999999999" in (job.reason or "")


class RecordingCli(SlurmCli):
    """Notes every failed attempt, so a test can see that retries happened."""

    def __init__(self) -> None:
        super().__init__()
        self.failures: list[SlurmCommandError] = []

    def run_once(self, args: Sequence[str], env: Mapping[str, str] | None = None) -> str:
        try:
            return super().run_once(args, env)
        except SlurmCommandError as error:
            self.failures.append(error)
            raise


def test_polling_survives_slurmctld_restart(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    """slurmctld is down for longer than the clients' own connect retries (~9-18 s) while the
    job runs and ends: the backend's retries carry the poll across the outage to the end state."""
    pid_file = slurm_cluster.ctld_pid_file
    if not pid_file.is_file() or os.geteuid() != 0:
        pytest.skip(
            "restarting slurmctld needs root and the cluster of sbatch/local-cluster/start.sh"
        )
    cli = RecordingCli()
    backend = SlurmBackend(cli=cli)
    started = tmp_path / "started"
    job = backend.submit(job_spec(tmp_path, write_script(tmp_path, f"touch {started}; sleep 3")))
    wait_for(backend, job, lambda _: started.exists())
    polled: list[Job] = []
    poller = threading.Thread(target=lambda: polled.append(wait_for(backend, job, ended, 120)))
    poller.start()
    pid = int(pid_file.read_text())
    os.kill(pid, signal.SIGTERM)
    while _proc_state(pid) not in ("gone", "Z"):
        time.sleep(0.1)
    time.sleep(OUTAGE_S)
    subprocess.run(["slurmctld", "-f", str(slurm_cluster.conf)], check=True)
    poller.join(timeout=120)
    assert polled and (polled[0].state, polled[0].exit_code) == (JobState.COMPLETED, "0:0")
    assert cli.failures and all(failure.transient for failure in cli.failures)


def _proc_state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "gone"
