"""Rank lists as people write them: ``[0, 1, 2, 5]`` -> ``0-2,5``."""

from __future__ import annotations


def rank_ranges(ranks: list[int]) -> str:
    """[0, 1, 2, 5] -> ``0-2,5``."""
    parts: list[str] = []
    for rank in sorted(set(ranks)):
        if parts and rank == int(parts[-1].rsplit("-", 1)[-1]) + 1:
            parts[-1] = f"{parts[-1].split('-')[0]}-{rank}"
        else:
            parts.append(str(rank))
    return ",".join(parts)
