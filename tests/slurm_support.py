"""Helpers for tests against a real Slurm cluster. The cluster itself comes from the plugin's
``slurm_cluster`` fixture (a skip that says why when none is reachable): start one first with
``eval "$(sbatch/local-cluster/start.sh 4)"`` or ``--faultloop-local-cluster 4``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_faultloop.jobs.backends.protocol import JobSpec
from pytest_faultloop.jobs.backends.slurm import SlurmBackend
from pytest_faultloop.models import Experiment, Job, PoolEntry
from pytest_faultloop.models.faults import FaultType

REPO = Path(__file__).resolve().parent.parent


def job_spec(
    tmp_path: Path,
    script: Path,
    *,
    nodes: int = 1,
    gpus_per_node: int = 1,
    time_limit_s: int = 300,
    env: dict[str, str] | None = None,
    fault: FaultType = FaultType.NONE,
    rank: int = 0,
) -> JobSpec:
    """A spec for ``script`` with its experiment directory under ``tmp_path``."""
    entry = PoolEntry(fault=fault, rank=rank, iter=1, nodes=nodes)
    experiment_dir = tmp_path / entry.dirname
    for sub in ("logs/slurm", "checkpoints", "tensorboard"):
        (experiment_dir / sub).mkdir(parents=True, exist_ok=True)
    experiment = Experiment(
        entry=entry,
        workload="test",
        gpus_per_node=gpus_per_node,
        pool="test",
        source="test",
        line=1,
    )
    return JobSpec(
        experiment=experiment,
        experiment_dir=experiment_dir,
        script=script,
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        time_limit_s=time_limit_s,
        env={"EXPERIMENT_DIR": str(experiment_dir), **(env or {})},
    )


def write_script(tmp_path: Path, body: str, name: str = "job.sh") -> Path:
    script = tmp_path / name
    script.write_text("#!/bin/bash\n" + body + "\n")
    script.chmod(0o755)
    return script


def wait_for(
    backend: SlurmBackend, job: Job, done: Callable[[Job], bool], timeout_s: float = 60.0
) -> Job:
    """Poll ``job`` (every 0.2 s) until ``done(job)``; fails the test after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        job = backend.poll(job)
        if done(job):
            return job
        if time.monotonic() > deadline:
            pytest.fail(f"job {job.job_id} still {job.state} after {timeout_s:.0f} s")
        time.sleep(0.2)


def ended(job: Job) -> bool:
    return not job.state.active
