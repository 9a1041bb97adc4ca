"""Waiting for something another thread does, without racing the clock."""

from __future__ import annotations

import time
from collections.abc import Callable

PATIENCE_S = 30.0
"""Generous: a loaded 2-core machine may run the other thread late."""


def raises_soon(action: Callable[[], None], exc_type: type[BaseException]) -> BaseException:
    """The exception ``action`` raises once another thread has made it raise (retried)."""
    deadline = time.monotonic() + PATIENCE_S
    while time.monotonic() < deadline:
        try:
            action()
        except exc_type as exc:
            return exc
        time.sleep(0.01)
    raise AssertionError(f"{exc_type.__name__} never raised within {PATIENCE_S:g} s")
