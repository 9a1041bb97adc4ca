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
from torch.multiprocessing.spawn import spawn

from pytest_faultloop.jobs.workload.environment import NodeSpec
from pytest_faultloop.jobs.workload.frameworks.training import rank_environment, train_plain_ddp

log = logging.getLogger("spawn_train")


def train(local_rank: int, spec: NodeSpec) -> None:
    """One rank (spawn's entry point: the local rank first)."""
    logging.basicConfig(
        level=logging.INFO, stream=sys.stdout, format="%(levelname)s:%(name)s:%(message)s"
    )
    torch.set_num_threads(1)
    rank = spec.global_rank(local_rank)
    rank_environment(rank, local_rank, spec.world_size, spec.gpus_per_node)
    train_plain_ddp(rank, spec.world_size, log)


def main() -> int:
    spec = NodeSpec.from_env(os.environ)
    spawn(train, args=(spec,), nprocs=spec.gpus_per_node, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
