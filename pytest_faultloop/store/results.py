"""Loading the ``result.json`` files of a session."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import ValidationError

from pytest_faultloop.models import ExperimentResult, UnreadableResult
from pytest_faultloop.models.layout import MISSING_RESULT, REVISIONS_DIR, ExperimentLayout
from pytest_faultloop.models.schema_version import NewerSchema
from pytest_faultloop.store.stored_files import LinkRefused, read_bytes, refuse_links


def load_results(
    session_dir: Path, *, unreadable: list[str] | None = None
) -> list[ExperimentResult]:
    """Every ``<session_dir>/*/result.json``, ordered by experiment priority, then key.

    A file that cannot be read or parsed is skipped; when ``unreadable`` is given, a
    ``path: reason`` line is appended to it for each.
    """
    results: list[ExperimentResult] = []
    layouts = _experiment_layouts(Path(session_dir))
    if unreadable is not None:
        unreadable.extend(
            f"{layout.result}: {MISSING_RESULT}" for layout in _without_result(layouts)
        )
    for path in [layout.result for layout in layouts if os.path.lexists(layout.result)]:
        try:
            results.append(read_result_file(path))
        except UnreadableResult as exc:
            if unreadable is not None:
                unreadable.append(str(exc))
        except FileNotFoundError as exc:  # removed since the listing
            if unreadable is not None:
                unreadable.append(f"{path}: {exc.strerror}")
    return sorted(results, key=lambda r: (r.experiment.priority, r.experiment.key))


def _experiment_layouts(session_dir: Path) -> list[ExperimentLayout]:
    """The session's experiment directories, by name (a linked one too: reading its result
    refuses it)."""
    return [
        ExperimentLayout(directory)
        for directory in sorted(session_dir.iterdir() if session_dir.is_dir() else [])
        if directory.is_dir() and directory.name != REVISIONS_DIR
    ]


def _without_result(layouts: list[ExperimentLayout]) -> list[ExperimentLayout]:
    """Experiment directories that hold a job's files but no ``result.json`` (a link named so,
    even one to a file this user cannot see, is a result: reading it refuses it)."""
    return [
        layout
        for layout in layouts
        if not os.path.lexists(layout.result) and layout.holds_job_files()
    ]


def read_result_file(path: Path) -> ExperimentResult:
    """The result stored at ``path``; FileNotFoundError when there is none, UnreadableResult
    when it cannot be read, is not a valid result (truncated, edited, another version's: a newer
    ``schema_version`` is named) or is a symbolic link, as is its experiment directory (nothing
    is read through a link)."""
    try:
        refuse_links(path, path.parent)
        data = read_bytes(path)
    except FileNotFoundError:
        raise
    except LinkRefused as exc:
        raise UnreadableResult(path, exc.WHY if exc.path == path else str(exc)) from None
    except OSError as exc:
        raise UnreadableResult(path, exc.strerror or str(exc)) from None
    try:
        return ExperimentResult.model_validate_json(data)
    except NewerSchema as exc:
        raise UnreadableResult(path, str(exc)) from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "file"
        why = f"not a valid result ({exc.error_count()} error(s); first at {where}: {first['msg']})"
        raise UnreadableResult(path, why) from None
