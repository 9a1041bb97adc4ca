"""Which global rank a process is, from the lines that name it by its pid: Ray Train's worker
list (a worker's world rank), NCCL's communicator init lines (a rank in a communicator of N
ranks: the world rank only in the largest communicator the cycle shows) and torchrun's failure
table (a failed rank's pid and host), and last a line that names a pid beside a rank (a script's
start-up print: the only tie a py-spy or gdb dump's pid has to a rank).
Resolved once the cycle is read, so a sub-communicator seen first never passes for the world.
A pid from Ray's list is looked up alone (Ray's prefix and NCCL's name one process by
different hosts, an IP and a host name), then with its host where hosts reuse pids; NCCL's with
its host; a table's with its host where the line names one (containers on several nodes reuse
pids), alone where it names none (the driver's Xid line); one that still gives two ranks names
none."""

from __future__ import annotations

from dataclasses import dataclass, field

Placed = tuple[str | None, int]
"""(host, rank) of one start-up line about a pid."""


@dataclass
class ProcessRanks:
    stated: dict[int, set[Placed]] = field(default_factory=dict)
    """pid -> the (host, world rank)s a launcher's list gives it (Ray Train)."""
    in_comms: dict[int, dict[int, set[Placed]]] = field(default_factory=dict)
    """pid -> communicator size -> the (host, rank)s it holds in communicators of that size."""
    largest: int = 0
    tabled: dict[int, set[Placed]] = field(default_factory=dict)
    """pid -> the (host, global rank)s torchrun's failure tables give it."""
    said: dict[int, set[Placed]] = field(default_factory=dict)
    """pid -> the (host, rank)s lines that name the two give it."""

    def state(self, pid: int, host: str | None, rank: int) -> None:
        self.stated.setdefault(pid, set()).add((host, rank))

    def stated_rank(self, rank: int) -> bool:
        """Has a launcher's list already given this rank to a process (a new list: a restart)?"""
        return any(rank == r for placed in self.stated.values() for _, r in placed)

    def states(self, pid: int, host: str | None, rank: int) -> bool:
        return (host, rank) in self.stated.get(pid, set())

    def table(self, pid: int, host: str | None, rank: int) -> None:
        self.tabled.setdefault(pid, set()).add((host, rank))

    def say(self, pid: int, rank: int, host: str | None) -> None:
        self.said.setdefault(pid, set()).add((host, rank))

    def comm(self, pid: int, host: str | None, rank: int, size: int) -> None:
        self.in_comms.setdefault(pid, {}).setdefault(size, set()).add((host, rank))
        self.largest = max(self.largest, size)

    def rank_of(self, pid: int, host: str | None) -> int | None:
        if placed := self.stated.get(pid):
            # Ray's list names the worker's IP, a line of its NCCL its host name: pid first
            rank = _one(placed)
            return rank if rank is not None else _one(_on(host, placed))
        if self.largest > 1 and pid in self.in_comms:
            # NCCL names the host the same way in both lines: the pid on this host only
            return _one(_on(host, self.in_comms[pid].get(self.largest, set())))
        if placed := self.tabled.get(pid):
            return _one(_on(host, placed) if host is not None else placed)
        if placed := self.said.get(pid):
            return _one(_on(host, placed))
        return None


def _on(host: str | None, placed: set[Placed]) -> set[Placed]:
    return {p for p in placed if p[0] == host}


def _one(placed: set[Placed]) -> int | None:
    ranks = {rank for _, rank in placed}
    return ranks.pop() if len(ranks) == 1 else None
