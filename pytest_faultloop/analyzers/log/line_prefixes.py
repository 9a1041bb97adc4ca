"""Launcher prefixes on log lines (mpirun, srun, torchrun) and the rank a message names."""

from __future__ import annotations

import re
from dataclasses import dataclass

_PREFIX = re.compile(
    r"^(?:\[\d+,(?P<mpi>\d+)\]<std(?:out|err)>: ?)?"  # mpirun --tag-output: [job,rank]
    r"(?:(?P<label>\d+): ?)?"  # srun --label
    r"(?:\[(?!rank\d)[A-Za-z_]+\d+\]:)?"  # torchrun --tee role prefix, e.g. [default0]:
    r"(?:\[rank(?P<rank>\d+)\]:)?"  # torchrun rank prefix
    r"\s*"
)
_MESSAGE_RANK = re.compile(r"\[(?:PG [^\]]*?)?Rank (\d+)\]")


@dataclass(slots=True)
class Prefix:
    label: int | None
    rank: int | None
    content: str


def split_prefix(line: str) -> Prefix:
    """Separate the launcher prefixes (srun label, ``[default0]:``, ``[rank3]:``) from a line."""
    match = _PREFIX.match(line)
    assert match is not None  # every part is optional
    label, rank = match.group("label"), match.group("rank") or match.group("mpi")
    return Prefix(
        int(label) if label is not None else None,
        int(rank) if rank is not None else None,
        line[match.end() :],
    )


def message_rank(content: str) -> int | None:
    """The rank a PyTorch/NCCL message names as its own: ``[Rank 3]``, ``[PG ID 0 ... Rank 3]``."""
    match = _MESSAGE_RANK.search(content)
    return int(match.group(1)) if match else None
