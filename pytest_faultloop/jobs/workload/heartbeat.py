"""Per-rank progress timestamps kept in memory that forked ranks share with their launcher.

A slot holds 0 until its rank has joined the job and beaten once: until then the rank is still
starting (rendezvous), which its launcher times separately from stalls in training.

Slots are read and written as whole doubles through a ``memoryview`` (one 8-byte store or
load). ``struct.pack_into`` must not be used on them: it zero-fills the slot before writing, and
a reader that lands in between (the writer preempted on a busy machine) sees 0 — an "age" of
hours that once made a launcher end a healthy rank.
"""

from __future__ import annotations

import mmap
import time

_SLOT_BYTES = 8


class HeartbeatBoard:
    """One monotonic timestamp per local rank; create before forking, read from either side."""

    def __init__(self, slots: int) -> None:
        self._memory = mmap.mmap(-1, _SLOT_BYTES * max(1, slots))  # anonymous, shared, zeroed
        self._slots: memoryview[float] = memoryview(self._memory).cast("d")

    def slot(self, index: int) -> Heartbeat:
        return Heartbeat(self._slots, index)


class Heartbeat:
    """One rank's slot: the rank beats after progress, its watchdog and launcher read it."""

    def __init__(self, slots: memoryview[float], index: int) -> None:
        self._slots = slots
        self._index = index

    def beat(self) -> None:
        self._slots[self._index] = time.monotonic()

    def last(self) -> float:
        """``time.monotonic()`` of the last beat; 0.0 before the first."""
        return float(self._slots[self._index])

    @property
    def started(self) -> bool:
        """Whether the rank has beaten at all (it has joined the job)."""
        return self.last() > 0.0

    def age(self) -> float:
        """Seconds since the last beat (meaningful once :attr:`started`)."""
        return time.monotonic() - self.last()


def private_heartbeat() -> Heartbeat:
    """A heartbeat nobody else reads (a rank started without the launcher)."""
    return HeartbeatBoard(1).slot(0)
