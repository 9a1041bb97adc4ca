"""The RANK field of a pool entry and ``FAULT_RANK``: one rank, or several injected at once.

``12`` is the seed's single rank. ``12+14`` injects the entry's fault into ranks 12 and 14, both
at FAULT_DELAY; ``12+14@3`` fires rank 14's fault 3 s later than that (an offset in seconds, on
any listed rank; ``@1.5`` too). Ranks are listed in ascending order, each once. The same text
is the RANK of the entry's key and the job's ``FAULT_RANK``; no comma, so it passes through
``sbatch --export`` unquoted.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

_RANK = re.compile(r"\d+")
_OFFSET = re.compile(r"\d+(?:\.\d+)?")
FORM = "ranks joined by '+', each with an optional '@SECONDS' offset (12+14, 12+14@3)"


class FaultTarget(BaseModel):
    """One injected rank of an entry and how many seconds after FAULT_DELAY it fires."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rank: int = Field(ge=0)
    offset_s: float = Field(default=0.0, ge=0)

    @property
    def text(self) -> str:
        return f"{self.rank}@{self.offset_s:g}" if self.offset_s else str(self.rank)


def parse_fault_ranks(text: str) -> tuple[FaultTarget, ...]:
    """``12+14@3`` -> its targets, in order; raises ValueError saying what is wrong and the fix."""
    targets: list[FaultTarget] = []
    for item in text.split("+"):
        rank, at, offset = item.partition("@")
        if not _RANK.fullmatch(rank):
            raise ValueError(
                f"rank {rank!r} in {text!r} is not a non-negative integer; write {FORM}"
            )
        if at and not _OFFSET.fullmatch(offset):
            raise ValueError(
                f"offset {offset!r} of rank {rank} in {text!r} must be a non-negative number of "
                f"seconds (12+14@3 fires rank 14 3 s after FAULT_DELAY)"
            )
        target = FaultTarget(rank=int(rank), offset_s=float(offset) if at else 0.0)
        if any(t.rank == target.rank for t in targets):
            raise ValueError(f"rank {target.rank} is listed twice in {text!r}: list each rank once")
        if targets and target.rank < targets[-1].rank:
            raise ValueError(
                f"rank {target.rank} in {text!r} is out of order: list ranks in ascending order "
                "(12+14, not 14+12)"
            )
        targets.append(target)
    return tuple(targets)


def fault_ranks_text(targets: tuple[FaultTarget, ...]) -> str:
    """The canonical text of ``targets`` (the inverse of :func:`parse_fault_ranks`)."""
    return "+".join(t.text for t in targets)
