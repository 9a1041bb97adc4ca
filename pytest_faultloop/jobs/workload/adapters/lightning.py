"""The fault injector as a Lightning callback (``lightning.pytorch``):

    from pytest_faultloop import LightningFaultInjection

    trainer = L.Trainer(..., callbacks=[LightningFaultInjection()])

The injector is made when training starts (the strategy has set up ``torch.distributed`` by
then) and stepped after every training batch with the trainer's ``global_step`` (optimizer steps
done, from 1).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import lightning.pytorch as pl

from pytest_faultloop.jobs.workload.fault_injector import FaultInjector


class LightningFaultInjection(pl.Callback):
    """Fires the job's planned fault on its rank at the planned step."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        super().__init__()
        self._env = env
        self.injector: FaultInjector | None = None

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.injector = FaultInjector.from_env(self._env)

    def on_train_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        if self.injector is not None:
            self.injector.step(trainer.global_step)
