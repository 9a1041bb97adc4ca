"""The real workload through the real scheduler: sbatch/tiny_gloo.sh on the local Slurm cluster,
two nodes of two emulated GPUs, submitted by SlurmBackend."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from slurm_support import (
    REPO,
    ended,
    job_spec,
    wait_for,
)

from pytest_faultloop.jobs.backends.slurm import SlurmBackend
from pytest_faultloop.jobs.backends.slurm_cluster import SlurmCluster
from pytest_faultloop.models import Job, JobState
from pytest_faultloop.models.faults import FaultType

pytestmark = pytest.mark.slurm

TINY_GLOO = REPO / "sbatch" / "tiny_gloo.sh"


def run_tiny_gloo(tmp_path: Path, fault: FaultType, **extra: str) -> tuple[Job, Path]:
    env = {
        "GPUS_PER_NODE": "2",
        "FAULT_AT_ITER": "3",
        "FAULT_DELAY": "0",
        "FAULT_RANK": "1",
        "BASE_EXPERIMENTS_DIR": str(tmp_path),
        "FAULTLOOP_PYTHON": sys.executable,
        "FAULTLOOP_COLLECTIVE_TIMEOUT": "5",
        **extra,
    }
    if fault is not FaultType.NONE:
        env["FAULT_TYPE"] = fault.value
    spec = job_spec(tmp_path, TINY_GLOO, nodes=2, gpus_per_node=2, env=env, fault=fault, rank=1)
    backend = SlurmBackend()
    job = wait_for(backend, backend.submit(spec), ended, timeout_s=300)
    return job, spec.experiment_dir


@pytest.fixture
def tiny_gloo(slurm_cluster: SlurmCluster) -> Path:
    if not TINY_GLOO.is_file():
        pytest.skip(f"{TINY_GLOO} does not exist yet")
    return TINY_GLOO


def test_clean_run_completes_with_seed_artifacts(tiny_gloo: Path, tmp_path: Path) -> None:
    job, experiment_dir = run_tiny_gloo(tmp_path, FaultType.NONE)
    launch_err = experiment_dir / "logs" / "slurm" / f"{job.job_id}.launch.err"
    assert (job.state, job.exit_code) == (JobState.COMPLETED, "0:0"), launch_err.read_text()
    log = experiment_dir / "logs" / "slurm" / f"{job.job_id}.0.1.main_workload.log"
    text = log.read_text()
    assert all(f"[rank{rank}]" in text for rank in range(4))


SRUN_TASK_FAILED = re.compile(r"^srun: error: n\d+: task [01]: Exited with exit code 1$", re.M)


def workload_log(job: Job, experiment_dir: Path) -> str:
    return (experiment_dir / "logs" / "slurm" / f"{job.job_id}.0.1.main_workload.log").read_text()


def test_killed_rank_fails_the_job(tiny_gloo: Path, tmp_path: Path) -> None:
    job, experiment_dir = run_tiny_gloo(tmp_path, FaultType.SIGKILL)
    assert job.state is JobState.FAILED
    assert (experiment_dir / "fault_injection.json").is_file()
    log = workload_log(job, experiment_dir)
    assert SRUN_TASK_FAILED.search(log), log[-2000:]  # srun's own step message, in the log


def test_torchrun_nodes_under_srun_with_labels(tiny_gloo: Path, tmp_path: Path) -> None:
    job, experiment_dir = run_tiny_gloo(
        tmp_path, FaultType.SIGKILL, FAULTLOOP_LAUNCHER="torchrun", FAULTLOOP_SRUN_LABEL="1"
    )
    log = workload_log(job, experiment_dir)
    assert job.state is JobState.FAILED, log[-3000:]
    assert SRUN_TASK_FAILED.search(log), log[-3000:]
    assert "torch.distributed.elastic.multiprocessing.errors.ChildFailedError" in log
    # srun --label prefixes each node's lines with its task number, before torchrun's own
    assert re.search(r"^[01]: \[default\d\]:\[rank\d\]: ", log, re.M), log[-3000:]
    assert re.search(r"^0: .*Root Cause \(first observed failure\):$", log, re.M)
