"""The fault injector: arms a fault on a rank of a training loop and fires it for real.

Configured from the seed's variables (``FAULT_TYPE``, ``FAULT_RANK``, ``FAULT_AT_ITER``,
``FAULT_DELAY``). Training scripts use it through
:class:`~pytest_faultloop.jobs.workload.fault_injector.FaultInjector`, which gives a target rank an
:class:`Injector` and calls its three hooks:

* :meth:`Injector.on_iteration_end` after each iteration: iteration ``FAULT_AT_ITER`` arms the
  fault (``FAULT_DELAY`` seconds later a thread fires it); a fired ``WORKLOAD_EXC`` raises here,
  and the program bugs act here, in the loop's own thread: ``EARLY_EXIT`` leaves the loop
  (``SystemExit(0)``: the process ends with status 0 and leaves its process group behind, as a
  rank that returned early does), ``COLLECTIVE_MISMATCH`` issues a one-element ``all_reduce`` on
  the default group, where its peers' next collective is another one, and ``HOST_OOM`` allocates
  host memory under an address-space limit until an allocation fails (torch's allocator error
  where torch is loaded, else ``MemoryError``), which it raises.
* :meth:`Injector.device_step` where the loop launches its device work: the CPU emulation of
  ``GPU_SLEEP`` blocks here.
* :meth:`Injector.device_sync` where the loop waits for the device: the CPU emulation of
  ``GPU_ERROR`` raises PyTorch's asynchronous CUDA error here.

On a CUDA device both GPU faults use the real mechanisms (``torch.cuda._sleep`` on the current
stream, an out-of-range index kernel) and the two device hooks do nothing.

Marker lines come from the logger ``pytest_faultloop.inject`` (so analyzers can drop them) in the
seed's words, and ``${EXPERIMENT_DIR}/fault_injection.json`` (a :class:`FaultMarker`) is written
atomically when the fault is armed and again, with ``fired_at``, before the fault acts.

``FAULT_RANK`` may list several ranks (``12+14@3``, :mod:`pytest_faultloop.models.fault_ranks`):
each listed rank gets its own injector, firing ``FAULT_DELAY`` plus its offset after the anchor;
the first listed writes ``fault_injection.json``, every other one its own
``fault_injection.rank<R>.json``, so no rank overwrites another's marker.
"""

from __future__ import annotations

import ctypes
import datetime
import logging
import os
import re
import resource
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from pytest_faultloop.jobs.workload.envparse import env_int
from pytest_faultloop.jobs.workload.job_knobs import FAULT_DELAY_IN_JOB
from pytest_faultloop.jobs.workload.node_kill import kill_node
from pytest_faultloop.models import FaultMarker
from pytest_faultloop.models.errors import ConfigError
from pytest_faultloop.models.fault_ranks import FaultTarget, parse_fault_ranks
from pytest_faultloop.models.faults import INJECTABLE, FaultType
from pytest_faultloop.models.layout import ExperimentLayout

LOGGER_NAME = "pytest_faultloop.inject"

log = logging.getLogger(LOGGER_NAME)

CUDA_ERROR_TEXT = (
    "CUDA error: an illegal memory access was encountered\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, "
    "so the stacktrace below might be incorrect.\n"
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
)
"""What PyTorch raises (as ``RuntimeError``) after an asynchronous CUDA fault."""

_SIGNALS: dict[FaultType, signal.Signals] = {
    FaultType.SIGINT: signal.SIGINT,
    FaultType.SIGKILL: signal.SIGKILL,
    FaultType.SIGTERM: signal.SIGTERM,
    FaultType.SIGSTOP: signal.SIGSTOP,
}


class InjectedException(Exception):
    """Raised by WORKLOAD_EXC, ASYNC_EXC and SIGNAL_EXC (the seed's exception name)."""


