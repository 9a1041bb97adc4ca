"""Loading the ``result.json`` files of a session."""

from __future__ import annotations

from pathlib import Path

from pytest_faultloop.layout import MISSING_RESULT, RESULT, REVISIONS_DIR, ExperimentLayout
from pytest_faultloop.models import ExperimentResult, UnreadableResult, read_result_file


def load_results(
    session_dir: Path, *, unreadable: list[str] | None = None
) -> list[ExperimentResult]:
    """Every ``<session_dir>/*/result.json``, ordered by experiment priority, then key.

    A file that cannot be read or parsed is skipped; when ``unreadable`` is given, a
    ``path: reason`` line is appended to it for each.
    """
    results: list[ExperimentResult] = []
    if unreadable is not None:
        unreadable.extend(
            f"{layout.result}: {MISSING_RESULT}" for layout in _without_result(Path(session_dir))
        )
    for path in sorted(Path(session_dir).glob(f"*/{RESULT}")):
        try:
            results.append(read_result_file(path))
        except UnreadableResult as exc:
            if unreadable is not None:
                unreadable.append(str(exc))
        except FileNotFoundError as exc:  # removed since the listing
            if unreadable is not None:
                unreadable.append(f"{path}: {exc.strerror}")
    return sorted(results, key=lambda r: (r.experiment.priority, r.experiment.key))


def _without_result(session_dir: Path) -> list[ExperimentLayout]:
    """Experiment directories that hold a job's files but no ``result.json``."""
    return [
        layout
        for directory in sorted(session_dir.iterdir() if session_dir.is_dir() else [])
        if directory.is_dir() and directory.name != REVISIONS_DIR
        if not (layout := ExperimentLayout(directory)).result.exists() and layout.holds_job_files()
    ]
