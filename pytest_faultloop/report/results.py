"""Loading the ``result.json`` files of a session."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from pytest_faultloop.layout import RESULT
from pytest_faultloop.models import ExperimentResult


def load_results(
    session_dir: Path, *, unreadable: list[str] | None = None
) -> list[ExperimentResult]:
    """Every ``<session_dir>/*/result.json``, ordered by experiment priority, then key.

    A file that cannot be read or parsed is skipped; when ``unreadable`` is given, a
    ``path: reason`` line is appended to it for each.
    """
    results: list[ExperimentResult] = []
    for path in sorted(Path(session_dir).glob(f"*/{RESULT}")):
        try:
            results.append(ExperimentResult.model_validate_json(path.read_bytes()))
        except (OSError, ValidationError) as exc:
            if unreadable is not None:
                unreadable.append(f"{path}: {_reason(exc)}")
    return sorted(results, key=lambda r: (r.experiment.priority, r.experiment.key))


def _reason(exc: OSError | ValidationError) -> str:
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "file"
    return f"not a valid result ({exc.error_count()} error(s); first at {where}: {first['msg']})"
