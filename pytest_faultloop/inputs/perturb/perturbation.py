"""What a perturbation is: a named, documented, deterministic rewrite of a log (line by line)
or of a flight-recorder dump directory, and a composition of them (``ts+ansi``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pytest_faultloop.models.errors import FaultloopError

LineRewrite = Callable[[Iterator[bytes]], Iterator[bytes]]
"""Lines in (without their ``\\n``), lines out: a log rewrite streams, whatever the log's size."""


class NotApplicable(FaultloopError):
    """The perturbation cannot be applied to these artifacts (the message says why)."""


@dataclass(frozen=True)
class Subject:
    """What an FR rewrite needs to know of the failure it perturbs (never the answer's text:
    only which ranks to leave alone or to hit)."""

    dump_ranks: frozenset[int]
    """Ranks with a dump file."""
    culprits: tuple[int, ...] | None
    """The acceptable FR culprits (``None``: unknown)."""
    gpus_per_node: int

    @property
    def bystander(self) -> int:
        """The non-culprit rank an FR rewrite hits: the highest rank with a dump that shares no
        node with a culprit, else the highest non-culprit rank with a dump."""
        culprits = set(self.culprits or ())
        nodes = {rank // self.gpus_per_node for rank in culprits}
        others = sorted(self.dump_ranks - culprits)
        away = [rank for rank in others if rank // self.gpus_per_node not in nodes]
        if not others:
            raise NotApplicable("no dump of a rank other than the culprit's")
        return (away or others)[-1]


@dataclass(frozen=True)
class LogPerturbation:
    """A rewrite of every log line, as a real tool between the job and the analyzer does it."""

    name: str
    imitates: str
    """The real tool whose documented output it reproduces (and where that is documented)."""
    keeps_truth: str
    """Why the failure's ground truth is the same afterwards."""
    rewrite: LineRewrite


FrRewrite = Callable[[Path, Subject], None]
"""Rewrites a copy of a dump directory in place; raises :class:`NotApplicable`."""


Damages = Literal["bystander", "culprit", "nothing"]
"""Whose dump an FR rewrite spoils: an innocent rank's, a culprit's, or none (names only)."""


@dataclass(frozen=True)
class FrPerturbation:
    """A rewrite of a flight-recorder dump directory, as dump collection goes wrong for real."""

    name: str
    imitates: str
    keeps_truth: str
    rewrite: FrRewrite
    applies: Callable[[Subject], str | None]
    """Why the rewrite cannot apply to a dump set (None: it can), decided from the file names."""
    damages: Damages


Perturbation = LogPerturbation | FrPerturbation


@dataclass(frozen=True)
class Composition:
    """Perturbations applied one after the other (``ts+ansi``: timestamps, then colour)."""

    parts: tuple[Perturbation, ...]

    @property
    def name(self) -> str:
        return "+".join(part.name for part in self.parts)

    @property
    def log_parts(self) -> tuple[LogPerturbation, ...]:
        return tuple(p for p in self.parts if isinstance(p, LogPerturbation))

    @property
    def fr_parts(self) -> tuple[FrPerturbation, ...]:
        return tuple(p for p in self.parts if isinstance(p, FrPerturbation))

    def rewrite_lines(self, lines: Iterator[bytes]) -> Iterator[bytes]:
        for part in self.log_parts:
            lines = part.rewrite(lines)
        return lines

    def not_applicable(self, subject: Subject | None) -> str | None:
        """Why the composition cannot apply (``subject``: the dump set, None without dumps).

        Spoiling a culprit's dump and an innocent's at once leaves two ranks whose dumps say
        nothing: no dump set can tell which of them failed, so no such composition applies."""
        if {part.damages for part in self.fr_parts} >= {"bystander", "culprit"}:
            return (
                f"{self.name}: spoils a culprit's dump and an innocent's at once, so no dump "
                "tells the two apart"
            )
        for part in self.fr_parts:
            if subject is None or not subject.dump_ranks:
                return f"{part.name}: no flight-recorder dumps"
            if why := part.applies(subject):
                return f"{part.name}: {why}"
        return None
