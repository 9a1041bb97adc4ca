"""SIGTERM stops a run like Ctrl-C: jobs in flight are cancelled and recorded, and a cluster
started for the run is stopped (pytest's clean-up runs on KeyboardInterrupt).

An xdist worker also takes SIGINT, even when it inherited SIGINT ignored (pytest started in the
background by a shell or a CI runner): that is how xdist stops a worker whose controller was
interrupted or killed (execnet sends the worker SIGINT), and the worker must then cancel and
record its job rather than leave it running.
"""

from __future__ import annotations

import signal
import threading

import pytest

from pytest_faultloop.plugin.keys import SIGNALS_KEY


def interrupt_on_stop_signals(config: pytest.Config) -> None:
    """Turn SIGTERM (and, in an xdist worker, an ignored SIGINT) into KeyboardInterrupt until
    the run ends (once per run; main thread)."""
    if (
        config.stash.get(SIGNALS_KEY, False)
        or threading.current_thread() is not threading.main_thread()
    ):
        return
    previous = {signal.SIGTERM: signal.getsignal(signal.SIGTERM)}

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupt)
    if hasattr(config, "workerinput") and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        previous[signal.SIGINT] = signal.SIG_IGN
        signal.signal(signal.SIGINT, signal.default_int_handler)
    config.stash[SIGNALS_KEY] = True

    def restore() -> None:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        config.stash[SIGNALS_KEY] = False

    config.add_cleanup(restore)
