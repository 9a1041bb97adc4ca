"""Locating what a finished job left behind, in the seed's per-experiment layout."""

from __future__ import annotations

from pathlib import Path

from pytest_faultloop.inject import read_marker, read_rank_markers
from pytest_faultloop.layout import ExperimentLayout
from pytest_faultloop.models import Artifacts


def collect_artifacts(experiment_dir: Path, job_id: str) -> Artifacts:
    """The job's log (``logs/slurm/<JOB_ID>.<RESTART>.1.main_workload.log``, the latest restart),
    launch output, the node launchers' notes, FR dump directory and fault markers; paths that do
    not exist are ``None``.
    Raises ``ConfigError`` when a ``fault_injection*.json`` exists but is not a marker."""
    layout = ExperimentLayout(experiment_dir)
    return Artifacts(
        experiment_dir=experiment_dir,
        log=layout.latest_workload_log(job_id),
        launch_out=_existing(layout.launch_out(job_id)),
        launch_err=_existing(layout.launch_err(job_id)),
        launcher_notes=_existing(layout.launcher_notes(job_id)),
        fr_dir=layout.checkpoints,
        marker=read_marker(experiment_dir),
        rank_markers=read_rank_markers(experiment_dir),
    )


def _existing(path: Path) -> Path | None:
    return path if path.exists() else None
