"""At most BATCH_SIZE jobs in flight for the whole run, across xdist workers.

Slots are file locks in the run directory the controller hands to every worker: the OS
releases a dead worker's slot. A free slot goes to the earliest pool experiment waiting for one,
whichever process waits (xdist's workers each follow an experiment of their own: with fewer
slots than workers they would race for it); a waiting experiment holds a lock of its own, so
one whose worker died waits no more. In ``pairs`` mode (the seed's behaviour) a pool
experiment's job also waits until every job of the earlier batches has finished; an experiment a
Python test asks for is in no batch and takes the next free slot.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from pytest_faultloop.store.ledger import RunLedger

_WAIT = 0.1


class Interrupted(Exception):
    """The run is stopping; no new job may start."""


class SlotLimiter:
    """The run's BATCH_SIZE slots, and the order pool experiments take them in."""

    def __init__(
        self,
        ledger: RunLedger,
        batch_size: int,
        mode: str,
        order: Sequence[str],
        stop: threading.Event,
    ) -> None:
        self.ledger = ledger
        """Where the run's jobs are marked ended (what pairs batches wait for)."""
        self.batch_size = batch_size
        self.mode = mode
        self.order = list(order)
        """Experiment keys of the run, in start order (for pairs batches)."""
        self.stop = stop

    def position(self, key: str) -> int | None:
        """Where the experiment starts among the run's pool experiments (None: not one)."""
        return self.order.index(key) if key in self.order else None

    def batch_of(self, key: str) -> int | None:
        position = self.position(key)
        return None if position is None else position // self.batch_size

    @contextmanager
    def slot(self, key: str) -> Iterator[int]:
        """Hold one of the BATCH_SIZE slots (after earlier batches in pairs mode), once no
        earlier pool experiment waits for one."""
        if self.mode == "pairs":
            self._wait_for_earlier_batches(key)
        position = self.position(key)
        with self._waiting(position):
            index, lock = self._free_slot(position)
        try:
            yield index
        finally:
            lock.release()

    def _free_slot(self, position: int | None) -> tuple[int, FileLock]:
        """A slot and its lock, acquired; Interrupted when the run stops first."""
        while True:
            if position is None or not self._earlier_waiting(position):
                for index in range(self.batch_size):
                    lock = FileLock(str(self.ledger.run_dir / f"slot-{index}.lock"))
                    try:
                        lock.acquire(timeout=0)
                    except Timeout:
                        continue
                    return index, lock
            if self.stop.wait(_WAIT):
                raise Interrupted

    @contextmanager
    def _waiting(self, position: int | None) -> Iterator[None]:
        """Say that the pool experiment at ``position`` waits for a slot, while it does."""
        if position is None:
            yield
            return
        with FileLock(str(self._waiting_lock(position))):
            yield

    def _earlier_waiting(self, position: int) -> bool:
        """Whether a pool experiment before ``position`` waits for a slot (its lock held)."""
        for earlier in range(position):
            lock = FileLock(str(self._waiting_lock(earlier)))
            try:
                lock.acquire(timeout=0)
            except Timeout:
                return True
            lock.release()
        return False

    def _waiting_lock(self, position: int) -> Path:
        return self.ledger.run_dir / f"waiting-{position}.lock"

    def _wait_for_earlier_batches(self, key: str) -> None:
        batch = self.batch_of(key)
        if batch is None:
            return
        earlier = self.order[: batch * self.batch_size]
        while not all(self.ledger.has_ended(k) for k in earlier):
            if self.stop.wait(_WAIT):
                raise Interrupted
