"""What the local backend records of a running job, so that a later pytest run can adopt it:
``logs/slurm/<JOB_ID>.local.json`` with each node shepherd's pid and kernel start time (a pid
alone may have passed to another process), the exit-status files they write, the rendezvous
port and the wall-clock deadline."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from pytest_faultloop.models import JobState
from pytest_faultloop.models.layout import ExperimentLayout


class NodeRecord(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    pid: int
    start_ticks: int
    """``/proc/<pid>/stat`` field 22: with the pid, names one process for good."""
    exit_file: Path


class LocalJobRecord(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    job_id: str
    nodes: list[NodeRecord]
    port: int
    deadline_epoch: float
    submitted_at: float
    stopped: JobState | None = None
    """Set when the backend ends the job itself (cancelled, or past its time limit), before
    it signals the job: a run that adopts the job later reports that end, not the launchers'
    exit codes (which are then only the backend's own signal)."""

    def write(self, experiment_dir: Path) -> None:
        path = record_path(experiment_dir, self.job_id)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(self.model_dump_json(indent=2))
        os.replace(tmp, path)

    @classmethod
    def read(cls, experiment_dir: Path, job_id: str) -> LocalJobRecord | None:
        """The record, or None when there is none (or it is torn or damaged: then nothing can be
        adopted)."""
        try:
            return cls.model_validate_json(record_path(experiment_dir, job_id).read_bytes())
        except (OSError, ValidationError):
            return None


def note_stopped(experiment_dir: Path, job_id: str, state: JobState) -> None:
    """Record, before the backend signals the job, that it ends the job as ``state`` (best
    effort: without it an adopting run sees only the exit codes of the backend's signal)."""
    record = LocalJobRecord.read(experiment_dir, job_id)
    if record is not None:
        with contextlib.suppress(OSError):
            record.model_copy(update={"stopped": state}).write(experiment_dir)


def record_path(experiment_dir: Path, job_id: str) -> Path:
    return ExperimentLayout(experiment_dir).logs / f"{job_id}.local.json"


def exit_file(experiment_dir: Path, job_id: str, node: int) -> Path:
    """Where node ``node``'s shepherd writes its launcher's exit status."""
    return ExperimentLayout(experiment_dir).logs / f"{job_id}.node{node}.exit"


def start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot; None when it is gone (or a zombie)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] == "Z" else int(fields[19])


def read_exit(path: Path) -> int | None:
    """A shepherd's recorded exit status (negative: the signal), None when it wrote none."""
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None
