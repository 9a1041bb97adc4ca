"""accelerate as a real workload: the Transformers adapter inside a real ``Trainer.train``, and
one experiment of the ``accelerate`` workload (``accelerate launch``, four ranks, Trainer on a
tiny BERT) on the local backend with the built-in analyzers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.injection import exception_at_step_two

pytest.importorskip("accelerate")
pytest.importorskip("transformers")

from support.sessions import only_session
from transformers import Trainer, TrainingArguments

from pytest_faultloop import TrainerFaultInjection
from pytest_faultloop.jobs.workload.frameworks.accelerate_train import (
    TinyTexts,
    tiny_bert,
)
from pytest_faultloop.jobs.workload.inject import InjectedException
from pytest_faultloop.models import ExperimentResult
from pytest_faultloop.scoring.pass_rule import DEFAULT_RULE


def test_the_trainer_callback_raises_the_planned_exception_out_of_train(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in exception_at_step_two(tmp_path).items():
        monkeypatch.setenv(name, value)
    args = TrainingArguments(
        output_dir=str(tmp_path / "trainer"),
        max_steps=20,
        per_device_train_batch_size=4,
        save_strategy="no",
        report_to="none",
        dataloader_num_workers=0,
        dataloader_pin_memory=False,
        use_cpu=True,
        disable_tqdm=True,
    )
    trainer = Trainer(
        model=tiny_bert(),
        args=args,
        train_dataset=TinyTexts(),
        callbacks=[TrainerFaultInjection()],
    )
    with pytest.raises(InjectedException):
        trainer.train()
    assert 2 <= trainer.state.global_step < args.max_steps
    marker = json.loads((tmp_path / "fault_injection.json").read_text())
    assert (marker["fault"], marker["rank"], marker["iteration"]) == ("WORKLOAD_EXC", 0, 2)
    assert marker["fired_at"] is not None


@pytest.mark.slow  # CI runs each framework once: tests/test_frameworks_e2e.py
def test_an_exception_on_rank_2_under_accelerate_launch_is_attributed(
    pytester: pytest.Pytester, experiments_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real job: four ranks each run Trainer.train under ``accelerate launch``; rank 2 raises
    at step 5 (and dumps its flight recorder on the way out), the launcher's elastic agent ends
    the others and reports the root cause; the built-in log analyzer names rank 2, its
    exception and no restart. (The flight-recorder dimension is left out: which victims dump
    before the agent's SIGTERM reaches them is a race.)"""
    monkeypatch.setenv("WORKLOAD", "accelerate")
    monkeypatch.setenv("POOL", "WORKLOAD_EXC:2:5:1")
    result = pytester.runpytest_subprocess("experiments/", "-p", "no:cacheprovider", timeout=240)
    result.stdout.fnmatch_lines(["*faultloop: 1 experiment(s): 1 scored*"])
    experiment = only_session(experiments_copy) / "n1_WORKLOAD_EXC_r2_i5"
    stored = ExperimentResult.model_validate_json((experiment / "result.json").read_text())
    assert stored.job is not None and stored.job.state == "FAILED"
    assert stored.verdict is not None, stored.reason
    for dimension in ("restart_correct", "rank_primary", "rank_any", "fault_described"):
        value = stored.verdict.value(dimension)
        assert DEFAULT_RULE.passes(dimension, value), (dimension, value, stored.verdict)
    (log,) = (experiment / "logs" / "slurm").glob("*.main_workload.log")
    text = log.read_text()
    assert "accelerate/commands/launch.py" in text and "ChildFailedError" in text, text[-3000:]
    assert "rank      : 2 (local_rank: 2)" in text, text[-3000:]
    assert (experiment / "checkpoints" / "_dump_2").is_file()