@dataclass(frozen=True)
class FaultPlan:
    """Which fault, on which rank(s), anchored after which iteration, how many seconds later."""

    fault: FaultType
    rank: int
    """The injected rank; the first listed when there are several."""
    at_iter: int
    delay_s: float
    targets: tuple[FaultTarget, ...] = ()
    """Every injected rank and its offset after ``delay_s`` when FAULT_RANK lists several or an
    offset (``12+14@3``); empty: ``rank`` alone, at ``delay_s``."""

    @property
    def ranks(self) -> tuple[int, ...]:
        return tuple(t.rank for t in self.targets) or (self.rank,)

    def delay_of(self, rank: int) -> float:
        """Seconds from the anchor iteration to ``rank``'s fault."""
        return self.delay_s + next((t.offset_s for t in self.targets if t.rank == rank), 0.0)

    @classmethod
    def from_env(cls, env: Mapping[str, str], world_size: int) -> FaultPlan | None:
        """The plan the seed's variables describe; ``None`` for a clean run (FAULT_TYPE unset,
        empty or ``NONE``). FAULT_RANK is one rank or the pool's rank list (``12+14@3``).
        Raises :class:`ConfigError` naming the bad variable and value."""
        name = env.get("FAULT_TYPE", "").strip()
        if name in ("", FaultType.NONE.value):
            return None
        valid = ", ".join(f.value for f in INJECTABLE)
        if name not in {f.value for f in INJECTABLE}:
            raise ConfigError(
                f"FAULT_TYPE={name!r} is not a fault type; valid: {valid} "
                "(or unset / NONE for a clean run)"
            )
        targets = _fault_ranks(env)
        for target in targets:
            if target.rank >= world_size:
                raise ConfigError(
                    f"FAULT_RANK={target.rank} is outside the job's ranks 0..{world_size - 1} "
                    f"(world size {world_size})"
                )
        plain = len(targets) == 1 and not targets[0].offset_s
        return cls(
            fault=FaultType(name),
            rank=targets[0].rank,
            at_iter=env_int(env, "FAULT_AT_ITER", 5, minimum=0),
            delay_s=FAULT_DELAY_IN_JOB.read(env),
            targets=() if plain else targets,
        )


def _fault_ranks(env: Mapping[str, str]) -> tuple[FaultTarget, ...]:
    raw = env.get("FAULT_RANK", "").strip()
    if not re.search(r"[+@]", raw):
        return (FaultTarget(rank=env_int(env, "FAULT_RANK", 1, minimum=0)),)
    try:
        return parse_fault_ranks(raw)
    except ValueError as exc:
        raise ConfigError(f"FAULT_RANK={raw!r}: {exc}") from None


