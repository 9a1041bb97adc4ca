"""Signal names, the signal behind an exit code as launchers and shells report it, and the fact
of a rank's reported exit code."""

from __future__ import annotations

import signal

from pytest_faultloop.analyzers.log.line_facts import Kind, LineFact


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


def exit_fact(code: int, pid: int | None, node: str | None = None) -> LineFact:
    """A launcher's report of a rank's exit code: a signal when the code says one."""
    sig = exit_signal(code)
    if sig:
        return LineFact(
            Kind.SIGNAL, f"{sig} (exit code {code})", signal_name=sig, pid=pid, node=node
        )
    return LineFact(Kind.EXIT, f"exited with code {code}", pid=pid, node=node)
