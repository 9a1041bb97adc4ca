"""Which analyzer versions scored a session's results: a session's figures are one version's
only when its results agree (a session continued, or partly re-scored, after an analyzer
changed holds several)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from pytest_faultloop.models import ExperimentResult


def version_lines(results: Sequence[ExperimentResult], session: Path | None = None) -> list[str]:
    """One line when the session's results were scored by several analyzer versions (a
    session continued, or partly re-scored, with another analyzer): its figures mix them."""
    counts = Counter(r.fingerprint for r in results if r.fingerprint and not r.broken)
    if len(counts) < 2:
        return []
    shown = ", ".join(f"{version} ({n})" for version, n in sorted(counts.items()))
    which = f"session {session}" if session else "this session"
    return [
        f"{which} holds results scored by {len(counts)} analyzer versions: {shown}; re-analyze "
        "it whole (--faultloop-reanalyze without -k or --lf) to score it under one"
    ]
