"""A job of an experiment, and what it left behind (artifacts, the fault marker)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

from pydantic import Field

from pytest_faultloop.models.experiment import Model
from pytest_faultloop.models.faults import FaultType

# --- Job -------------------------------------------------------------------------------------


class JobState(StrEnum):
    """The states every backend maps its jobs' onto, named as Slurm names them (the richest
    scheduler vocabulary: a backend reports the ones it can tell apart), plus two of ours for
    jobs that never reached a scheduler or whose end went unrecorded."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETING = "COMPLETING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    TIMEOUT = "TIMEOUT"
    CANCELLED = "CANCELLED"
    NODE_FAIL = "NODE_FAIL"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    PREEMPTED = "PREEMPTED"
    BOOT_FAIL = "BOOT_FAIL"
    DEADLINE = "DEADLINE"
    SUBMIT_FAILED = "SUBMIT_FAILED"
    """The scheduler refused the job (e.g. sbatch rejected it)."""
    UNKNOWN = "UNKNOWN"

    @property
    def active(self) -> bool:
        return self in (JobState.PENDING, JobState.RUNNING, JobState.COMPLETING)


class Job(Model):
    """One submission of an experiment to a backend."""

    job_id: str
    backend: str
    state: JobState
    exit_code: str | None = None
    """``code:signal`` (:func:`exit_code_text`), whichever backend ran the job."""
    reason: str | None = None
    """Why the job ended as it did, in the backend's words (e.g. sbatch's error)."""
    experiment_dir: Path
    submitted_at: float | None = None
    started_at: float | None = None
    ended_at: float | None = None

    @property
    def elapsed(self) -> float | None:
        if self.ended_at is None:
            return None
        begin = self.started_at if self.started_at is not None else self.submitted_at
        return None if begin is None else self.ended_at - begin


def exit_code_text(status: int) -> str:
    """A job's exit as every backend records it, ``code:signal`` (Slurm's ``ExitCode``): a
    process's exit status (``os.waitstatus_to_exitcode``: negative for the signal that ended
    it) mapped onto it."""
    return f"{status}:0" if status >= 0 else f"0:{-status}"


# --- Artifacts -------------------------------------------------------------------------------


class FaultMarker(Model):
    """``fault_injection.json``: written by the injector before the fault acts."""

    fault: FaultType
    rank: int
    node: int
    iteration: int
    armed_at: float
    fired_at: float | None = None
    pid: int
    host: str | None = None
    acted_at: float | None = Field(default=None, exclude_if=lambda at: at is None)
    """When the fault acted, on a fault of several ranks (where a peer's failure may end the
    rank before a fault that waits for a hook of the loop acts); else not recorded."""

    @property
    def fired(self) -> bool:
        return self.fired_at is not None


class Artifacts(Model):
    """What a finished job left behind, located in the seed's layout."""

    experiment_dir: Path
    log: Path | None = None
    """``logs/slurm/<JOB_ID>.<RESTART>.1.main_workload.log`` (the log analyzer's input)."""
    launch_out: Path | None = None
    launch_err: Path | None = None
    launcher_notes: Path | None = None
    """``logs/slurm/<JOB_ID>.launcher.err``: the node launchers' own messages."""
    fr_dir: Path
    """``checkpoints/``: the flight-recorder dumps (the FR analyzer's input)."""
    marker: FaultMarker | None = None
    rank_markers: list[FaultMarker] = Field(default=[], exclude_if=lambda markers: not markers)
    """The markers of the injected ranks after the first (a fault on several ranks), by rank."""

    @property
    def markers(self) -> list[FaultMarker]:
        """Every injected rank's marker, the first listed rank's first."""
        return ([self.marker] if self.marker else []) + self.rank_markers

    @property
    def node_hosts(self) -> dict[int, str]:
        """Node index -> hostname of every injected node the markers name."""
        return {m.node: m.host for m in self.markers if m.host}
