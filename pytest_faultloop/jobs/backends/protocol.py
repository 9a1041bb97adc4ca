"""What the runner hands a backend, and what every backend must do with it."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from pytest_faultloop.models import Experiment, Job, PoolEntry
from pytest_faultloop.models.layout import ExperimentLayout


class JobSpec(BaseModel):
    """Everything needed to start one experiment's job, independent of the backend."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    experiment: Experiment
    experiment_dir: Path
    """Already created, with ``logs/slurm``, ``checkpoints`` and ``tensorboard`` inside."""
    script: Path
    """The job script (sbatch backends) or the workload's script whose launcher runs locally."""
    nodes: int
    gpus_per_node: int
    time_limit_s: int
    """From TIME (``HH:MM:SS``, ``MM:SS``, ``D-HH:MM:SS`` or minutes)."""
    env: dict[str, str]
    """The seed's exported variables: FAULT_TYPE, FAULT_RANK, FAULT_AT_ITER, FAULT_DELAY,
    EXPERIMENT_DIR, BASE_EXPERIMENTS_DIR, GPUS_PER_NODE (and whatever else the workload needs).
    For the ``NONE`` control fault FAULT_TYPE is absent."""
    account: str | None = None
    partition: str | None = None
    resume: Job | None = None
    """A job of this experiment that an earlier, interrupted run left in flight: wait for it
    rather than submitting again (when the backend can still see it)."""


def job_environment(
    entry: PoolEntry,
    experiment_dir: Path,
    gpus_per_node: int,
    *,
    fault_delay: float | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The seed's job-script contract as environment variables: FAULT_TYPE (absent for the
    ``NONE`` control), FAULT_RANK (one rank, or the pool's rank list ``12+14@3``), FAULT_AT_ITER,
    FAULT_DELAY, EXPERIMENT_DIR, GPUS_PER_NODE, the Python the loop runs on (FAULTLOOP_PYTHON);
    ``extra`` adds to or overrides them."""
    env = {
        "FAULT_RANK": entry.rank_text,
        "FAULT_AT_ITER": str(entry.iter),
        "EXPERIMENT_DIR": str(experiment_dir),
        "GPUS_PER_NODE": str(gpus_per_node),
        "FAULTLOOP_PYTHON": sys.executable,
    }
    if fault_delay is not None:
        env["FAULT_DELAY"] = f"{fault_delay:g}"
    if not entry.fault.is_control:
        env["FAULT_TYPE"] = entry.fault.value
    env.update(extra or {})
    return env


def standalone_spec(
    entry: PoolEntry,
    root: Path,
    script: Path,
    *,
    gpus_per_node: int,
    time_limit_s: int,
    env: Mapping[str, str] | None = None,
    workload: str = "standalone",
) -> JobSpec:
    """A spec for one experiment outside a pool run (benchmarks, tests, manual runs): creates
    ``root/<n..._r..._i...>`` in the seed's layout and exports the seed's variables for
    ``entry``; ``env`` adds to or overrides them."""
    experiment_dir = ExperimentLayout(root / entry.dirname).create()
    variables = job_environment(entry, experiment_dir, gpus_per_node, extra=env)
    experiment = Experiment(
        entry=entry,
        workload=workload,
        gpus_per_node=gpus_per_node,
        pool="standalone",
        source="standalone",
        line=1,
    )
    return JobSpec(
        experiment=experiment,
        experiment_dir=experiment_dir,
        script=script,
        nodes=entry.nodes,
        gpus_per_node=gpus_per_node,
        time_limit_s=time_limit_s,
        env=variables,
    )


class Backend(Protocol):
    """Submit, poll and cancel jobs. Implementations must be safe to use from several threads."""

    name: str

    def submit(self, spec: JobSpec) -> Job:
        """Start the job. Returns it PENDING/RUNNING, or SUBMIT_FAILED with the refusal in
        ``reason`` (a permanent refusal; transient errors are retried inside)."""
        ...

    def poll(self, job: Job) -> Job:
        """The job's current state; a finished job carries its end state and exit code."""
        ...

    def cancel(self, job: Job) -> Job:
        """Stop the job and everything it started; returns it CANCELLED (or its end state if it
        had already ended)."""
        ...
