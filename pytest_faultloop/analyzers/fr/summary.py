"""What the analysis keeps of each dump: a few numbers per rank and group, and shared records.

A rank's summary holds only what that rank adds (where it stopped, per group). Group
memberships (``pg_config``), which every rank repeats, are interned: one :class:`GroupConfig`
object however many ranks report it (:mod:`pytest_faultloop.analyzers.fr.interning`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Membership:
    """One process group's ``pg_config`` record: its name, description and member ranks."""

    name: str
    desc: str
    ranks: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """A rank's whole ``pg_config`` (gloo's collapsed ``''`` entry left out)."""

    groups: tuple[Membership, ...]
    names: frozenset[str]


NO_CONFIG = GroupConfig((), frozenset())


@dataclass(frozen=True, slots=True)
class FrontEntry:
    """What the analysis reads of the entry of a rank's highest collective in a group."""

    seq: int | None
    """Its ``collective_seq_id``, None when not a number (it then matches no front)."""
    op: str
    dtype: str
    """The most common of its ``input_dtypes``."""
    state: str | None
    created_ns: int
    sizes: str = ""
    """Its ``input_sizes``, as text (``[[546]]``): members of one collective agree on them."""


@dataclass(slots=True)
class GroupProgress:
    """One rank's view of one process group."""

    desc: str
    last: FrontEntry
    """The entry of the highest collective entered."""
    entered: int = -1
    """Highest ``collective_seq_id`` the rank recorded (entered) in this group."""
    completed: int = -1
    pg_id: object = None
    """This process's id of the group (a per-process counter, as the dump wrote it)."""


@dataclass(slots=True)
class RankDump:
    rank: int
    path: Path
    groups: dict[str, GroupProgress]
    config: GroupConfig
    waiting_in: tuple[str, int] | None
    """(group, seq) of the first collective the rank entered and never completed."""
    newest: tuple[str, int] | None
    """(group, seq) of the last collective the rank entered: where it stopped."""
    wrapped: bool
    """The ring buffer overwrote older entries (the first record id is not 0)."""
    notes: list[str] = field(default_factory=list)


@dataclass
class DumpSet:
    dumps: dict[int, RankDump]
    unreadable: list[str]
    unknown: set[int] = field(default_factory=set)
    """Ranks whose dump exists but could not be used: their state is unknown, not guilty."""
