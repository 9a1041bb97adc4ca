"""What the scheduler hands a backend, and what every backend must do with it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from pytest_faultloop.models import Experiment, Job, PoolEntry
from pytest_faultloop.session_dir import EXPERIMENT_SUBDIRS


JOB_ENDED_MARKER = "job_ended"
"""Optional part of the job-script contract: a job script that writes
``${EXPERIMENT_DIR}/job_ended`` when it exits lets the loop notice the end (and start the next
job) within a second instead of at the next queue poll."""


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
    experiment_dir = root / entry.dirname
    for sub in EXPERIMENT_SUBDIRS:
        (experiment_dir / sub).mkdir(parents=True, exist_ok=True)
    variables = {
        "EXPERIMENT_DIR": str(experiment_dir),
        "FAULT_RANK": str(entry.rank),
        "FAULT_AT_ITER": str(entry.iter),
        "GPUS_PER_NODE": str(gpus_per_node),
    }
    if not entry.fault.is_control:
        variables["FAULT_TYPE"] = entry.fault.value
    variables.update(env or {})
    experiment = Experiment(entry=entry, workload=workload, gpus_per_node=gpus_per_node,
                            pool="standalone", source="standalone", line=1)
    return JobSpec(experiment=experiment, experiment_dir=experiment_dir, script=script,
                   nodes=entry.nodes, gpus_per_node=gpus_per_node, time_limit_s=time_limit_s,
                   env=variables)


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