class Injector:
    """Arms and fires one fault in this process (the target rank)."""

    def __init__(
        self,
        plan: FaultPlan,
        *,
        node: int,
        experiment_dir: Path,
        cuda_device: int | None = None,
        rank: int | None = None,
    ) -> None:
        self.plan = plan
        self.rank = plan.rank if rank is None else rank
        """This process's rank, one of the plan's (default: its first)."""
        self.node = node
        layout = ExperimentLayout(experiment_dir)
        self.marker_path = (
            layout.marker if self.rank == plan.rank else layout.rank_marker(self.rank)
        )
        self.cuda_device = cuda_device
        """The CUDA device index the rank trains on; ``None`` selects the CPU emulations."""
        self.iteration = 0
        self._armed: FaultMarker | None = None
        self._fired: FaultMarker | None = None
        self._act_in_loop = threading.Event()
        self._device_hung = threading.Event()
        self._device_failed = threading.Event()
        self._main_thread_id = threading.main_thread().ident

    @property
    def emulated(self) -> bool:
        return self.cuda_device is None and self.plan.fault in (
            FaultType.GPU_SLEEP,
            FaultType.GPU_ERROR,
        )

    # --- hooks called by the training loop ----------------------------------------------------

    def on_iteration_end(self, iteration: int) -> None:
        """Arm after iteration ``FAULT_AT_ITER``; a fired fault of the loop acts here (see
        :data:`IN_THE_LOOP`). Main thread only."""
        self.iteration = iteration
        if self._armed is None and iteration >= self.plan.at_iter:
            self._arm(iteration)
        if self._act_in_loop.is_set():
            self._act_in_loop.clear()
            self._acted()
            IN_THE_LOOP[self.plan.fault](iteration)

    def device_step(self) -> None:
        """Where device work is launched: an emulated GPU_SLEEP never returns from here."""
        while self._device_hung.is_set():
            self._acted()
            time.sleep(3600)

    def device_sync(self) -> None:
        """Where the loop waits for the device: an emulated GPU_ERROR surfaces here."""
        if self._device_failed.is_set():
            self._acted()
            raise RuntimeError(CUDA_ERROR_TEXT)

    @property
    def _waits_for_loop(self) -> bool:
        """The fault acts at a hook of the loop, not when it fires."""
        return self.emulated or self.plan.fault in IN_THE_LOOP

    def _acted(self) -> None:
        """On a fault of several ranks, record when this rank's fault acted at a hook of the
        loop (a peer's failure may end the rank between firing and acting)."""
        fired = self._fired
        if len(self.plan.ranks) > 1 and fired is not None and fired.acted_at is None:
            self._fired = fired.model_copy(update={"acted_at": time.time()})
            _write_atomically(self.marker_path, self._fired.model_dump_json(indent=2))

    # --- arming and firing --------------------------------------------------------------------

    def _arm(self, iteration: int) -> None:
        now = time.time()
        fire_at = now + self.plan.delay_of(self.rank)
        self._armed = FaultMarker(
            fault=self.plan.fault,
            rank=self.rank,
            node=self.node,
            iteration=iteration,
            armed_at=now,
            pid=os.getpid(),
            host=os.environ.get("SLURMD_NODENAME") or socket.gethostname(),
        )
        if self.plan.fault is FaultType.SIGNAL_EXC:
            signal.signal(signal.SIGUSR1, _raise_injected)
        if (
            self.plan.fault is FaultType.SIGINT
            and signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        ):
            # a process started in the background (nohup, `cmd &`) inherits SIGINT ignored:
            # the injected SIGINT must still act, as it would on a foreground training job
            signal.signal(signal.SIGINT, signal.default_int_handler)
        _write_atomically(self.marker_path, self._armed.model_dump_json(indent=2))
        log.critical(
            "FAULT INJECTION: Rank %d will inject fault %s at %s",
            self.rank,
            self.plan.fault.value,
            _timestamp(fire_at),
        )
        threading.Thread(
            target=self._fire_at, args=(fire_at,), name="fault-injector", daemon=True
        ).start()

    def _fire_at(self, fire_at: float) -> None:
        time.sleep(max(0.0, fire_at - time.time()))
        assert self._armed is not None
        iteration = self.iteration
        now = time.time()
        fired = self._armed.model_copy(update={"fired_at": now, "iteration": iteration})
        if len(self.plan.ranks) > 1 and not self._waits_for_loop:
            fired = fired.model_copy(update={"acted_at": now})
        self._fired = fired
        _write_atomically(self.marker_path, fired.model_dump_json(indent=2))
        how = " (emulated on CPU)" if self.emulated else ""
        log.critical(
            "FAULT INJECTION: Rank %d injecting fault %s now, after iteration %d%s",
            self.rank,
            self.plan.fault.value,
            iteration,
            how,
        )
        for handler in logging.getLogger().handlers + log.handlers:
            handler.flush()
        self._act()

    def _act(self) -> None:
        """Do the fault to this process. Runs on the injector thread."""
        fault = self.plan.fault
        if fault in _SIGNALS:
            os.kill(os.getpid(), _SIGNALS[fault])
        elif fault is FaultType.SIGNAL_EXC:
            os.kill(os.getpid(), signal.SIGUSR1)
        elif fault in IN_THE_LOOP:
            self._act_in_loop.set()
        elif fault is FaultType.ASYNC_EXC:
            _async_raise(self._main_thread_id, InjectedException)
        elif fault is FaultType.OS_ABORT:
            os.abort()
        elif fault is FaultType.SEGFAULT:
            ctypes.string_at(1)
        elif fault is FaultType.LOCK_GIL:
            re.match(r"(a?){40}a{40}", "a" * 40)  # exponential backtracking; never lets go
        elif fault is FaultType.GPU_SLEEP:
            self._gpu_sleep()
        elif fault is FaultType.GPU_ERROR:
            self._gpu_error()
        elif fault is FaultType.NODE_KILL:
            kill_node()

    def _gpu_sleep(self) -> None:
        if self.cuda_device is None:
            self._device_hung.set()
            return
        import torch

        torch.cuda.set_device(self.cuda_device)
        torch.cuda._sleep(1 << 62)  # type: ignore[no-untyped-call]

    def _gpu_error(self) -> None:
        if self.cuda_device is None:
            self._device_failed.set()
            return
        import torch

        device = torch.device("cuda", self.cuda_device)
        index = torch.ones(1, dtype=torch.int64, device=device)
        target = torch.ones(1, dtype=torch.int64, device=device)
        target[index] = 0  # out-of-range index: an asynchronous device-side fault


