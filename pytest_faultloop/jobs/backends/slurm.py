"""The ``slurm`` backend: one ``sbatch`` per experiment, polled until Slurm reports its end."""

from __future__ import annotations

import math
import os
import time
import uuid
from pathlib import Path

from pytest_faultloop.jobs.backends.protocol import JobSpec
from pytest_faultloop.jobs.backends.slurm_cli import JobRecord, SlurmCli, SlurmCommandError
from pytest_faultloop.models import Job, JobState
from pytest_faultloop.models.layout import ExperimentLayout

DEFAULT_SLURM_CONF = Path("/etc/slurm/slurm.conf")
START_HINT = (
    "start one for the run with --faultloop-local-cluster N, or: "
    'eval "$(sbatch/local-cluster/start.sh 4)"'
)


def sbatch_arguments(spec: JobSpec, *, gres: bool) -> list[str]:
    """The seed's sbatch flags for ``spec`` (without ``--parsable``), ending with the script.

    ``--gpus-per-node`` only with ``gres``: clusters without GPU GRES (like the local one)
    reject it. Values containing a comma cannot travel in ``--export=ALL,K=V`` (sbatch
    splits on commas); they reach the job through sbatch's environment, which ``ALL`` exports.
    """
    logs = ExperimentLayout(spec.experiment_dir).logs
    exports = ",".join(f"{key}={value}" for key, value in spec.env.items() if "," not in value)
    return [
        f"--job-name=faultloop-{spec.experiment.dirname}",
        f"--nodes={spec.nodes}",
        f"--ntasks-per-node={spec.gpus_per_node}",
        *([f"--gpus-per-node={spec.gpus_per_node}"] if gres else []),
        f"--time={max(1, math.ceil(spec.time_limit_s / 60))}",
        "--exclusive",
        "--mem=0",
        f"--output={logs / '%j.launch.out'}",
        f"--error={logs / '%j.launch.err'}",
        f"--export=ALL{',' + exports if exports else ''}",
        *([f"--account={spec.account}"] if spec.account else []),
        *([f"--partition={spec.partition}"] if spec.partition else []),
        str(spec.script),
    ]


class SlurmBackend:
    """Submits with ``sbatch``, reads states from ``scontrol``, then ``sacct``, then the
    job-completion file (``sacct -c``) once slurmctld has purged the job.

    ``gres`` (default off, which suits the local cluster; FAULTLOOP_SLURM_GRES) adds
    ``--gpus-per-node``: turn it on for clusters that schedule GPUs as GRES. ``poll`` raises
    :class:`SlurmCommandError` only when Slurm stays unreachable past the CLI's retry deadline.
    Safe to share between threads.
    """

    name = "slurm"

    def __init__(
        self,
        *,
        gres: bool = False,
        cli: SlurmCli | None = None,
        cancel_wait_s: float = 30.0,
    ) -> None:
        self.gres = gres
        self.cli = cli or SlurmCli()
        self.cancel_wait_s = cancel_wait_s

    def submit(self, spec: JobSpec) -> Job:
        submitted_at = time.time()
        comment = f"faultloop:{uuid.uuid4().hex}"
        job = Job(
            job_id="",
            backend=self.name,
            state=JobState.PENDING,
            experiment_dir=spec.experiment_dir,
            submitted_at=submitted_at,
        )
        args = sbatch_arguments(spec, gres=self.gres)
        try:
            job_id = self.cli.sbatch(args, spec.env, comment)
        except SlurmCommandError as error:
            return job.model_copy(update={"state": JobState.SUBMIT_FAILED, "reason": error.message})
        return job.model_copy(update={"job_id": job_id})

    def poll(self, job: Job) -> Job:
        if not job.job_id:
            return job
        record = self._record(job.job_id)
        if record is None:
            return job.model_copy(
                update={
                    "state": JobState.UNKNOWN,
                    "reason": f"job {job.job_id} is unknown to slurmctld, accounting and the "
                    "job-completion file (was the cluster's state directory removed?)",
                }
            )
        return _apply(job, record)

    def cancel(self, job: Job) -> Job:
        current = self.poll(job)
        if not current.state.active:
            return current
        self.cli.scancel(job.job_id)
        deadline = time.monotonic() + self.cancel_wait_s
        delay = 0.2
        while current.state.active and time.monotonic() < deadline:
            time.sleep(delay)
            delay = min(delay * 2, 2.0)
            current = self.poll(job)
        if current.state.active:
            return current.model_copy(
                update={
                    "state": JobState.CANCELLED,
                    "reason": f"scancel sent; Slurm still reported {current.state.value} "
                    f"after {self.cancel_wait_s:.0f} s",
                }
            )
        return current

    def _record(self, job_id: str) -> JobRecord | None:
        return (
            self.cli.scontrol_job(job_id)
            or self.cli.sacct_job(job_id)
            or self.cli.completion_job(job_id)
        )


def cluster_reachable(cli: SlurmCli | None = None) -> str | None:
    """None when a Slurm controller answers and has responding nodes; otherwise the reason,
    naming the fix."""
    cli = cli or SlurmCli()
    conf = os.environ.get("SLURM_CONF")
    if conf and not Path(conf).is_file():
        return f"SLURM_CONF={conf} does not exist; {START_HINT}"
    if not conf and not DEFAULT_SLURM_CONF.is_file():
        return f"SLURM_CONF is not set and {DEFAULT_SLURM_CONF} does not exist; {START_HINT}"
    down = cli.ping()
    if down is not None:
        return f"slurmctld does not answer ({down}); {START_HINT}"
    try:
        counts = cli.run_once(["sinfo", "-h", "-r", "-o", "%D"])
    except SlurmCommandError as error:
        return f"sinfo failed: {error.message}"
    if sum(int(n) for n in counts.split() if n.isdigit()) == 0:
        return f"slurmctld answers but no node responds; see its slurmd logs, or {START_HINT}"
    return None


def _apply(job: Job, record: JobRecord) -> Job:
    """``job`` updated with what Slurm reported; ``reason`` keeps Slurm's qualifier (e.g.
    ``CANCELLED by 0``) or its scheduling reason (e.g. ``Resources``, ``TimeLimit``)."""
    qualified = record.raw_state if record.raw_state.strip() != record.state.value else None
    active = record.state.active
    return job.model_copy(
        update={
            "state": record.state,
            "exit_code": None if active else record.exit_code,
            "reason": qualified or record.reason,
            "started_at": record.started_at,
            "ended_at": None if active else record.ended_at,
        }
    )
