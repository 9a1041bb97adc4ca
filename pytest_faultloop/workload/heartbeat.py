"""Per-rank progress timestamps kept in memory that forked ranks share with their launcher.

A slot holds 0 until its rank has joined the job and beaten once: until then the rank is still
starting (rendezvous), which its launcher times separately from stalls in training.
"""

from __future__ import annotations

import mmap
import struct
import time

_SLOT = struct.Struct("d")


class HeartbeatBoard:
    """One monotonic timestamp per local rank; create before forking, read from either side."""

    def __init__(self, slots: int) -> None:
        self._memory = mmap.mmap(-1, _SLOT.size * max(1, slots))  # anonymous, MAP_SHARED, zeroed

    def slot(self, index: int) -> Heartbeat:
        return Heartbeat(self._memory, index * _SLOT.size)


class Heartbeat:
    """One rank's slot: the rank beats after progress, its watchdog and launcher read the age."""

    def __init__(self, memory: mmap.mmap, offset: int) -> None:
        self._memory = memory
        self._offset = offset

    def beat(self) -> None:
        _SLOT.pack_into(self._memory, self._offset, time.monotonic())

    @property
    def started(self) -> bool:
        """Whether the rank has beaten at all (it has joined the job)."""
        (last,) = _SLOT.unpack_from(self._memory, self._offset)
        return bool(last > 0.0)

    def age(self) -> float:
        """Seconds since the last beat (meaningful once :attr:`started`)."""
        (last,) = _SLOT.unpack_from(self._memory, self._offset)
        return time.monotonic() - float(last)


def private_heartbeat() -> Heartbeat:
    """A heartbeat nobody else reads (a rank started without the launcher)."""
    return HeartbeatBoard(1).slot(0)
