"""``lightning``: each node runs this script as a plain ``python -m`` process, which becomes the
node's local rank 0 and, inside ``Trainer.fit``, Lightning's own launcher
(``_SubprocessScriptLauncher``): it starts the node's other ranks by running the same command
again with ``LOCAL_RANK`` set. Every rank trains the tiny model under Lightning's
``DDPStrategy`` on gloo, with the fault injector as a user adds it: the
:class:`~pytest_faultloop.jobs.workload.adapters.lightning.LightningFaultInjection` callback.

What Lightning does with a failure: a rank that raises prints its traceback and exits 1; the
node's rank 0 watches its children every 5 s and, when one exits non-zero, logs "[rank: 2] Child
process with PID ... terminated with code -9" and SIGKILLs the node's ranks, itself included; a
SIGTERM is logged as "[rank: 2] Received SIGTERM: 15" and the rank leaves quietly at its next
step (``SIGTERMException`` is a ``SystemExit``). Both prefixes carry the *local* rank. Nothing
watches rank 0: when it dies, its children live on until their next collective fails, so
NODE_KILL is a node loss only on a node's other ranks (their parent is the launcher); on a
node's rank 0 it kills that process alone.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.fabric.plugins.environments.lightning import LightningEnvironment
from lightning.pytorch.strategies import DDPStrategy
from torch.utils.data import DataLoader

from pytest_faultloop.jobs.workload.adapters.lightning import LightningFaultInjection
from pytest_faultloop.jobs.workload.environment import NodeSpec
from pytest_faultloop.jobs.workload.frameworks.training import (
    TrainingPlan,
    collective_timeout_everywhere,
    flight_recorder_on_failure,
    tiny_batches,
    tiny_model,
)

log = logging.getLogger("lightning_train")


class TinyRegression(pl.LightningModule):
    """The tiny model as a LightningModule; each rank reads batches of its own."""

    def __init__(self, plan: TrainingPlan) -> None:
        super().__init__()
        self.plan = plan
        self.net = tiny_model()
        self._step_started = time.monotonic()

    def setup(self, stage: str) -> None:
        # Lightning passes one timeout to init_process_group, for joining and for every
        # collective alike; joining gets the startup timeout (ranks start one after another,
        # each importing Lightning), the collectives from here on the collective timeout.
        collective_timeout_everywhere(self.plan)

    def train_dataloader(self) -> DataLoader[Any]:
        batches = tiny_batches(self.global_rank, self.plan.steps)
        return DataLoader(batches, batch_size=None)  # type: ignore[arg-type]

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.05)

    def on_train_batch_start(self, batch: Any, batch_idx: int) -> None:
        self._step_started = time.monotonic()

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> Any:
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        # after the callbacks' hook: the injector has stepped (as in spawn_train's loop)
        if self.global_rank == 0:
            loss = float(outputs["loss"])
            log.info("step %d/%d loss %.6f", self.trainer.global_step, self.plan.steps, loss)
        self.plan.pace(self._step_started)


def main() -> int:
    spec = NodeSpec.from_env(os.environ)
    logging.basicConfig(
        level=logging.INFO, stream=sys.stdout, format="%(levelname)s:%(name)s:%(message)s"
    )
    torch.set_num_threads(1)
    os.environ["NODE_RANK"] = str(spec.node)  # LightningEnvironment's node rank
    if "LOCAL_RANK" in os.environ:
        # Started by the node's rank 0, Lightning's launcher: NODE_KILL takes the parent for
        # the node's launcher where LOCAL_WORLD_SIZE is set (torchrun's convention). Rank 0
        # itself has none (its parent is the job script).
        os.environ["LOCAL_WORLD_SIZE"] = str(spec.gpus_per_node)
    plan = TrainingPlan.from_env(os.environ, spec.world_size)
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=spec.gpus_per_node,
        num_nodes=spec.nnodes,
        # LightningEnvironment, not the SLURMEnvironment Lightning detects from SLURM_NTASKS:
        # one task per node, Lightning starting the node's ranks itself
        strategy=DDPStrategy(
            cluster_environment=LightningEnvironment(),
            process_group_backend="gloo",
            timeout=plan.startup_timeout,
        ),
        max_epochs=1,
        max_steps=plan.steps,
        callbacks=[LightningFaultInjection()],
        use_distributed_sampler=False,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=plan.experiment_dir,
    )
    with flight_recorder_on_failure(plan):
        trainer.fit(TinyRegression(plan))
    return 0


if __name__ == "__main__":
    sys.exit(main())
