"""``spawn``: each node's script starts its ranks with ``torch.multiprocessing.spawn`` (global
rank = node × GPUS_PER_NODE + local rank), each trains the tiny model under
``DistributedDataParallel`` on gloo with the fault injector in its loop. A rank that dies
surfaces in the node's script as spawn reports it: ``ProcessExitedException`` ("process 2
terminated with signal SIGKILL") or ``ProcessRaisedException`` with the rank's traceback.
"""

from __future__ import annotations

import logging
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.multiprocessing.spawn import spawn
from torch.nn.parallel import DistributedDataParallel

from pytest_faultloop.jobs.workload.environment import NodeSpec
from pytest_faultloop.jobs.workload.fault_injector import FaultInjector
from pytest_faultloop.jobs.workload.frameworks.training import (
    TrainingPlan,
    flight_recorder_on_failure,
    rank_environment,
    tiny_batches,
    tiny_model,
)

log = logging.getLogger("spawn_train")


def train(local_rank: int, spec: NodeSpec) -> None:
    """One rank (spawn's entry point: the local rank first)."""
    logging.basicConfig(
        level=logging.INFO, stream=sys.stdout, format="%(levelname)s:%(name)s:%(message)s"
    )
    torch.set_num_threads(1)
    rank = spec.global_rank(local_rank)
    rank_environment(rank, local_rank, spec.world_size, spec.gpus_per_node)
    plan = TrainingPlan.from_env(os.environ, spec.world_size)
    with flight_recorder_on_failure(plan):
        dist.init_process_group(
            "gloo", rank=rank, world_size=spec.world_size, timeout=plan.startup_timeout
        )
        dist.distributed_c10d._get_default_group().set_timeout(plan.collective_timeout)
        injector = FaultInjector.from_env()
        model = DistributedDataParallel(tiny_model())
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
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
        dist.barrier()
        dist.destroy_process_group()


def main() -> int:
    spec = NodeSpec.from_env(os.environ)
    spawn(train, args=(spec,), nprocs=spec.gpus_per_node, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
