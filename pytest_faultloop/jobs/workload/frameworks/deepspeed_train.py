"""``deepspeed``: each node runs DeepSpeed's own launcher (``deepspeed``), which starts the
node's ranks as ``python -u -m <this module> --local_rank=N``; each trains the tiny model as a
``deepspeed.initialize`` engine (ZeRO off, torch's SGD: no optimizer op to compile) on gloo, with the
fault injector in its loop. DeepSpeed picks its CPU accelerator by itself and compiles its
shared-memory comm op with g++ at first use (cached under ``~/.cache/torch_extensions``).

A rank that fails surfaces in the node's log as DeepSpeed's launcher reports it: it SIGTERMs
the node's other ranks (most die without a word or a dump) and says ``[...] exits with return
code = N`` naming the *last* rank it spawned, whichever one failed (``--local_rank=3`` ...
``return code = -15`` for a SIGTERM on local rank 2). Under
NODE_KILL the node's ``deepspeed`` runner outlives its launcher and exits 0 without a word (it
passes on only positive exit codes).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from typing import Any

import deepspeed
import torch
import torch.distributed as dist

from pytest_faultloop.jobs.workload.fault_injector import FaultInjector
from pytest_faultloop.jobs.workload.frameworks.training import (
    BATCH,
    TrainingPlan,
    collective_timeout_everywhere,
    flight_recorder_on_failure,
    tiny_batches,
    tiny_model,
)

log = logging.getLogger("deepspeed_train")


def ds_config(world_size: int) -> dict[str, Any]:
    """The smallest DeepSpeed config: data parallel, no ZeRO, fp32, quiet step reports."""
    return {
        "train_micro_batch_size_per_gpu": BATCH,
        "train_batch_size": BATCH * world_size,
        "zero_optimization": {"stage": 0},
        "steps_per_print": 1_000_000,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--local_rank", type=int, default=0, help="given by DeepSpeed's launcher")
    parser.parse_args()
    logging.basicConfig(
        level=logging.INFO, stream=sys.stdout, format="%(levelname)s:%(name)s:%(message)s"
    )
    torch.set_num_threads(1)
    # DeepSpeed's launcher gives its ranks LOCAL_SIZE but not torchrun's LOCAL_WORLD_SIZE, by
    # which NODE_KILL knows the rank's parent is the node's launcher.
    os.environ.setdefault("LOCAL_WORLD_SIZE", os.environ.get("LOCAL_SIZE", "1"))
    world_size = int(os.environ["WORLD_SIZE"])
    plan = TrainingPlan.from_env(os.environ, world_size)
    with flight_recorder_on_failure(plan):
        deepspeed.init_distributed(dist_backend="gloo", timeout=plan.startup_timeout)
        rank = dist.get_rank()
        injector = FaultInjector.from_env()
        model = tiny_model()
        engine, _, _, _ = deepspeed.initialize(
            model=model,
            optimizer=torch.optim.SGD(model.parameters(), lr=0.05),
            config=ds_config(world_size),
        )
        collective_timeout_everywhere(plan)
        for step, (x, y) in enumerate(tiny_batches(rank, plan.steps), start=1):
            started = time.monotonic()
            loss = torch.nn.functional.mse_loss(engine(x), y)
            engine.backward(loss)
            engine.step()
            if rank == 0:
                log.info("step %d/%d loss %.6f", step, plan.steps, loss.item())
            injector.step(step)
            plan.pace(started)
        dist.barrier()
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
