"""``accelerate``: each node runs ``accelerate launch --multi_gpu`` (Hugging Face accelerate's
launcher, torchrun's elastic agent inside; with no GPU its ranks train on CPU over gloo), whose
ranks each run a Transformers ``Trainer`` on a tiny BERT built from a config (nothing is
downloaded) with the injector added as a user would: ``callbacks=[TrainerFaultInjection()]``.

A failing rank surfaces as the elastic agent reports it inside accelerate's launcher: the
rank's traceback, then ``ChildFailedError`` with its "Root Cause" table (rank, exit code or
signal), raised through ``accelerate launch``'s own frames. Ranks whose collective fails
(the failed rank's ring neighbours, or all after a hang's timeout) dump their flight recorder;
a rank the agent ends with SIGTERM first dumps nothing (measured: mostly the node's local rank 0).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import torch
import torch.distributed as dist
from accelerate import PartialState
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    Trainer,
    TrainerCallback,
    TrainerControl,
    TrainerState,
    TrainingArguments,
)

from pytest_faultloop.jobs.workload.adapters.transformers import TrainerFaultInjection
from pytest_faultloop.jobs.workload.frameworks.training import (
    TrainingPlan,
    collective_timeout_everywhere,
    flight_recorder_on_failure,
)

VOCAB, SEQUENCE, SAMPLES, BATCH = 64, 8, 64, 4


class TinyTexts(torch.utils.data.Dataset[dict[str, torch.Tensor]]):
    """Token ids and labels of a fixed seed: a classification set that needs no tokenizer."""

    def __init__(self) -> None:
        data = torch.Generator().manual_seed(0)
        self.ids = torch.randint(VOCAB, (SAMPLES, SEQUENCE), generator=data)
        self.labels = (self.ids.sum(dim=1) % 2).long()

    def __len__(self) -> int:
        return SAMPLES

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[index], "labels": self.labels[index]}


def tiny_bert() -> BertForSequenceClassification:
    """The same one-layer BERT on every rank (a fixed seed), built from its config."""
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=VOCAB,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=SEQUENCE,
    )
    return BertForSequenceClassification(config)


class Pace(TrainerCallback):
    """Each optimizer step lasts at least ``FAULTLOOP_ITER_PERIOD_S`` (after the injector's
    callback, as the reference loop paces after ``injector.step``)."""

    def __init__(self, plan: TrainingPlan) -> None:
        self.plan = plan
        self.started = time.monotonic()

    def on_step_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self.started = time.monotonic()

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self.plan.pace(self.started)


def main() -> int:
    plan = TrainingPlan.from_env(os.environ, int(os.environ["WORLD_SIZE"]))
    with flight_recorder_on_failure(plan):
        # accelerate's own process-group setup, before the Trainer's: on CPU, TrainingArguments
        # does not pass ddp_timeout on. Joining may take as long as the slowest rank's imports;
        # the collectives then get the plan's timeout (gloo's default is 30 minutes).
        PartialState(cpu=True, backend="gloo", timeout=plan.startup_timeout)
        collective_timeout_everywhere(plan)
        args = TrainingArguments(
            output_dir=str(plan.experiment_dir / "trainer"),
            max_steps=plan.steps,
            per_device_train_batch_size=BATCH,
            learning_rate=1e-3,
            logging_steps=1,
            save_strategy="no",
            report_to="none",
            dataloader_num_workers=0,
            dataloader_pin_memory=False,
            use_cpu=True,
            ddp_find_unused_parameters=False,
            accelerator_config={"use_configured_state": True},
        )
        trainer = Trainer(
            model=tiny_bert(),
            args=args,
            train_dataset=TinyTexts(),
            callbacks=[TrainerFaultInjection(), Pace(plan)],
        )
        trainer.train()
    if dist.is_initialized():
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
