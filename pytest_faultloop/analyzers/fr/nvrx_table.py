"""The nvrx FR table: ``PGID | Process Group Desc | Op Type | Size | Dtype | Missing Ranks``."""

from __future__ import annotations

from pytest_faultloop.models import FrAnalysis

HEADER = ("PGID", "Process Group Desc", "Op Type", "Size", "Dtype", "Missing Ranks")


def fr_table(analysis: FrAnalysis) -> str:
    """One row per process group with missing ranks, then the suspects and unreadable dumps."""
    rows = [HEADER] + [
        (
            g.pg_id,
            g.desc,
            g.op,
            g.size,
            g.dtype,
            ",".join(str(r) for r in g.missing_ranks),
        )
        for g in analysis.groups
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADER))]
    lines = [
        " | ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)).rstrip()
        for row in rows
    ]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    suspects = ",".join(str(r) for r in analysis.suspects) or "none"
    lines.append(f"Suspect ranks: {suspects} ({analysis.dumps_read} dumps read)")
    lines.extend(
        f"  rank {r.rank} ({r.evidence.replace('_', ' ')}): {r.why}" for r in analysis.reasons
    )
    if analysis.unknown:
        unknown = ",".join(str(r) for r in analysis.unknown)
        lines.append(f"Unknown (dump unusable, not evidence): {unknown}")
    lines.extend(f"Unreadable: {item}" for item in analysis.unreadable)
    return "\n".join(lines)
