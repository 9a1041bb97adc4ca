"""The fault injector as a Transformers ``TrainerCallback``:

    from pytest_faultloop import TrainerFaultInjection

    trainer = Trainer(..., callbacks=[TrainerFaultInjection()])

The injector is made when training begins (the Trainer, or ``accelerate launch``, has set up
``torch.distributed`` by then) and stepped at the end of every optimizer step with the state's
``global_step`` (from 1).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from pytest_faultloop.jobs.workload.fault_injector import FaultInjector


class TrainerFaultInjection(TrainerCallback):
    """Fires the job's planned fault on its rank at the planned step."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self._env = env
        self.injector: FaultInjector | None = None

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self.injector = FaultInjector.from_env(self._env)

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if self.injector is not None:
            self.injector.step(state.global_step)
