"""What a classified log line says happened: a :class:`Kind` and the facts it carries.

The signature catalogue (``signatures``) and the scanner's structural readers return a
:class:`LineFact` or ``None`` per line; the streaming scanner (``scan``) keeps them per cycle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Kind(StrEnum):
    """What a line says happened."""

    GPU_ERROR = "gpu_error"
    CRASH = "crash"
    EXCEPTION = "exception"
    SIGNAL = "signal"
    """A rank ended by a signal (``signal_name`` says which); the launcher's own SIGTERMs too."""
    EXIT = "exit"
    """A rank exited non-zero and nothing more is known."""
    TIMEOUT = "timeout"
    PEER_LOST = "peer_lost"
    WATCHDOG_STUCK = "watchdog_stuck"
    NAMED = "named"
    """Another rank's message names ranks as the faulty ones (``named``)."""
    PROGRESS = "progress"
    SCHEDULER = "scheduler"
    JOB_SIGNAL = "job_signal"
    """The whole job or launcher was cancelled or signalled."""
    NETWORK = "network"
    """The interconnect itself reported an error (InfiniBand completion errors)."""
    ERROR_LINE = "error_line"
    """An error-level line no other rule explains (the fallback's evidence)."""


VICTIM_KINDS = frozenset({Kind.TIMEOUT, Kind.PEER_LOST, Kind.WATCHDOG_STUCK})
"""What a rank says when another one failed: it waited, or lost the connection to it."""


@dataclass(slots=True)
class LineFact:
    kind: Kind
    detail: str
    rank: int | None = None
    node: str | None = None
    named: tuple[int, ...] = ()
    """Ranks the message names as the faulty ones: a ``NAMED`` report's, or the peer a rank's
    own failure blames (a collective mismatch: the rank that runs another collective)."""
    signal_name: str | None = None
    pid: int | None = None
    pg: str | None = None
    enqueued: int | None = None
    completed: int | None = None
    by_launcher: bool = False
    """A signal the launcher (torchrun, srun) sent to stop a rank after another one failed."""
    extra: dict[str, str] = field(default_factory=dict)
    role: str | None = None
    """The catalogue's role of the message: origin, consequence, report (``None``: a fact the
    scanner built from a report's fields)."""
    signature: str | None = None
    """The catalogue entry that read the line."""
