"""Who joined the process group: the ranks a log shows arriving at initialization (PyTorch's
store-based barrier, TCPStore's count of clients, Lightning's per-process banner) against the
world size they announce. From it: the members absent while every other one waits, or a launch
that cannot form a group at all (more processes than the world holds, a rank claimed twice)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from pytest_faultloop.analyzers.rank_ranges import rank_ranges

CANNOT_FORM = "the launch cannot form its process group"
"""How a conflicting membership is summarised (``cause_policy`` reads it as ``launch_config``)."""


@dataclass
class Membership:
    """What one restart cycle's initialization lines say of the group's members."""

    world: int | None = None
    joined: int | None = None
    """The store's latest count of processes that reached the barrier (it never decreases)."""
    arrived: set[int] = field(default_factory=set)
    """Ranks a line shows at the barrier (waiting, added their key, timed out there)."""
    claims: Counter[int] = field(default_factory=Counter)
    """Ranks claimed by banners each process prints once before joining (Lightning)."""
    complete: bool = False
    """A line said the group formed (the barrier completed, all processes registered)."""
    timed_out: bool = False
    duplicate: str | None = None
    """A tool's own word that a rank checked in twice or the rank counts disagree (NCCL)."""

    @property
    def seen(self) -> bool:
        return bool(self.world or self.arrived or self.claims or self.duplicate)

    def note(self, world: int | None, joined: int | None, rank: int | None) -> None:
        self.world = world or self.world
        if joined is not None:
            self.joined = max(joined, self.joined or 0)
        if rank is not None:
            self.arrived.add(rank)

    def claim(self, rank: int, world: int) -> None:
        self.claims[rank] += 1
        self.world = max(world, self.world or 0)

    def conflict(self, stuck: bool) -> str | None:
        """Why the group can never form, when its lines say so: a tool saw a rank check in
        twice; more processes joined than the world holds (duplicate ranks, another job on the
        same store, a stale file store); or, where initialization got ``stuck``, a rank
        claimed by two processes (two runs pasted into one log claim each rank once more)."""
        if self.duplicate:
            return self.duplicate
        if self.world and self.joined and self.joined > self.world:
            return f"{self.joined} processes joined a group of world size {self.world}"
        twice = sorted(rank for rank, count in self.claims.items() if count > 1)
        if twice and stuck:
            return f"rank {rank_ranges(twice)} claimed by more than one process"
        return None

    def absent(self) -> list[int]:
        """The ranks that never arrived, where the log shows every rank that did: as many
        missing as the store's count leaves out (a pasted fragment names fewer)."""
        if not self.world or self.complete:
            return []
        present = self.arrived | set(self.claims)
        missing = sorted(set(range(self.world)) - present)
        if not missing or len(missing) == self.world:
            return []
        if self.joined is not None and len(missing) != self.world - self.joined:
            return []
        return missing
