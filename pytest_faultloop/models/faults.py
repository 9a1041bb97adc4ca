"""The fault catalogue: every injectable fault, its seed group and its nature for scoring.

Nature mapping (what a correct attribution must call the failure):

==============  ===================  ==================  ===========================
fault           group                exact natures       partial (neighbouring)
==============  ===================  ==================  ===========================
GPU_SLEEP       GPU hang             hang                network, gpu_error
GPU_ERROR       GPU error            gpu_error           crash, exception
SIGKILL         crash                crash, signal       scheduler
SEGFAULT        crash                crash               signal, gpu_error
OS_ABORT        crash                crash               signal
LOCK_GIL        Python hang/exc.     hang                network
WORKLOAD_EXC    Python hang/exc.     exception           crash
ASYNC_EXC       Python hang/exc.     exception           crash
SIGTERM         signal               signal              crash, scheduler
SIGINT          signal               signal              exception
SIGSTOP         signal               hang, signal        network
SIGNAL_EXC      signal               exception, signal   crash
NODE_KILL       node failure         crash, signal       network, scheduler, hang
EARLY_EXIT      program bug          exception           crash, hang, network
COLL._MISMATCH  program bug          exception           crash, hang, network
HOST_OOM        memory               exception           crash, signal
NONE            control              none                (nothing)
==============  ===================  ==================  ===========================

SIGSTOP freezes the rank, so its peers see a hang; SIGKILL is a crash by signal; a signal
handler that raises (SIGNAL_EXC) surfaces as a Python exception. NODE_KILL SIGKILLs every rank
of the injected rank's node and the node's launcher at once, as a lost node does: its ranks die
by a signal without a word, while the other nodes see broken connections or a stalled
collective (network, hang) or the scheduler's view of a lost node (neighbours).

The program bugs are what a restart replays: EARLY_EXIT leaves the training loop and exits 0
while its peers go on (a rank that returned or broke out early), COLLECTIVE_MISMATCH issues a
collective its peers do not (another size at the same sequence number). Neither raises on the
culprit by itself; its peers see a lost peer or a stalled or failed collective (neighbours).
HOST_OOM exhausts the rank's host memory under an address-space limit: its next allocation
fails (torch's ``DefaultCPUAllocator: can't allocate memory``, or Python's ``MemoryError``), an
exception; where the kernel's OOM killer ends a rank instead, it dies by SIGKILL (neighbours).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class FaultGroup(StrEnum):
    GPU_HANG = "GPU hang"
    GPU_ERROR = "GPU error"
    CRASH = "crash"
    PYTHON = "Python-level hang/exception"
    SIGNAL = "signal"
    NODE = "node failure"
    PROGRAM = "program bug"
    MEMORY = "memory"
    CONTROL = "control"


class Nature(StrEnum):
    """What kind of failure an attribution describes."""

    HANG = "hang"
    CRASH = "crash"
    EXCEPTION = "exception"
    SIGNAL = "signal"
    GPU_ERROR = "gpu_error"
    NETWORK = "network"
    SCHEDULER = "scheduler"
    NONE = "none"


class FaultType(StrEnum):
    GPU_ERROR = "GPU_ERROR"
    GPU_SLEEP = "GPU_SLEEP"
    WORKLOAD_EXC = "WORKLOAD_EXC"
    ASYNC_EXC = "ASYNC_EXC"
    SIGNAL_EXC = "SIGNAL_EXC"
    OS_ABORT = "OS_ABORT"
    LOCK_GIL = "LOCK_GIL"
    SEGFAULT = "SEGFAULT"
    SIGINT = "SIGINT"
    SIGKILL = "SIGKILL"
    SIGTERM = "SIGTERM"
    SIGSTOP = "SIGSTOP"
    NODE_KILL = "NODE_KILL"
    """Every rank of the injected rank's node, and its launcher, SIGKILLed at once."""
    EARLY_EXIT = "EARLY_EXIT"
    """The rank leaves the training loop and its process exits 0 while its peers go on."""
    COLLECTIVE_MISMATCH = "COLLECTIVE_MISMATCH"
    """The rank issues an all_reduce of another size than its peers' next collective."""
    HOST_OOM = "HOST_OOM"
    """The rank allocates host memory until an allocation fails."""
    NONE = "NONE"
    """Negative control: no injection; the expected answer is "no failure"."""

    @property
    def spec(self) -> FaultSpec:
        return FAULTS[self]

    @property
    def is_control(self) -> bool:
        return self is FaultType.NONE


@dataclass(frozen=True)
class FaultSpec:
    group: FaultGroup
    natures: tuple[Nature, ...]
    """Natures that describe the fault exactly (fault_described=true); the first is the headline."""
    neighbours: frozenset[Nature]
    """Natures that are close but not exact (fault_described=partial)."""

    @property
    def nature(self) -> Nature:
        """The headline nature, for reports."""
        return self.natures[0]


def _spec(group: FaultGroup, natures: str, neighbours: str = "") -> FaultSpec:
    return FaultSpec(
        group,
        tuple(Nature(n) for n in natures.split()),
        frozenset(Nature(n) for n in neighbours.split()),
    )


FAULTS: dict[FaultType, FaultSpec] = {
    FaultType.GPU_SLEEP: _spec(FaultGroup.GPU_HANG, "hang", "network gpu_error"),
    FaultType.GPU_ERROR: _spec(FaultGroup.GPU_ERROR, "gpu_error", "crash exception"),
    FaultType.SIGKILL: _spec(FaultGroup.CRASH, "crash signal", "scheduler"),
    FaultType.SEGFAULT: _spec(FaultGroup.CRASH, "crash", "signal gpu_error"),
    FaultType.OS_ABORT: _spec(FaultGroup.CRASH, "crash", "signal"),
    FaultType.LOCK_GIL: _spec(FaultGroup.PYTHON, "hang", "network"),
    FaultType.WORKLOAD_EXC: _spec(FaultGroup.PYTHON, "exception", "crash"),
    FaultType.ASYNC_EXC: _spec(FaultGroup.PYTHON, "exception", "crash"),
    FaultType.SIGTERM: _spec(FaultGroup.SIGNAL, "signal", "crash scheduler"),
    FaultType.SIGINT: _spec(FaultGroup.SIGNAL, "signal", "exception"),
    FaultType.SIGSTOP: _spec(FaultGroup.SIGNAL, "hang signal", "network"),
    FaultType.SIGNAL_EXC: _spec(FaultGroup.SIGNAL, "exception signal", "crash"),
    FaultType.NODE_KILL: _spec(FaultGroup.NODE, "crash signal", "network scheduler hang"),
    FaultType.EARLY_EXIT: _spec(FaultGroup.PROGRAM, "exception", "crash hang network"),
    FaultType.COLLECTIVE_MISMATCH: _spec(FaultGroup.PROGRAM, "exception", "crash hang network"),
    FaultType.HOST_OOM: _spec(FaultGroup.MEMORY, "exception", "crash signal"),
    FaultType.NONE: _spec(FaultGroup.CONTROL, "none"),
}

INJECTABLE: tuple[FaultType, ...] = tuple(f for f in FaultType if not f.is_control)
