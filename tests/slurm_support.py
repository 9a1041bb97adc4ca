"""The ``slurm_cluster`` fixture: a reachable Slurm cluster, or a skip that says why not.

Import it into a conftest or test module (``from slurm_support import slurm_cluster_fixture``);
tests then ask for ``slurm_cluster``. It never starts a
cluster itself: start one first with ``eval "$(sbatch/local-cluster/start.sh 4)"``.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_faultloop.backends.base import JobSpec
from pytest_faultloop.backends.slurm import SlurmBackend, cluster_reachable
from pytest_faultloop.faults import FaultType
from pytest_faultloop.models import Experiment, Job, PoolEntry

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class SlurmCluster:
    """The cluster the tests talk to."""

    conf: Path
    nodes: int
    """Nodes in the default partition."""

    @property
    def ctld_pid_file(self) -> Path:
        """Where start.sh's slurmctld records its pid (exists only for the local cluster)."""
        return self.conf.parent / "ctld" / "slurmctld.pid"


@pytest.fixture(scope="session", name="slurm_cluster")
def slurm_cluster_fixture() -> SlurmCluster:
    reason = cluster_reachable()
    if reason is not None:
        pytest.skip(f"no Slurm cluster reachable: {reason}")
    conf = Path(os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf"))
    out = subprocess.run(
        ["sinfo", "-h", "-o", "%D %P"], capture_output=True, text=True, check=True
    ).stdout
    nodes = sum(int(line.split()[0]) for line in out.splitlines() if line.split()[1].endswith("*"))
    return SlurmCluster(conf=conf, nodes=nodes)


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
