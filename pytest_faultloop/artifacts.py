"""Locating what a finished job left behind, in the seed's per-experiment layout."""

from __future__ import annotations

import re
from pathlib import Path

from pytest_faultloop.inject import read_marker
from pytest_faultloop.models import Artifacts


def collect_artifacts(experiment_dir: Path, job_id: str) -> Artifacts:
    """The job's log (``logs/slurm/<JOB_ID>.<RESTART>.1.main_workload.log``, the latest restart),
    launch output, FR dump directory and fault marker; paths that do not exist are ``None``.
    Raises ``ConfigError`` when ``fault_injection.json`` exists but is not a marker."""
    slurm = experiment_dir / "logs" / "slurm"
    return Artifacts(
        experiment_dir=experiment_dir,
        log=_latest_restart_log(slurm, job_id),
        launch_out=_existing(slurm / f"{job_id}.launch.out"),
        launch_err=_existing(slurm / f"{job_id}.launch.err"),
        fr_dir=experiment_dir / "checkpoints",
        marker=read_marker(experiment_dir),
    )


def _latest_restart_log(slurm: Path, job_id: str) -> Path | None:
    pattern = re.compile(rf"{re.escape(job_id)}\.(\d+)\.1\.main_workload\.log")
    logs = [
        (int(m.group(1)), p)
        for p in slurm.glob(f"{job_id}.*.1.main_workload.log")
        if (m := pattern.fullmatch(p.name))
    ]
    return max(logs)[1] if logs else None


def _existing(path: Path) -> Path | None:
    return path if path.exists() else None
