"""SIGTERM stops a run like Ctrl-C: jobs in flight are cancelled and recorded, and a cluster
started for the run is stopped (pytest's clean-up runs on KeyboardInterrupt)."""

from __future__ import annotations

import signal
import threading

import pytest

_INSTALLED = pytest.StashKey[bool]()


def interrupt_on_sigterm(config: pytest.Config) -> None:
    """Turn SIGTERM into KeyboardInterrupt until the run ends (once per run; main thread)."""
    if (
        config.stash.get(_INSTALLED, False)
        or threading.current_thread() is not threading.main_thread()
    ):
        return
    previous = signal.getsignal(signal.SIGTERM)

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupt)
    config.stash[_INSTALLED] = True

    def restore() -> None:
        signal.signal(signal.SIGTERM, previous)
        config.stash[_INSTALLED] = False

    config.add_cleanup(restore)
