"""Signal names, and the signal behind an exit code as launchers and shells report it."""

from __future__ import annotations

import signal


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


_DESCRIBED = {signal.strsignal(sig): sig.name for sig in signal.Signals if signal.strsignal(sig)}
"""glibc's strsignal descriptions (``Killed``, ``Bus error``), as tools print a signal."""


def described_signal(text: str) -> str | None:
    """The signal a strsignal description names: ``Killed`` is SIGKILL."""
    return _DESCRIBED.get(text.strip())


def exit_signal(code: int) -> str | None:
    """The signal behind an exit code: ``-9`` (Python's view) or ``137`` (a shell's view)."""
    if code < 0:
        return signal_name(-code)
    if 128 < code < 160:
        return signal_name(code - 128)
    return None
