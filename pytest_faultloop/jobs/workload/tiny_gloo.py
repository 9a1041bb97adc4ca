"""``tiny_gloo``: a real data-parallel training job on torch.distributed gloo, on CPU.

Every rank trains the same two-layer model on its own data: per iteration an emulated
tensor-parallel all-reduce inside its node's group, then one all-reduce of all gradients (a DDP
bucket) over the world, then an SGD step by hand (building ``torch.optim`` imports torch._dynamo,
~1.3 s per rank). Rank 0 logs the loss and decides, as Megatron's exit-duration check does, when
to stop: ``FAULT_DELAY`` + a margin after the injector's anchor iteration; the decision travels in
the gradient all-reduce, so every rank runs the same number of collectives.

On a failure every rank dumps its flight recorder and lets the exception (and its traceback)
propagate; with ``FAULTLOOP_WORKLOAD_HINTS=1`` it first logs one line naming its rank, iteration
and the collective it was in (a real job prints no such line).
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime
import faulthandler
import logging
import os
import signal
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.distributed as dist

from pytest_faultloop.jobs.workload.environment import (
    RankIdentity,
    TrainSettings,
    hints_from,
    startup_timeout_from,
)
from pytest_faultloop.jobs.workload.fault_injector import FaultInjector
from pytest_faultloop.jobs.workload.flight_recorder import StallWatchdog, dump_and_log
from pytest_faultloop.jobs.workload.heartbeat import Heartbeat, private_heartbeat
from pytest_faultloop.models.layout import ExperimentLayout

log = logging.getLogger("tiny_gloo.train")

LOG_FORMAT = "[%(asctime)s.%(msecs)03d] [%(levelname)s] [%(name)s] %(message)s"
LOG_DATEFMT = "%Y-%m-%d %H:%M:%S"

_PR_SET_PDEATHSIG = 1

BATCH, FEATURES, HIDDEN = 32, 16, 32
LEARNING_RATE = 0.05


def configure_logging() -> None:
    """One line per record on stdout, every record naming its logger."""
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter(LOG_FORMAT, LOG_DATEFMT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)


@dataclass
class CollectiveTracker:
    """Which collective the rank is in (for the failure line), counted per process group."""

    current: str | None = None
    last_completed: str | None = None
    counts: dict[str, int] = field(default_factory=dict)

    @contextlib.contextmanager
    def op(self, name: str, group_desc: str) -> Iterator[None]:
        count = self.counts[group_desc] = self.counts.get(group_desc, 0) + 1
        self.current = f"{name} on process group '{group_desc}' (collective #{count})"
        yield
        self.last_completed, self.current = self.current, None

    def where(self) -> str:
        if self.current is not None:
            return f"in collective {self.current}"
        last = self.last_completed or "none"
        return f"outside any collective (last completed: {last})"


@dataclass
class Model:
    w1: torch.Tensor
    w2: torch.Tensor
    truth: torch.Tensor

    @classmethod
    def create(cls) -> Model:
        init = torch.Generator().manual_seed(0)  # the same start on every rank
        return cls(
            w1=(torch.randn(FEATURES, HIDDEN, generator=init) * 0.3).requires_grad_(),
            w2=(torch.randn(HIDDEN, 1, generator=init) * 0.3).requires_grad_(),
            truth=torch.randn(FEATURES, 1, generator=init),
        )

    @property
    def params(self) -> list[torch.Tensor]:
        return [self.w1, self.w2]


def train(
    identity: RankIdentity,
    settings: TrainSettings,
    heartbeat: Heartbeat,
    env: Mapping[str, str],
) -> None:
    """Run the job on this rank; raises whatever stopped it (after logging it and dumping FR)."""
    rank = identity.rank
    tracker = CollectiveTracker()
    iteration = 0
    hints = hints_from(env)
    watchdog = StallWatchdog(
        settings.experiment_dir, rank, heartbeat, settings.fr_stall_s, hints=hints
    )
    try:
        # Joining is timed by the startup timeout (ranks start at different moments on a loaded
        # machine), everything after it by the collective timeout.
        joining = datetime.timedelta(seconds=startup_timeout_from(env, identity.world_size))
        with tracker.op("init_process_group", "default_pg"):
            dist.init_process_group(
                "gloo",
                init_method="env://",
                rank=rank,
                world_size=identity.world_size,
                timeout=joining,
            )
        with tracker.op("new_subgroups", "default_pg"):
            tp_group, _ = dist.new_subgroups(  # type: ignore[no-untyped-call]
                group_size=identity.gpus_per_node, timeout=joining, group_desc="tensor_parallel"
            )
        injector = FaultInjector.from_env(env)
        timeout = datetime.timedelta(seconds=settings.collective_timeout_s)
        for group in (dist.distributed_c10d._get_default_group(), tp_group):
            group.set_timeout(timeout)
        heartbeat.beat()
        watchdog.start()
        log.info(
            "Rank %d (local rank %d, node %d, %s) joined %d ranks; collective timeout %.0f s",
            rank,
            identity.local_rank,
            identity.node,
            identity.host,
            identity.world_size,
            settings.collective_timeout_s,
        )
        for _ in _iterations(identity, settings, tracker, tp_group, heartbeat, injector):
            pass
        with tracker.op("barrier", "default_pg"):
            dist.barrier()
        watchdog.stop()
        log.info("Rank %d finished %d iterations", rank, iteration)
        dist.destroy_process_group()
    except SystemExit:  # the training code left early on purpose: no failure of its own
        watchdog.stop()
        raise
    except BaseException as exc:
        watchdog.stop()
        if hints:
            first_line = (str(exc).strip().splitlines() or [""])[0]
            log.error(
                "Rank %d failed at iteration %d %s: %s: %s",
                rank,
                iteration + 1,
                tracker.where(),
                type(exc).__name__,
                first_line,
            )
        if dist.is_initialized():
            dump_and_log(
                settings.experiment_dir, rank, f"failed: {type(exc).__name__}", hints=hints
            )
        raise


def _iterations(
    identity: RankIdentity,
    settings: TrainSettings,
    tracker: CollectiveTracker,
    tp_group: dist.ProcessGroup,
    heartbeat: Heartbeat,
    injector: FaultInjector,
) -> Iterator[int]:
    """Train until rank 0 says stop; yields each finished iteration."""
    model = Model.create()
    data = torch.Generator().manual_seed(1000 + identity.rank)
    scalars = _Scalars(settings.experiment_dir) if identity.rank == 0 else None
    anchored_at: float | None = None
    iteration = 0
    while True:
        iteration += 1
        started = time.monotonic()
        injector.device_work_starts()
        x = torch.randn(BATCH, FEATURES, generator=data)
        hidden = torch.tanh(x @ model.w1)
        loss = torch.nn.functional.mse_loss(hidden @ model.w2, x @ model.truth)
        loss.backward()  # type: ignore[no-untyped-call]
        activation_norm = hidden.detach().norm().reshape(1)
        with tracker.op("all_reduce", "tensor_parallel"):
            dist.all_reduce(activation_norm, group=tp_group)
        injector.device_work_done()
        if anchored_at is None and iteration >= settings.anchor_iter:
            anchored_at = time.monotonic()
        stop = identity.rank == 0 and _past_exit_duration(settings, iteration, anchored_at)
        bucket = torch.cat(
            [_grad(p).reshape(-1) for p in model.params]
            + [loss.detach().reshape(1), torch.tensor([1.0 if stop else 0.0])]
        )
        with tracker.op("all_reduce", "default_pg"):
            dist.all_reduce(bucket)
        with torch.no_grad():
            offset = 0
            for p in model.params:
                p -= (  # noqa: PLW2901 - updates the parameter tensor in place
                    LEARNING_RATE
                    * bucket[offset : offset + p.numel()].view_as(p)
                    / identity.world_size
                )
                p.grad = None
                offset += p.numel()
        heartbeat.beat()
        step_ms = (time.monotonic() - started) * 1000
        mean_loss = bucket[-2].item() / identity.world_size
        if scalars is not None:
            scalars.add(iteration, mean_loss, step_ms)
            log.info(
                "iteration %8d | consumed samples: %10d | elapsed time per iteration (ms): %.1f"
                " | learning rate: %.3E | lm loss: %.6E |",
                iteration,
                iteration * BATCH * identity.world_size,
                step_ms,
                LEARNING_RATE,
                mean_loss,
            )
        injector.step(iteration)
        yield iteration
        if bucket[-1].item() > 0:
            if identity.rank == 0:
                log.info("exit duration reached after iteration %d; stopping", iteration)
            return
        time.sleep(max(0.0, settings.iter_period_s - (time.monotonic() - started)))


def _past_exit_duration(settings: TrainSettings, iteration: int, anchored_at: float | None) -> bool:
    if anchored_at is None or iteration <= settings.anchor_iter:
        return False
    return time.monotonic() - anchored_at >= settings.run_after_anchor_s


def _grad(parameter: torch.Tensor) -> torch.Tensor:
    """A parameter's gradient, present after ``backward``."""
    assert parameter.grad is not None
    return parameter.grad


class _Scalars:
    """``tensorboard/scalars.csv``: iteration, loss and step time, one line per iteration."""

    def __init__(self, experiment_dir: Path) -> None:
        path = ExperimentLayout(experiment_dir).tensorboard / "scalars.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        self._out = open(path, "w", buffering=1)  # noqa: SIM115 - open while training
        self._out.write("iteration,lm_loss,step_ms\n")

    def add(self, iteration: int, loss: float, step_ms: float) -> None:
        self._out.write(f"{iteration},{loss:.6e},{step_ms:.2f}\n")


def die_with_parent(parent: int) -> bool:
    """SIGKILL this process when the one that started it ends; False when ``parent`` has
    already ended."""
    ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    return os.getppid() == parent


def main() -> int:
    """Run one rank started by another launcher: torchrun's agent, or one Slurm task per rank.
    The rank dies with the process that started it, as a forked rank does."""
    parent = os.getppid()
    if parent == 1 or not die_with_parent(parent):
        return 1  # the launcher is already gone
    faulthandler.enable()
    configure_logging()
    torch.set_num_threads(1)
    train(
        RankIdentity.from_env(os.environ),
        TrainSettings.from_env(os.environ),
        private_heartbeat(),
        os.environ,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
