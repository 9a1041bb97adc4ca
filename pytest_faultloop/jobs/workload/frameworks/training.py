"""What every framework workload's training script shares: how long it trains, its timeouts,
a tiny model and its data, and the flight-recorder dump on the way out of a failure.

Each script trains a fixed number of optimizer steps: the injector's anchor (``FAULT_AT_ITER``)
and then enough steps of at least ``FAULTLOOP_ITER_PERIOD_S`` each to outlast ``FAULT_DELAY`` +
``FAULTLOOP_EXIT_MARGIN_S``; every rank knows the count, so all stop at the same step without a
collective of our own (the frameworks' loops decide when to stop, not ours).
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import math
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import torch

from pytest_faultloop.jobs.workload.environment import (
    TrainSettings,
    hints_from,
    startup_timeout_from,
)
from pytest_faultloop.jobs.workload.fault_injector import FaultInjector

FEATURES, HIDDEN, BATCH = 16, 32, 32
LEARNING_RATE = 0.05
SHORTEST_STEP_S = 0.01
"""Steps are counted as if at least this long, where the period is 0 (as fast as they go)."""


@dataclass(frozen=True)
class TrainingPlan:
    """How long a framework workload trains, and its timeouts."""

    settings: TrainSettings
    steps: int
    startup_timeout: datetime.timedelta
    collective_timeout: datetime.timedelta
    hints: bool

    @classmethod
    def from_env(cls, env: Mapping[str, str], world_size: int) -> TrainingPlan:
        settings = TrainSettings.from_env(env)
        period = max(settings.iter_period_s, SHORTEST_STEP_S)
        return cls(
            settings,
            settings.anchor_iter + math.ceil(settings.run_after_anchor_s / period) + 1,
            datetime.timedelta(seconds=startup_timeout_from(env, world_size)),
            datetime.timedelta(seconds=settings.collective_timeout_s),
            hints_from(env),
        )

    @property
    def experiment_dir(self) -> Path:
        return self.settings.experiment_dir

    def pace(self, step_started: float) -> None:
        """Sleep the rest of the shortest step (``FAULTLOOP_ITER_PERIOD_S``)."""
        time.sleep(max(0.0, self.settings.iter_period_s - (time.monotonic() - step_started)))


def join_gloo(rank: int, world_size: int, plan: TrainingPlan) -> None:
    """Set up torch.distributed on gloo where the launcher leaves it to the script (spawn,
    MPI): joining is timed by the startup timeout, every collective after it by the plan's
    (gloo's default is 30 minutes: a hung peer must end the job within the plan's time)."""
    import torch.distributed as dist

    dist.init_process_group("gloo", rank=rank, world_size=world_size, timeout=plan.startup_timeout)
    collective_timeout_everywhere(plan)


def collective_timeout_everywhere(plan: TrainingPlan) -> None:
    """Give every process group this rank belongs to the plan's collective timeout, once it
    has joined (with the startup timeout: ranks start one after another). A framework's setup
    reaches the default group at most (DeepSpeed's gradient all-reduce runs on a clone of the
    world group it makes itself), and gloo's default is 30 minutes: a hung peer must end the
    job within the plan's time."""
    import torch.distributed as dist

    for group in list(dist.distributed_c10d._world.pg_map):
        group.set_timeout(plan.collective_timeout)


def train_steps(
    model: torch.nn.Module,
    rank: int,
    plan: TrainingPlan,
    injector: FaultInjector,
    log: logging.Logger,
) -> float:
    """The plain loop: ``plan.steps`` SGD steps of the (DDP-wrapped) model on this rank's
    batches, rank 0 logging each, the injector stepped after each; the last loss."""
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    loss = torch.zeros(())
    for step, (x, y) in enumerate(tiny_batches(rank, plan.steps), start=1):
        started = time.monotonic()
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        if rank == 0:
            log.info("step %d/%d loss %.6f", step, plan.steps, loss.item())
        injector.step(step)
        plan.pace(started)
    return float(loss.item())


def tiny_model() -> torch.nn.Module:
    """The same small model on every rank (a fixed seed)."""
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(FEATURES, HIDDEN), torch.nn.Tanh(), torch.nn.Linear(HIDDEN, 1)
    )


def tiny_batches(rank: int, count: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``count`` batches of regression data of this rank's own."""
    data = torch.Generator().manual_seed(1000 + rank)
    truth = torch.randn(FEATURES, 1, generator=torch.Generator().manual_seed(0))
    batches = []
    for _ in range(count):
        x = torch.randn(BATCH, FEATURES, generator=data)
        batches.append((x, x @ truth))
    return batches


@contextlib.contextmanager
def flight_recorder_on_failure(plan: TrainingPlan) -> Iterator[None]:
    """On the way out of a failure, dump this rank's flight recorder where torch's process
    group is up (gloo records but never dumps by itself), then let the failure go on."""
    try:
        yield
    except BaseException as exc:
        if type(exc) is SystemExit and not exc.code:
            raise  # sys.exit(0): the training code left on purpose, no failure of its own
        import torch.distributed as dist

        from pytest_faultloop.jobs.workload.flight_recorder import dump_and_log

        if dist.is_available() and dist.is_initialized():
            dump_and_log(
                plan.experiment_dir,
                dist.get_rank(),
                f"failed: {type(exc).__name__}",
                hints=plan.hints,
            )
        raise


def train_plain_ddp(rank: int, world_size: int, log: logging.Logger) -> None:
    """One rank of a plain torch.distributed job (spawn's, MPI's): gloo, the tiny model under
    DDP, the injector after every optimizer step, the flight recorder dumped on a failure."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    plan = TrainingPlan.from_env(os.environ, world_size)
    with flight_recorder_on_failure(plan):
        join_gloo(rank, world_size, plan)
        train_steps(
            DistributedDataParallel(tiny_model()), rank, plan, FaultInjector.from_env(), log
        )
        dist.barrier()
        dist.destroy_process_group()


def rank_environment(rank: int, local_rank: int, world_size: int, local_world: int) -> None:
    """The variables torchrun gives a worker, for a launcher that gives none (spawn, MPI): the
    injector and NODE_KILL read them."""
    os.environ.update(
        RANK=str(rank),
        LOCAL_RANK=str(local_rank),
        WORLD_SIZE=str(world_size),
        LOCAL_WORLD_SIZE=str(local_world),
    )
