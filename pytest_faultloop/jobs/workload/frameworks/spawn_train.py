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

import torch
import torch.distributed as dist
from torch.multiprocessing.spawn import spawn
from torch.nn.parallel import DistributedDataParallel

from pytest_faultloop.jobs.workload.environment import NodeSpec
from pytest_faultloop.jobs.workload.fault_injector import FaultInjector
from pytest_faultloop.jobs.workload.frameworks.training import (
    TrainingPlan,
    flight_recorder_on_failure,
    join_gloo,
    rank_environment,
    tiny_model,
    train_steps,
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
        join_gloo(rank, spec.world_size, plan)
        train_steps(
            DistributedDataParallel(tiny_model()), rank, plan, FaultInjector.from_env(), log
        )
        dist.barrier()
        dist.destroy_process_group()


def main() -> int:
    spec = NodeSpec.from_env(os.environ)
    spawn(train, args=(spec,), nprocs=spec.gpus_per_node, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
