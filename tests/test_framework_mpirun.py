"""The ``mpirun`` workload through the real thing: Open MPI's mpirun starting the training module
with an injected exception on one rank, the node launcher refusing a second node, and one
experiment on the local backend. Skipped where Open MPI or torch is not installed
(``scripts/install_openmpi.sh``, ``pip install -e '.[torch]'``)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

if shutil.which("mpirun") is None:
    pytest.skip(
        "Open MPI's mpirun is not on PATH: scripts/install_openmpi.sh", allow_module_level=True
    )
pytest.importorskip("torch")

from support.sessions import only_session

from pytest_faultloop.analyzers import filter_harness_lines
from pytest_faultloop.jobs.workload.environment import NodeSpec
from pytest_faultloop.jobs.workload.frameworks.registry import FRAMEWORKS

MPIRUN = FRAMEWORKS["mpirun"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def node_env(experiment_dir: Path, **extra: str) -> dict[str, str]:
    """One emulated node's environment, as the local backend gives it."""
    (experiment_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
    return {
        **os.environ,
        "SLURM_JOB_ID": "7",
        "SLURM_NNODES": "1",
        "SLURM_NODEID": "0",
        "GPUS_PER_NODE": "2",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        "EXPERIMENT_DIR": str(experiment_dir),
        **extra,
    }


@pytest.mark.slow  # CI runs each framework once: tests/test_frameworks_e2e.py
def test_mpirun_starts_the_ranks_and_reports_the_one_that_raised(tmp_path: Path) -> None:
    """The node's own command (mpirun, 2 ranks): rank 1 raises the injected exception once its
    second step is done, dumps its flight recorder on the way out, writes the fault's marker, and
    mpirun names it as the first process to fail."""
    env = node_env(
        tmp_path, FAULT_TYPE="WORKLOAD_EXC", FAULT_RANK="1", FAULT_AT_ITER="2", FAULT_DELAY="0"
    )
    command = MPIRUN.command(NodeSpec.from_env(env), env, MPIRUN.train_module)
    assert command[0] == "mpirun" and command[-2:] == ["-m", MPIRUN.train_module]
    done = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=180, check=False
    )
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    raised = [line for line in out.splitlines() if "InjectedException: workload exception" in line]
    assert raised and all(line.startswith("[1,1]<stderr>:") for line in raised), out
    assert "mpirun detected that one or more processes exited with non-zero status" in out, out
    marker = json.loads((tmp_path / "fault_injection.json").read_text())
    assert marker["rank"] == 1, marker
    assert (tmp_path / "checkpoints" / "_dump_1").is_file()


def test_the_node_launcher_refuses_a_second_node_in_one_line(tmp_path: Path) -> None:
    env = node_env(tmp_path, SLURM_NNODES="2", FAULTLOOP_FRAMEWORK="mpirun")
    done = subprocess.run(
        [sys.executable, "-m", "pytest_faultloop.jobs.workload.launcher"],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"tiny_gloo launcher: configuration error: mpirun runs on one node only: {MPIRUN.one_node}"
    ]


@pytest.mark.slow  # CI runs each framework once: tests/test_frameworks_e2e.py
def test_an_mpirun_experiment_runs_on_the_local_backend(
    pytester: pytest.Pytester, experiments_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rank SIGKILLed under mpirun, scored: the log is mpirun's (tagged lines, its report of
    the killed rank) and the analyzers never see the injection's own lines in it."""
    monkeypatch.setenv("WORKLOAD", "mpirun")
    monkeypatch.setenv("POOL", "SIGKILL:1:5:1")
    monkeypatch.setenv("GPUS_PER_NODE", "2")
    result = pytester.runpytest_subprocess("experiments/", "-p", "no:cacheprovider", timeout=300)
    out = result.stdout.str()
    assert "faultloop: 1 experiment(s): 1 scored" in out, out
    stored = json.loads(
        (only_session(experiments_copy) / "n1_SIGKILL_r1_i5/result.json").read_text()
    )
    assert stored["job"]["state"] == "FAILED"
    assert stored["artifacts"]["marker"]["fired_at"] is not None
    raw = Path(stored["artifacts"]["log"]).read_text().splitlines()
    assert any(line.startswith("[1,0]<stdout>:") for line in raw)
    assert any("mpirun noticed that process rank 1 " in line for line in raw), raw[-20:]
    assert not any("FAULT INJECTION" in line for line in filter_harness_lines(raw))


def test_the_training_module_started_without_mpirun_says_how_to_start_it(tmp_path: Path) -> None:
    env = {k: v for k, v in node_env(tmp_path).items() if not k.startswith("OMPI_")}
    done = subprocess.run(
        [sys.executable, "-m", MPIRUN.train_module],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "mpirun_train: OMPI_COMM_WORLD_RANK is not set: start this module with Open MPI's "
        f"launcher, e.g. mpirun -np 4 python -m {MPIRUN.train_module}"
    ]
