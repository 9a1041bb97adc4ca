"""The ``lightning`` workload: the injector's Lightning callback in a real ``Trainer.fit``, and
one experiment of the workload end to end on the local backend (Lightning's own launcher
starting each node's ranks)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from support.injection import exception_at_step_two

pytest.importorskip("lightning")

import lightning.pytorch as pl
import torch
from support.sessions import only_session
from torch.utils.data import DataLoader

from pytest_faultloop.jobs.workload.adapters.lightning import LightningFaultInjection
from pytest_faultloop.jobs.workload.inject import InjectedException
from pytest_faultloop.models import FaultMarker
from pytest_faultloop.models.faults import FaultType

REPO = Path(__file__).resolve().parents[1]
STEP_S = 0.05
"""Long enough a step that the injector's thread fires before the loop ends."""


class Regression(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Linear(4, 1)

    def train_dataloader(self) -> DataLoader[Any]:
        data = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(50)]
        return DataLoader(data, batch_size=None)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> Any:
        time.sleep(STEP_S)
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)


def test_the_callback_raises_the_injected_exception_from_a_real_fit(tmp_path: Path) -> None:
    env = exception_at_step_two(tmp_path)
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=1,
        max_steps=50,
        callbacks=[LightningFaultInjection(env)],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
    )
    with pytest.raises(InjectedException, match="workload exception at iteration"):
        trainer.fit(Regression())
    marker = FaultMarker.model_validate_json((tmp_path / "fault_injection.json").read_text())
    assert (marker.fault, marker.rank, marker.fired) == (FaultType.WORKLOAD_EXC, 0, True)
    # armed after step 2 and fired at once: the loop stopped there, not at max_steps
    assert 2 <= marker.iteration <= trainer.global_step < 50


@pytest.mark.slow  # CI runs each framework once: tests/test_frameworks_e2e.py
def test_a_lightning_experiment_runs_end_to_end_on_the_local_backend(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One node of two ranks under Lightning's own launcher; rank 1 (the child Lightning
    started) raises; the built-in analyzers read what Lightning printed."""
    shutil.copytree(REPO / "experiments", pytester.path / "experiments")
    base = pytester.path / "out"
    monkeypatch.setenv("BASE_EXPERIMENTS_DIR", str(base))
    monkeypatch.setenv("WORKLOAD", "lightning")
    monkeypatch.setenv("POOL", "WORKLOAD_EXC:1:3:1")
    monkeypatch.setenv("GPUS_PER_NODE", "2")
    result = pytester.runpytest_subprocess("experiments/", "-p", "no:cacheprovider", timeout=240)
    result.stdout.fnmatch_lines(["faultloop: backend=local workload=lightning*"])
    stored = json.loads((only_session(base) / "n1_WORKLOAD_EXC_r1_i3" / "result.json").read_text())
    log = Path(stored["artifacts"]["log"]).read_text()
    # Lightning's own launcher started the ranks, and its loop carried the injected exception
    assert "Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/2" in log, log[-3000:]
    assert "InjectedException: workload exception at iteration" in log, log[-3000:]
    marker = FaultMarker.model_validate_json(
        (Path(stored["job"]["experiment_dir"]) / "fault_injection.json").read_text()
    )
    # armed after step 3, it fires FAULT_DELAY later: the marker names the step it fired after
    assert (marker.fault, marker.rank, marker.fired) == (FaultType.WORKLOAD_EXC, 1, True)
    assert marker.iteration >= 3
    verdict = stored["verdict"]
    assert (verdict["rank_primary"], verdict["fault_described"]) == ("true", "true"), verdict[
        "notes"
    ]
