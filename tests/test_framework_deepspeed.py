"""The ``deepspeed`` workload for real: its training module as one DeepSpeed process with the
fault injector in its loop, and one experiment whose node runs DeepSpeed's own launcher on the
local backend. DeepSpeed compiles its shared-memory comm op with g++ at its first use on a
machine (about a minute; cached under ``~/.cache/torch_extensions``)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("deepspeed")

from support.sessions import only_session

from pytest_faultloop.models.faults import FaultType
from pytest_faultloop.models.job import FaultMarker
from pytest_faultloop.models.layout import ExperimentLayout
from pytest_faultloop.scoring.dimensions import DIMENSIONS

TRAIN_MODULE = "pytest_faultloop.jobs.workload.frameworks.deepspeed_train"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_injector_raises_from_a_deepspeed_engines_loop(tmp_path: Path) -> None:
    """One rank (RANK=0 WORLD_SIZE=1, as DeepSpeed's launcher would set them) trains a
    ``deepspeed.initialize`` engine; WORKLOAD_EXC armed at iteration 2 raises InjectedException
    out of the loop at the next step, the marker is written and the failure path dumps the
    flight recorder."""
    for part in ("logs/slurm", "checkpoints"):
        (tmp_path / part).mkdir(parents=True)
    env = {
        **os.environ,
        "RANK": "0",
        "LOCAL_RANK": "0",
        "WORLD_SIZE": "1",
        "LOCAL_SIZE": "1",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        "EXPERIMENT_DIR": str(tmp_path),
        "FAULT_TYPE": "WORKLOAD_EXC",
        "FAULT_RANK": "0",
        "FAULT_AT_ITER": "2",
        "FAULT_DELAY": "0",
        "TORCH_FR_BUFFER_SIZE": "2000",
    }
    run = subprocess.run(
        [sys.executable, "-m", TRAIN_MODULE, "--local_rank=0"],
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = run.stdout + run.stderr
    assert run.returncode != 0, output
    assert "pytest_faultloop.jobs.workload.inject.InjectedException" in output, output
    assert "injector.step(step)" in output, output  # raised out of the training loop
    marker = FaultMarker.model_validate_json((tmp_path / "fault_injection.json").read_text())
    assert (marker.fault, marker.rank, marker.iteration) == (FaultType.WORKLOAD_EXC, 0, 2)
    assert ExperimentLayout(tmp_path).fr_dump(0).is_file()


@pytest.mark.slow  # CI runs each framework once: tests/test_frameworks_e2e.py
def test_an_experiment_runs_under_deepspeeds_launcher_and_is_scored(
    pytester: pytest.Pytester, experiments_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """WORKLOAD=deepspeed: the node execs ``deepspeed`` (DeepSpeed's runner and per-node
    launcher print their lines), the injected exception on rank 1 of 2 kills the job, and the
    built-in log analyzer passes every log dimension on it. (FR is not asserted: DeepSpeed's
    launcher SIGTERMs a failed rank's node-mates, which may die before they dump.)"""
    monkeypatch.setenv("WORKLOAD", "deepspeed")
    monkeypatch.setenv("POOL", "WORKLOAD_EXC:1:3:1")
    monkeypatch.setenv("GPUS_PER_NODE", "2")
    result = pytester.runpytest_subprocess("experiments/", "-p", "no:cacheprovider", timeout=600)
    result.stdout.fnmatch_lines(["faultloop: backend=local workload=deepspeed*"])
    stored = json.loads(
        (only_session(experiments_copy) / "n1_WORKLOAD_EXC_r1_i3" / "result.json").read_text()
    )
    text = Path(stored["artifacts"]["log"]).read_text()
    assert "[launch.py:" in text and "exits with return code = 1" in text, text[-3000:]
    assert "InjectedException" in text
    verdict = stored["verdict"]
    log_dimensions = [d.name for d in DIMENSIONS if d.analysis == "log"]
    assert [verdict[d] for d in log_dimensions] == ["true"] * 4, verdict["notes"]
