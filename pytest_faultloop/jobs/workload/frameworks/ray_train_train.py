"""``ray_train``: the node's script is a Ray Train driver. It starts a local Ray cluster of its
own (``ray.init``: no dashboard, ``GPUS_PER_NODE`` logical CPUs so that many workers fit on
however few cores, its session under a temp directory removed at the end) and fits a
``TorchTrainer`` whose ``GPUS_PER_NODE`` workers train the tiny model under Ray's own
``prepare_model`` (DDP) on gloo, with the collective timeout as ``TorchConfig.timeout_s`` and
the plain-loop fault injector in ``train_loop_per_worker``. ``FailureConfig(max_failures=0)``:
a failed worker ends the run, which ``fit()`` raises as Ray Train reports it
(``ray.train.WorkerGroupError``, "[Rank 2 Error Snippet]:" and the worker's traceback).

The cluster's daemons (gcs_server, raylet) and the workers the raylet forks stay in the
driver's process group, and Ray starts its daemons with ``PR_SET_PDEATHSIG``: a backend that
signals the node's group, or kills the driver, takes the whole cluster with it.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import sys
import tempfile
from typing import Any

import ray
import ray.train
import torch
from ray.train import FailureConfig, RunConfig, ScalingConfig
from ray.train.torch import TorchConfig, TorchTrainer, prepare_model

from pytest_faultloop.jobs.workload.adapters.ray_train import ray_job_contract
from pytest_faultloop.jobs.workload.environment import NodeSpec
from pytest_faultloop.jobs.workload.fault_injector import FaultInjector
from pytest_faultloop.jobs.workload.frameworks.training import (
    TrainingPlan,
    flight_recorder_on_failure,
    tiny_model,
    train_steps,
)

log = logging.getLogger("ray_train_train")

WORKER_ENV = ("TORCH_FR_BUFFER_SIZE", "PYTHONUNBUFFERED")
"""Beyond the job contract, what the workers' torch must see when it starts (the flight
recorder records only with a buffer size set)."""


def train_loop_per_worker(config: dict[str, Any]) -> None:
    """One Ray Train worker: Ray has set up torch.distributed before calling it."""
    logging.basicConfig(
        level=logging.INFO, stream=sys.stdout, format="%(levelname)s:%(name)s:%(message)s"
    )
    torch.set_num_threads(1)
    plan: TrainingPlan = config["plan"]
    rank = ray.train.get_context().get_world_rank()
    with flight_recorder_on_failure(plan):
        # Ray Train has set up torch.distributed: the injector takes the rank from it
        loss = train_steps(prepare_model(tiny_model()), rank, plan, FaultInjector.from_env(), log)
        ray.train.report({"step": plan.steps, "loss": loss})


def trainer(spec: NodeSpec, plan: TrainingPlan) -> TorchTrainer:
    """The node's ``GPUS_PER_NODE`` workers; a failure ends the run (no restart)."""
    return TorchTrainer(
        train_loop_per_worker,
        train_loop_config={"plan": plan},
        scaling_config=ScalingConfig(num_workers=spec.gpus_per_node, use_gpu=False),
        torch_config=TorchConfig(
            backend="gloo", timeout_s=math.ceil(plan.collective_timeout.total_seconds())
        ),
        run_config=RunConfig(
            name=f"job_{spec.job_id}",
            storage_path=str(plan.experiment_dir / "ray_results"),
            failure_config=FailureConfig(max_failures=0),
        ),
    )


def main() -> int:
    spec = NodeSpec.from_env(os.environ)
    plan = TrainingPlan.from_env(os.environ, spec.world_size)
    # Ray's session directory holds unix sockets (at most 107 bytes a path): a short one.
    session_root = tempfile.mkdtemp(prefix=f"faultloop-ray-{spec.job_id}-")
    env_vars = ray_job_contract()
    env_vars.update({name: os.environ[name] for name in WORKER_ENV if name in os.environ})
    try:
        ray.init(
            num_cpus=spec.gpus_per_node,
            include_dashboard=False,
            runtime_env={"env_vars": env_vars},
            _temp_dir=session_root,
        )
        trainer(spec, plan).fit()
    finally:
        ray.shutdown()
        shutil.rmtree(session_root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
