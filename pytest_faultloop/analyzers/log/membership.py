"""Who joined the process group: the ranks a log shows arriving at initialization (PyTorch's
store-based barrier, TCPStore's count of clients, Lightning's per-process banner) against the
world size they announce. From it: the members absent while every other one waits, or a launch
that cannot form a group at all (more processes than the world holds, a rank claimed twice).
Likewise NCCL's communicators (``NcclInits``): the ranks that never completed an init the
others completed."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from pytest_faultloop.analyzers.rank_ranges import rank_ranges

CANNOT_FORM = "the launch cannot form its process group"
"""How a conflicting membership is summarised (``cause_policy`` reads it as ``launch_config``)."""


@dataclass
class Membership:
    """What the initialization lines of one run say of its group's members."""

    world: int | None = None
    joined: int | None = None
    """The store's latest count of processes that reached the barrier (it never decreases)."""
    arrived: set[int] = field(default_factory=set)
    """Ranks a line shows at the barrier (waiting, added their key, timed out there)."""
    claims: Counter[int] = field(default_factory=Counter)
    """Ranks claimed by banners each process prints once before joining (Lightning)."""
    complete: bool = False
    """A line said the group formed (the barrier completed, all processes registered)."""
    duplicate: str | None = None
    """A tool's own word that a rank checked in twice or the rank counts disagree (NCCL)."""
    last_line: int = 0
    """The last line that said anything of the members: a rank speaking after it arrived."""

    @property
    def seen(self) -> bool:
        return bool(self.world or self.arrived or self.claims or self.duplicate)

    def starts_over(
        self, world: int | None, joined: int | None = None, claimed: int | None = None
    ) -> bool:
        """Is a membership line the start of another run's initialization (a requeue, a
        second run in one log)? After the group formed; with another world size; with a
        store count lower than before (it never decreases within a run); or a rank claimed
        again once every rank had claimed."""
        if not self.seen:
            return False
        other_world = world is not None and self.world is not None and world != self.world
        fewer = joined is not None and self.joined is not None and joined < self.joined
        all_claimed = bool(self.world) and len(self.claims) >= (self.world or 0)
        again = claimed is not None and claimed in self.claims and all_claimed
        return self.complete or other_world or fewer or again

    def note(self, world: int | None, joined: int | None, rank: int | None) -> None:
        self.world = world or self.world
        if joined is not None:
            self.joined = max(joined, self.joined or 0)
        if rank is not None:
            self.arrived.add(rank)

    def claim(self, rank: int, world: int) -> None:
        self.claims[rank] += 1
        self.world = world

    def conflict(self) -> str | None:
        """Why a group whose initialization got stuck never formed: a tool saw a rank check
        in twice; more processes joined than the world holds (duplicate ranks, another job on
        the same store, a stale file store); two processes claimed one rank."""
        if self.duplicate:
            return self.duplicate
        if self.world and self.joined and self.joined > self.world:
            return f"{self.joined} processes joined a group of world size {self.world}"
        twice = sorted(rank for rank, count in self.claims.items() if count > 1)
        if twice:
            return f"rank {rank_ranges(twice)} claimed by more than one process"
        return None

    def absent(self, spoke: set[int]) -> list[int]:
        """The ranks that never arrived, where the store's count says how many did and the
        log shows every one of those (a pasted fragment names fewer); a rank that ``spoke``
        elsewhere in the log is no absent one. Banners alone carry no count: a log of one
        node, or of rank 0, shows only some members."""
        if not self.world or self.complete or self.joined is None:
            return []
        present = self.arrived | set(self.claims) | spoke
        missing = sorted(set(range(self.world)) - present)
        if not missing or len(missing) != self.world - self.joined:
            return []
        return missing


NcclProcess = tuple[str | None, int]
"""(host, pid) of a process NCCL's ``host:pid:tid`` prefix names."""


@dataclass
class CommunicatorInit:
    """One NCCL communicator's initialization, as its ranks' init lines tell."""

    nranks: int
    started: set[int] = field(default_factory=set)
    """Ranks that printed ``Init START`` (NCCL 2.18.3+)."""
    completed: set[int] = field(default_factory=set)
    done_by: set[NcclProcess] = field(default_factory=set)
    """The processes whose ``Init COMPLETE`` the log shows."""
    last_line: int = 0
    last_text: str = ""
    """The latest init line: where the ranks that completed began to wait."""


@dataclass
class NcclInits:
    """NCCL communicators' initializations in one run, and whether anything but NCCL's own
    lines came after the latest of them (the run went on) or only the job's end."""

    comms: dict[str, CommunicatorInit] = field(default_factory=dict)
    processes: set[NcclProcess] = field(default_factory=set)
    """Processes whose NCCL lines the log shows."""
    read_to: int = 0
    """The latest of the contiguous NCCL lines since the latest init line."""
    next_line: int | None = None
    """The first line after the latest init line that is not NCCL's: unread (a line no
    keyword marks: the run's own output) or another tool's; None while there is none."""

    def note(
        self,
        line_no: int,
        text: str,
        step: tuple[str, int, int, bool],
        process: NcclProcess | None,
    ) -> None:
        """An init line (``run_facts.nccl_init_step``) of the process its prefix names."""
        comm, rank, nranks, complete = step
        init = self.comms.setdefault(comm, CommunicatorInit(nranks))
        (init.completed if complete else init.started).add(rank)
        if complete and process is not None:
            init.done_by.add(process)
        init.last_line = self.read_to = line_no
        init.last_text = text
        self.next_line = None

    def follow(self, line_no: int, nccl: bool) -> None:
        """A line the scanner read: NCCL's own, right after the last one, keeps the init the
        log's latest word; a gap (lines no keyword marks) or another tool's line ends that."""
        if self.next_line is not None or not self.read_to or line_no <= self.read_to:
            return
        if line_no > self.read_to + 1:
            self.next_line = self.read_to + 1
        elif nccl:
            self.read_to = line_no
        else:
            self.next_line = line_no

    def end(self, last_line: int) -> None:
        """The log's last line: lines after the last one read are unread output."""
        if self.read_to and self.next_line is None and last_line > self.read_to:
            self.next_line = self.read_to + 1

    def absent(self, world: int) -> tuple[str, CommunicatorInit, list[int]] | None:
        """The ranks that never completed the latest communicator's init while every other
        rank did, where it is the world's (a sub-group numbers its own ranks: its rank 1 is
        some global rank) and counted apart from the others (sub-groups complete at their own
        times). NCCL's init all-gathers every rank's info before any completes, so one
        completion means every rank started; the log must still show the missing ones, as a
        pasted fragment may not: their ``Init START`` (2.18.3+), or as many processes without
        a completion as ranks missing."""
        if not self.comms:
            return None
        comm, init = max(self.comms.items(), key=lambda item: item[1].last_line)
        missing = sorted(set(range(world)) - init.completed)
        if init.nranks != world or not init.completed or not missing:
            return None
        unfinished = self.processes - init.done_by
        shown = set(missing) <= init.started or len(unfinished) == len(missing)
        return (comm, init, missing) if shown else None
