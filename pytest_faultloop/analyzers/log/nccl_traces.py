"""NCCL's WARN lines no catalogue entry reads, confirmed by NCCL's error-return trace.

NCCL warns at one level for errors and for advice. Where a call fails, NCCLCHECK prints the
error's way up, one INFO line a frame (``file:line -> code``; src/include/checks.h), right after
the WARN of the process that failed; a probe that falls back prints no trace (it does not
NCCLCHECK the call, or it sets ncclDebugNoWarn). So a WARN no entry reads, followed by such a
trace from the same process, is that process's own failure; its nature comes from the source
file that warned. Only the first traced WARN of a process counts: a failure's consequences in
the same process (a lost peer, the proxy's report, the teardown) warn and trace after it. A
trace without a WARN before it is no failure (an abort at shutdown returns through NCCLCHECK).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pytest_faultloop.analyzers.log.line_facts import Kind
from pytest_faultloop.analyzers.log.membership import NcclProcess
from pytest_faultloop.analyzers.log.scan_events import Event

TRACE_LINES = 20
"""How far after its WARN a trace line may come (other processes' lines interleave)."""

_SOURCES: tuple[tuple[re.Pattern[str], Kind, str], ...] = (
    (re.compile(r"net_ib|ibvwrap|mlx5dv|socket|bootstrap"), Kind.NETWORK, "the network"),
    (re.compile(r"cudawrap|nvmlwrap|p2p\."), Kind.GPU_ERROR, "the GPU or its driver"),
    (re.compile(r"shm|alloc\.h|utils\."), Kind.EXCEPTION, "the host's resources"),
    (re.compile(r"argcheck|config\."), Kind.EXCEPTION, "invalid usage"),
)
"""What failed, by the file that warned (src/...): the InfiniBand and socket transports, the
verbs wrapper and the bootstrap; the CUDA and NVML wrappers and the P2P transport; shared
memory and host allocations; argument and configuration checks. Any other file: an exception
of NCCL's."""


@dataclass(slots=True)
class Warned:
    """A process's latest WARN."""

    line: int
    event: Event | None = None
    """Its event where no entry read the line (the fact is completed once a trace follows)."""
    file: str | None = None
    """The source file its prefix names (``misc/shmutils.cc:71 NCCL WARN``)."""


@dataclass(slots=True)
class NcclTraces:
    """The latest WARN of each NCCL process, until a trace confirms it; the processes whose
    first traced WARN was read."""

    warned: dict[NcclProcess, Warned] = field(default_factory=dict)
    settled: set[NcclProcess] = field(default_factory=set)

    def warn(self, process: NcclProcess, line_no: int) -> None:
        """Any WARN of the process (an entry may read it next)."""
        if process not in self.settled:
            self.warned[process] = Warned(line_no)

    def unread(self, process: NcclProcess, event: Event, file: str | None) -> None:
        """The process's WARN at ``event.line`` is one no entry reads."""
        warned = self.warned.get(process)
        if warned is not None and warned.line == event.line:
            warned.event, warned.file = event, file

    def traced(self, process: NcclProcess, line_no: int, file: str) -> Event | None:
        """A trace line of the process: its WARN's event where it is the process's first
        traced WARN and no entry read it, of the nature its file tells (the WARN's own file,
        else the trace's first frame's)."""
        warned = self.warned.pop(process, None)
        if warned is None or line_no - warned.line > TRACE_LINES:
            return None
        self.settled.add(process)
        if warned.event is None:
            return None
        source = warned.file or file
        fact = warned.event.fact
        fact.kind, what = next(
            ((k, w) for p, k, w in _SOURCES if p.search(source)), (Kind.EXCEPTION, "NCCL")
        )
        fact.detail += f" ({source}: {what}; its error return traced)"
        return warned.event
