"""At most BATCH_SIZE jobs in flight for the whole run, across xdist workers.

Slots are file locks in the run directory the controller hands to every worker: the OS
releases a dead worker's slot. In ``pairs`` mode (the seed's behaviour) a pool experiment's job
also waits until every job of the earlier batches has finished; an experiment a Python test
asks for is in no batch and takes the next free slot.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

_WAIT = 0.1


class Interrupted(Exception):
    """The run is stopping; no new job may start."""


class SlotLimiter:
    def __init__(
        self,
        lockdir: Path,
        batch_size: int,
        mode: str,
        order: Sequence[str],
        stop: threading.Event,
    ) -> None:
        self.lockdir = lockdir
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

    def _done_marker(self, key: str) -> Path:
        """Exists once this run has a final result for the experiment (it holds the key)."""
        return self.lockdir / f"{_safe(key)}.done"

    def mark_done(self, key: str) -> None:
        self._done_marker(key).write_text(key)

    def is_done(self, key: str) -> bool:
        """Whether a process of this run has a final result for the experiment."""
        return self._done_marker(key).exists()

    def done_keys(self) -> set[str]:
        """The experiments this run has a final result for, from every process."""
        return {path.read_text() for path in self.lockdir.glob("*.done")}

    @contextmanager
    def numbered_start(self, key: str) -> Iterator[int | None]:
        """How many of the run's pool experiments have started, this one included (every
        process counts), or None when this one started before in this run (a resubmission).
        Held under a lock: lines written inside appear in number order."""
        with FileLock(str(self.lockdir / "starts.lock")):
            marker = self.lockdir / f"{_safe(key)}.started"
            if marker.exists():
                yield None
                return
            marker.write_text(key)
            yield len(self.started_keys() & set(self.order))

    def started_keys(self) -> set[str]:
        """The experiments this run started (submitted or re-scored), from every process."""
        return {path.read_text() for path in self.lockdir.glob("*.started")}

    def _ended_marker(self, key: str) -> Path:
        """Exists once the experiment's job has ended (or will not run) in this run."""
        return self.lockdir / f"{_safe(key)}.ended"

    def mark_ended(self, key: str) -> None:
        """The experiment's job has ended, or will not run, in this run (pairs batches wait
        for it)."""
        self._ended_marker(key).touch()

    def experiment_lock(self, key: str) -> FileLock:
        return FileLock(str(self.lockdir / f"{_safe(key)}.lock"))

    @contextmanager
    def slot(self, key: str) -> Iterator[int]:
        """Hold one of the BATCH_SIZE slots (after earlier batches in pairs mode)."""
        if self.mode == "pairs":
            self._wait_for_earlier_batches(key)
        while True:
            for index in range(self.batch_size):
                lock = FileLock(str(self.lockdir / f"slot-{index}.lock"))
                try:
                    lock.acquire(timeout=0)
                except Timeout:
                    continue
                try:
                    yield index
                finally:
                    lock.release()
                return
            if self.stop.wait(_WAIT):
                raise Interrupted

    def _wait_for_earlier_batches(self, key: str) -> None:
        batch = self.batch_of(key)
        if batch is None:
            return
        earlier = self.order[: batch * self.batch_size]
        while not all(self._ended_marker(k).exists() for k in earlier):
            if self.stop.wait(_WAIT):
                raise Interrupted


def _safe(key: str) -> str:
    """A file name for the key: readable, and distinct for distinct keys."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", key)[:80]
    return f"{readable}-{hashlib.sha256(key.encode()).hexdigest()[:10]}"
