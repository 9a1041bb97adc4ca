"""The torchrun launcher: each emulated node under PyTorch's own elastic agent, through the local
backend; and the quiet default of the fork launcher (no explanatory lines a real job lacks)."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pytest
from support.processes import live_processes_with_env

from pytest_faultloop.jobs.backends.local import LocalBackend
from pytest_faultloop.jobs.backends.protocol import standalone_spec
from pytest_faultloop.jobs.workload.environment import NodeSpec, hints_from, launcher_from
from pytest_faultloop.jobs.workload.registry import TINY_GLOO_SCRIPT
from pytest_faultloop.jobs.workload.torchrun_agent import agent_command
from pytest_faultloop.models import Artifacts, Job, JobState, PoolEntry
from pytest_faultloop.models.errors import ConfigError
from pytest_faultloop.models.faults import FaultType
from pytest_faultloop.store.artifacts import collect_artifacts

HINT_LINES = re.compile(r"failed at iteration|flight recorder dumped|launcher: ending rank")


def run_job(tmp_path: Path, fault: FaultType, rank: int, **env: str) -> tuple[Job, Artifacts]:
    """One 2-node x 2-rank experiment, start to end, through LocalBackend."""
    entry = PoolEntry(fault=fault, rank=rank, iter=3, nodes=2)
    spec = standalone_spec(
        entry,
        tmp_path,
        TINY_GLOO_SCRIPT,
        gpus_per_node=2,
        time_limit_s=300,
        workload="tiny_gloo",
        env={"FAULT_DELAY": "0.5", "FAULTLOOP_COLLECTIVE_TIMEOUT": "10", **env},
    )
    backend = LocalBackend()
    job = backend.submit(spec)
    while job.state.active:
        time.sleep(0.2)
        job = backend.poll(job)
    assert live_processes_with_env("SLURM_JOB_ID", job.job_id) == []
    return job, collect_artifacts(spec.experiment_dir, job.job_id)


def test_a_killed_rank_under_torchrun_gets_pytorchs_own_failure_report(tmp_path: Path) -> None:
    job, artifacts = run_job(tmp_path, FaultType.SIGKILL, 1, FAULTLOOP_LAUNCHER="torchrun")
    assert artifacts.log is not None
    log = artifacts.log.read_text()
    assert (job.state, job.exit_code) == (JobState.FAILED, "1:0"), log[-3000:]
    # the elastic agent's own logger, exception and report, as torchrun prints them
    assert re.search(
        r"^W\d{4} [\d:.]+ \d+ torch/distributed/elastic/multiprocessing/api\.py:\d+\] "
        r"Sending process \d+ closing signal SIGTERM$",
        log,
        re.MULTILINE,
    ), log[-3000:]
    assert re.search(
        r"torch/distributed/elastic/multiprocessing/api\.py:\d+\] failed \(exitcode: -9\) "
        r"local_rank: 1 \(pid: \d+\) of binary: ",
        log,
    )
    assert "torch.distributed.elastic.multiprocessing.errors.ChildFailedError" in log
    assert 'File "' in log and "torch/distributed/run.py" in log
    # the killed rank is in the failure table: its Root Cause, or under "Failures:" where a
    # loaded machine let a peer's failure reach the agent's poll in the same second
    table = log.split("Failures:")[1]
    assert "Root Cause (first observed failure):" in table
    assert re.search(r"rank\s+: 1 \(local_rank: 1\)\n\s+exitcode\s+: -9 \(pid: \d+\)", table)
    assert "Signal 9 (SIGKILL) received by PID" in table
    # the ranks' lines carry torchrun's --tee prefix; nothing of the project's fork launcher
    assert re.search(r"^\[default\d\]:\[rank\d\]: ", log, re.MULTILINE)
    assert "[tiny_gloo.launcher]" not in log and "started ranks" not in log
    assert not HINT_LINES.search(log)
    # torchrun's --log-dir holds each worker's own files; the launcher's notes stay apart
    assert list((artifacts.experiment_dir / "logs" / "torchrun").glob("*/attempt_0/*/stdout.log"))
    assert artifacts.launcher_notes is not None
    assert "starting torchrun" in artifacts.launcher_notes.read_text()


def test_the_fork_launcher_prints_no_hints_by_default(tmp_path: Path) -> None:
    job, artifacts = run_job(tmp_path, FaultType.GPU_SLEEP, 1)
    assert artifacts.log is not None
    log = artifacts.log.read_text()
    assert job.state is JobState.FAILED, log[-3000:]
    assert "Timed out waiting" in log  # what gloo itself says stays
    assert not HINT_LINES.search(log), HINT_LINES.search(log)
    assert sorted(p.name for p in artifacts.fr_dir.iterdir()) == [f"_dump_{r}" for r in range(4)]
    assert artifacts.launcher_notes is not None
    assert "launcher: ending rank 1 (pid " in artifacts.launcher_notes.read_text()


def test_agent_command_is_a_static_rendezvous_torchrun(tmp_path: Path) -> None:
    env = {
        "SLURM_JOB_ID": "77",
        "SLURM_NNODES": "4",
        "SLURM_NODEID": "2",
        "GPUS_PER_NODE": "8",
        "MASTER_ADDR": "10.0.0.1",
        "MASTER_PORT": "29500",
        "EXPERIMENT_DIR": str(tmp_path),
        "FAULTLOOP_TORCHRUN_ARGS": "--local-ranks-filter=0",
    }
    command = agent_command(NodeSpec.from_env(env), env)
    assert command[:3] == [sys.executable, "-m", "torch.distributed.run"]
    for arg in (
        "--nnodes=4",
        "--node-rank=2",
        "--nproc-per-node=8",
        "--rdzv-backend=static",
        "--rdzv-id=77",
        "--master-addr=10.0.0.1",
        "--master-port=29500",
        "--max-restarts=0",
        "--tee=3",
        f"--log-dir={tmp_path / 'logs' / 'torchrun'}",
        "--local-ranks-filter=0",
    ):
        assert arg in command
    assert command[-2:] == ["-m", "pytest_faultloop.jobs.workload.tiny_gloo"]
    with pytest.raises(ConfigError, match="FAULTLOOP_TORCHRUN_ARGS="):
        agent_command(NodeSpec.from_env(env), {**env, "FAULTLOOP_TORCHRUN_ARGS": "'unclosed"})


@pytest.mark.parametrize(
    ("value", "expected"), [("", False), ("0", False), ("1", True), ("yes", True)]
)
def test_hints_switch(value: str, expected: bool) -> None:
    assert hints_from({"FAULTLOOP_WORKLOAD_HINTS": value}) is expected


def test_bad_switches_name_the_variable() -> None:
    with pytest.raises(ConfigError, match="FAULTLOOP_WORKLOAD_HINTS='maybe' is not a switch"):
        hints_from({"FAULTLOOP_WORKLOAD_HINTS": "maybe"})
    with pytest.raises(ConfigError, match="FAULTLOOP_LAUNCHER='mpirun' is not a launcher"):
        launcher_from({"FAULTLOOP_LAUNCHER": "mpirun"})
    assert launcher_from({}) == "fork"
