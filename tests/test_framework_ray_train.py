"""The ``ray_train`` workload and the injector in a Ray Train script: real Ray clusters, real
TorchTrainer runs (skipped where the frameworks extra is not installed)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("ray.train")

from support.processes import live_processes_with_env
from support.sessions import only_session

REPO = Path(__file__).resolve().parents[1]

USER_SCRIPT = """\
import sys
import time

import ray
import torch
from ray.train import FailureConfig, RunConfig, ScalingConfig
from ray.train.torch import TorchConfig, TorchTrainer, prepare_model

from pytest_faultloop import FaultInjector, ray_job_contract


def train_loop_per_worker(config):
    injector = FaultInjector.from_env()
    model = prepare_model(torch.nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(1, 201):
        optimizer.zero_grad()
        model(torch.ones(2, 4)).sum().backward()
        optimizer.step()
        injector.step(step)
        time.sleep(0.05)  # the injector's thread fires the exception while the loop still runs


ray.init(
    num_cpus=1,
    include_dashboard=False,
    _temp_dir=sys.argv[1],
    runtime_env={"env_vars": ray_job_contract()},
)
TorchTrainer(
    train_loop_per_worker,
    scaling_config=ScalingConfig(num_workers=1, use_gpu=False),
    torch_config=TorchConfig(backend="gloo", timeout_s=10),
    run_config=RunConfig(storage_path=sys.argv[2], failure_config=FailureConfig(max_failures=0)),
).fit()
"""


@pytest.mark.slow  # CI runs each framework once: tests/test_frameworks_e2e.py
def test_the_injector_raises_from_a_ray_train_worker_loop(tmp_path: Path) -> None:
    """The documented two lines in a user's TorchTrainer script: the worker raises the injected
    exception at its iteration, Ray Train fails the run naming its rank, the marker is written."""
    script = tmp_path / "train.py"
    script.write_text(USER_SCRIPT)
    experiment = tmp_path / "experiment"
    experiment.mkdir()
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "FAULT_TYPE": "WORKLOAD_EXC",
        "FAULT_RANK": "0",
        "FAULT_AT_ITER": "2",
        "FAULT_DELAY": "0",
        "EXPERIMENT_DIR": str(experiment),
    }
    session_root = tempfile.mkdtemp(prefix="faultloop-ray-")  # unix sockets: a short path
    try:
        done = subprocess.run(
            [sys.executable, str(script), session_root, str(tmp_path / "results")],
            check=False,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )
    finally:
        shutil.rmtree(session_root, ignore_errors=True)
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    assert "InjectedException: workload exception at iteration" in out, out
    assert "ray.train.WorkerGroupError: Training failed due to worker errors" in out, out
    assert "[Rank 0 Error Snippet]:" in out, out
    marker = json.loads((experiment / "fault_injection.json").read_text())
    assert (marker["fault"], marker["rank"]) == ("WORKLOAD_EXC", 0), marker
    assert marker["iteration"] in (2, 3) and marker["fired_at"] is not None, marker


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copytree(REPO / "experiments", pytester.path / "experiments")
    base = pytester.path / "out"
    monkeypatch.setenv("BASE_EXPERIMENTS_DIR", str(base))
    return base


@pytest.mark.slow  # CI runs each framework once: tests/test_frameworks_e2e.py
def test_a_ray_train_job_fails_as_ray_train_reports_it_and_leaves_no_process(
    pytester: pytest.Pytester, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One experiment of the workload on the local backend: Ray Train's controller reports the
    culprit's error by rank, the analyzers name it from Ray's log, the Ray cluster is gone."""
    monkeypatch.setenv("POOL", "WORKLOAD_EXC:1:3:1")
    monkeypatch.setenv("GPUS_PER_NODE", "2")
    result = pytester.runpytest_subprocess(
        "experiments/", "--faultloop-workload=ray_train", "-p", "no:cacheprovider", timeout=300
    )
    result.stdout.fnmatch_lines(["*finished: job=* FAILED exit 1:0*"])
    experiment = only_session(project) / "n1_WORKLOAD_EXC_r1_i3"
    stored = json.loads((experiment / "result.json").read_text())
    log = Path(stored["artifacts"]["log"]).read_text()
    assert "(RayTrainWorker pid=" in log and "[Rank 1 Error Snippet]:" in log, log
    assert stored["artifacts"]["marker"]["fired_at"] is not None
    assert stored["verdict"]["rank_primary"] == "true", stored["verdict"]["notes"]
    assert live_processes_with_env("EXPERIMENT_DIR", str(experiment)) == []
