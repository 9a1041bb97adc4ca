"""Locating what a finished job left behind, in the seed's per-experiment layout, and reading
the fault markers its injectors wrote (:mod:`pytest_faultloop.jobs.workload.inject` writes them)."""

from __future__ import annotations

from pathlib import Path

from pytest_faultloop.models import Artifacts, ExperimentResult, FaultMarker
from pytest_faultloop.models.errors import ConfigError
from pytest_faultloop.models.layout import RESULT, ExperimentLayout
from pytest_faultloop.store.stored_files import read_bytes, refuse_links, refuse_links_in


def collect_artifacts(experiment_dir: Path, job_id: str) -> Artifacts:
    """The job's log (``logs/slurm/<JOB_ID>.<RESTART>.1.main_workload.log``, the latest restart),
    launch output, the node launchers' notes, FR dump directory and fault markers; paths that do
    not exist are ``None``.
    Raises ``ConfigError`` when a ``fault_injection*.json`` exists but is not a marker, and
    LinkRefused when one of the files is a symbolic link (:func:`refuse_linked`)."""
    layout = ExperimentLayout(experiment_dir)
    located = Artifacts(
        experiment_dir=experiment_dir,
        log=layout.latest_workload_log(job_id),
        launch_out=_existing(layout.launch_out(job_id)),
        launch_err=_existing(layout.launch_err(job_id)),
        launcher_notes=_existing(layout.launcher_notes(job_id)),
        fr_dir=layout.checkpoints,
    )
    refuse_linked(located)  # before a marker is read through a linked experiment directory
    return located.model_copy(
        update={
            "marker": read_marker(experiment_dir),
            "rank_markers": read_rank_markers(experiment_dir),
        }
    )


def _existing(path: Path) -> Path | None:
    return path if path.exists() else None


def refuse_linked(artifacts: Artifacts) -> None:
    """LinkRefused when a file an analyzer or a copy reads (the logs, anything under the dump
    directory) or a directory on the way to it from the experiment directory, that one
    included, is a symbolic link: a stored run is read as itself, never through a link."""
    root = artifacts.experiment_dir
    paths = (artifacts.log, artifacts.launch_out, artifacts.launch_err, artifacts.launcher_notes)
    for path in (*paths, artifacts.fr_dir):
        if path is not None:
            refuse_links(path, root)
    refuse_links_in(artifacts.fr_dir)


def stored_artifacts(result: ExperimentResult, session_dir: Path) -> Artifacts:
    """A stored live experiment's artifacts where ``session_dir`` holds them now: each stored
    path moved from the experiment directory the run wrote it in onto the session's own (a
    copied or moved session reads its own files, never the original's). A replayed case's
    stay its corpus's. LinkRefused for a link (:func:`refuse_linked`); ConfigError for a
    stored path outside its experiment directory (an edited result)."""
    stored = result.artifacts
    assert stored is not None
    if result.experiment.case is not None:
        refuse_linked(stored)
        return stored
    directory = session_dir / result.experiment.dirname

    def moved(path: Path) -> Path:
        if not path.is_relative_to(stored.experiment_dir):
            raise ConfigError(
                f"{directory / RESULT}: {path} lies outside its experiment directory "
                f"{stored.experiment_dir}; stored files are read only from the session "
                "(was the result edited?)"
            )
        return directory / path.relative_to(stored.experiment_dir)

    paths = ("log", "launch_out", "launch_err", "launcher_notes", "fr_dir")
    update: dict[str, object] = {"experiment_dir": directory}
    update |= {name: moved(path) for name in paths if (path := getattr(stored, name))}
    located = stored.model_copy(update=update)
    refuse_linked(located)
    return located


def read_marker(experiment_dir: Path) -> FaultMarker | None:
    """``fault_injection.json`` of an experiment, or ``None`` when no fault was armed."""
    return _read_marker(ExperimentLayout(experiment_dir).marker)


def read_rank_markers(experiment_dir: Path) -> list[FaultMarker]:
    """The markers of the injected ranks after the first (``fault_injection.rank<R>.json``),
    by rank; empty for a fault on one rank."""
    paths = ExperimentLayout(experiment_dir).rank_markers()
    return sorted((m for m in map(_read_marker, paths) if m is not None), key=lambda m: m.rank)


def _read_marker(path: Path) -> FaultMarker | None:
    try:
        data = read_bytes(path)
    except FileNotFoundError:
        return None
    try:
        return FaultMarker.model_validate_json(data)
    except ValueError as exc:
        raise ConfigError(f"{path}: not a fault marker: {exc}") from None