# --- helpers ---------------------------------------------------------------------------------


def _workload_exception(iteration: int) -> NoReturn:
    raise InjectedException(f"workload exception at iteration {iteration}")


def _early_exit(iteration: int) -> NoReturn:
    raise SystemExit(0)


def _mismatched_collective(iteration: int) -> None:
    """An ``all_reduce`` of one element on the default group, which no peer issues: the
    peers' next collective meets it at the same sequence number with another size."""
    distributed = sys.modules.get("torch.distributed")
    if distributed is None or not distributed.is_initialized():
        raise ConfigError(
            "COLLECTIVE_MISMATCH needs torch.distributed's default group: call the injector's "
            "step after init_process_group"
        )
    import torch

    distributed.all_reduce(torch.zeros(1))


HOST_MEMORY_HEADROOM = 256 << 20
"""Bytes the rank may still allocate once the limit is set: a few blocks, then it fails."""
BLOCK = 64 << 20


def _exhaust_host_memory(iteration: int) -> NoReturn:
    """Allocate host memory until an allocation fails, and raise what failed: the address
    space is limited to what the process maps now plus :data:`HOST_MEMORY_HEADROOM` (a
    container's memory limit, a full host, without touching the machine's other processes).
    The limit and the blocks are given back on the way out, as freeing them would."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (_address_space() + HOST_MEMORY_HEADROOM, hard))
    torch = sys.modules.get("torch")
    blocks: list[object] = []
    try:
        while True:  # ends with the allocator's error: torch's RuntimeError or MemoryError
            blocks.append(torch.ones(BLOCK // 4) if torch else bytearray(BLOCK))
    finally:
        blocks.clear()
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _address_space() -> int:
    """The process's virtual size in bytes (``VmSize``)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")


IN_THE_LOOP: dict[FaultType, Callable[[int], None]] = {
    FaultType.WORKLOAD_EXC: _workload_exception,
    FaultType.EARLY_EXIT: _early_exit,
    FaultType.COLLECTIVE_MISMATCH: _mismatched_collective,
    FaultType.HOST_OOM: _exhaust_host_memory,
}
"""Faults that act at the loop's hook, in its thread (the fault thread only flags them), and
what each does there, given the iteration that just ended."""


def _raise_injected(signum: int, frame: object) -> None:
    raise InjectedException(f"signal {signal.Signals(signum).name} received")


def _async_raise(thread_id: int | None, exc_type: type[BaseException]) -> None:
    set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
    set_async_exc.argtypes = (ctypes.c_ulong, ctypes.py_object)
    set_async_exc.restype = ctypes.c_int
    if set_async_exc(thread_id, exc_type) != 1:
        set_async_exc(thread_id, None)
        raise RuntimeError(f"could not raise {exc_type.__name__} in thread {thread_id}")


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as out:
        out.write(text)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)


def _timestamp(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
