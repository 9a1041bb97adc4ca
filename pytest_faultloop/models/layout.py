"""Where an experiment's files live: the seed's per-experiment layout, named once for the code
that writes them (backends, launcher, flight recorder, injector) and the code that reads them
(artifacts, session, reports, freezing).

    <EXPERIMENT_DIR>/
      logs/slurm/<JOB_ID>.<RESTART>.1.main_workload.log   the workload's log (analyzed)
      logs/slurm/<JOB_ID>.launch.out|.launch.err          launcher / sbatch output
      checkpoints/_dump_<rank>                            flight-recorder dumps
      tensorboard/                                        the workload's scalars
      fault_injection.json                                the injector's marker
      fault_injection.rank<R>.json                        another injected rank's marker
      job_ended                                           written when the job script exits
      result.json                                         the experiment's stored result
      attempts/<JOB_ID>/                                  an invalid attempt, set aside
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

LOGS = Path("logs") / "slurm"
CHECKPOINTS = "checkpoints"
TENSORBOARD = "tensorboard"
MARKER = "fault_injection.json"
RANK_MARKER = "fault_injection.rank{rank}.json"
"""The marker of an injected rank after the first, when a fault hits several ranks."""
JOB_ENDED = "job_ended"
"""Optional part of the job-script contract: a job script that writes it when it exits lets
the loop notice the end (and start the next job) within a second, not at the next poll."""
RESULT = "result.json"
ATTEMPTS = "attempts"
MISSING_RESULT = "missing beside the files an earlier job left"
"""Why a stored result cannot be read when its experiment directory holds a job's files but
no ``result.json``."""
REVISIONS_DIR = "revisions"
"""Beside the experiment directories in a session: the re-analyses' revisions."""
DUMP_PREFIX = "_dump_"
"""Flight-recorder dumps are ``checkpoints/_dump_<rank>`` (PyTorch's default file prefix)."""


@dataclass(frozen=True)
class ExperimentLayout:
    """The paths inside one experiment directory."""

    root: Path

    @property
    def logs(self) -> Path:
        return self.root / LOGS

    @property
    def checkpoints(self) -> Path:
        return self.root / CHECKPOINTS

    @property
    def tensorboard(self) -> Path:
        return self.root / TENSORBOARD

    @property
    def marker(self) -> Path:
        return self.root / MARKER

    def rank_marker(self, rank: int) -> Path:
        return self.root / RANK_MARKER.format(rank=rank)

    def rank_markers(self) -> list[Path]:
        """Every ``fault_injection.rank<R>.json`` there is."""
        found = self.root.glob("fault_injection.rank*.json")
        return sorted(p for p in found if re.fullmatch(r"fault_injection\.rank\d+\.json", p.name))

    @property
    def job_ended(self) -> Path:
        return self.root / JOB_ENDED

    @property
    def result(self) -> Path:
        return self.root / RESULT

    @property
    def attempts(self) -> Path:
        return self.root / ATTEMPTS

    def holds_job_files(self) -> bool:
        """Whether a job left files here (outside ``attempts/``): laid-out empty directories
        are no evidence, a log or a dump is."""
        return any(
            path.is_file() for path in self.root.rglob("*") if self.attempts not in path.parents
        )

    def create(self) -> Path:
        """Make the directories a job script expects; returns the root."""
        for sub in (self.logs, self.checkpoints, self.tensorboard):
            sub.mkdir(parents=True, exist_ok=True)
        return self.root

    def workload_log(self, job_id: str, restart: int | str) -> Path:
        return self.logs / f"{job_id}.{restart}.1.main_workload.log"

    def latest_workload_log(self, job_id: str) -> Path | None:
        """The log of the job's latest restart, or None when it wrote none."""
        pattern = re.compile(rf"{re.escape(job_id)}\.(\d+)\.1\.main_workload\.log")
        logs = [
            (int(m.group(1)), path)
            for path in self.logs.glob(f"{job_id}.*.1.main_workload.log")
            if (m := pattern.fullmatch(path.name))
        ]
        return max(logs)[1] if logs else None

    def launch_out(self, job_id: str) -> Path:
        return self.logs / f"{job_id}.launch.out"

    def launch_err(self, job_id: str) -> Path:
        return self.logs / f"{job_id}.launch.err"

    def launcher_notes(self, job_id: str) -> Path:
        """The node launchers' own messages (why a rank was ended, configuration errors): kept
        out of the workload log, which holds what the job itself printed."""
        return self.logs / f"{job_id}.launcher.err"

    @property
    def torchrun_logs(self) -> Path:
        """torchrun's ``--log-dir``: its per-rank stdout/stderr files."""
        return self.root / "logs" / "torchrun"

    def fr_dump(self, rank: int) -> Path:
        return self.checkpoints / f"{DUMP_PREFIX}{rank}"
