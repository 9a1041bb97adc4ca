"""``mpirun``: Open MPI's launcher starts every rank of the job; each rank learns its place from
Open MPI's variables (``OMPI_COMM_WORLD_RANK``/``SIZE``, ``OMPI_COMM_WORLD_LOCAL_RANK``/``SIZE``),
sets up torch.distributed's gloo group itself (``MASTER_ADDR``/``MASTER_PORT``, passed with
``-x``) and trains the tiny model under ``DistributedDataParallel`` with the fault injector in its
loop. MPI itself carries no tensor: the ranks never call ``MPI_Init``, as in PyTorch jobs that use
mpirun only to start their processes. A rank that dies surfaces as mpirun reports it ("mpirun
noticed that process rank 2 ... exited on signal 9"; "... exited with non-zero status ... The
first process to do so was"), after which mpirun ends the other ranks.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping

import torch

from pytest_faultloop.jobs.workload.envparse import env_int
from pytest_faultloop.jobs.workload.frameworks.training import rank_environment, train_plain_ddp
from pytest_faultloop.models.errors import ConfigError

log = logging.getLogger("mpirun_train")


def mpi_place(env: Mapping[str, str]) -> tuple[int, int, int, int]:
    """(rank, local rank, world size, ranks on this node) as mpirun gives them; ConfigError
    where this process was not started by Open MPI's mpirun."""
    for name in ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"):
        if not env.get(name, "").strip():
            raise ConfigError(
                f"{name} is not set: start this module with Open MPI's launcher, e.g. "
                "mpirun -np 4 python -m pytest_faultloop.jobs.workload.frameworks.mpirun_train"
            )
    world = env_int(env, "OMPI_COMM_WORLD_SIZE", 1, minimum=1)
    rank = env_int(env, "OMPI_COMM_WORLD_RANK", 0, minimum=0)
    if rank >= world:
        raise ConfigError(f"OMPI_COMM_WORLD_RANK={rank} is outside OMPI_COMM_WORLD_SIZE={world}")
    local_rank = env_int(env, "OMPI_COMM_WORLD_LOCAL_RANK", rank, minimum=0)
    local_world = env_int(env, "OMPI_COMM_WORLD_LOCAL_SIZE", world, minimum=1)
    return rank, local_rank, world, local_world


def main() -> int:
    logging.basicConfig(
        level=logging.INFO, stream=sys.stdout, format="%(levelname)s:%(name)s:%(message)s"
    )
    try:
        rank, local_rank, world_size, local_world = mpi_place(os.environ)
    except ConfigError as exc:
        print(f"mpirun_train: {exc}", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    # the injector, NODE_KILL (mpirun is this node's launcher) and torch read torchrun's names
    rank_environment(rank, local_rank, world_size, local_world)
    train_plain_ddp(rank, world_size, log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
