"""tiny_gloo for real, through the local backend: 2 emulated nodes x 2 ranks, every fault.

The non-slow subset (clean run, one hang, one crash, one exception, one signal, torchfrtrace)
is CI; the full matrix (12 faults on rank 0 and on the last rank) is ``-m slow``.
"""

from __future__ import annotations

import datetime
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.processes import live_processes_with_env

from pytest_faultloop.jobs.backends.local import LocalBackend
from pytest_faultloop.jobs.backends.protocol import standalone_spec
from pytest_faultloop.jobs.workload.environment import TrainSettings, startup_timeout_default
from pytest_faultloop.jobs.workload.job_knobs import STARTUP_TIMEOUT
from pytest_faultloop.models import Artifacts, Job, JobState, PoolEntry
from pytest_faultloop.models.errors import ConfigError
from pytest_faultloop.models.faults import INJECTABLE, FaultType
from pytest_faultloop.store.artifacts import collect_artifacts

REPO = Path(__file__).resolve().parent.parent
TINY_GLOO = REPO / "sbatch" / "tiny_gloo.sh"
NODES, GPUS = 2, 2
LAST = NODES * GPUS - 1
TIMEOUT_S = 10

STUCK = {FaultType.GPU_SLEEP, FaultType.LOCK_GIL, FaultType.SIGSTOP}
"""Faults after which the target never exits by itself: its launcher terminates it."""
TARGET_EXIT = {
    FaultType.GPU_SLEEP: -15,
    FaultType.LOCK_GIL: -15,
    FaultType.SIGSTOP: -15,
    FaultType.GPU_ERROR: 1,
    FaultType.WORKLOAD_EXC: 1,
    FaultType.ASYNC_EXC: 1,
    FaultType.SIGNAL_EXC: 1,
    FaultType.SIGINT: -2,
    FaultType.SIGKILL: -9,
    FaultType.SIGTERM: -15,
    FaultType.SEGFAULT: -11,
    FaultType.OS_ABORT: -6,
}
NO_DUMP = {
    FaultType.LOCK_GIL,
    FaultType.SIGSTOP,
    FaultType.SIGKILL,
    FaultType.SIGTERM,
    FaultType.SEGFAULT,
    FaultType.OS_ABORT,
}
"""The target cannot run Python any more, so it leaves no flight-recorder dump."""

RANK_EXIT = re.compile(
    r"failed \(exitcode: (-?\d+)\) rank: (\d+)|rank (\d+) \(local_rank \d+, pid \d+\) finished \(exitcode: (0)\)"
)
RANK_FAILED = re.compile(
    r"^\[rank(\d+)\]: \[([\d\- :.]+)\] \[ERROR\] \[tiny_gloo\.train\] Rank \d+ failed at iteration \d+ (.*)$",
    re.MULTILINE,
)


@dataclass
class Run:
    job: Job
    artifacts: Artifacts
    wall_s: float

    @property
    def log(self) -> str:
        assert self.artifacts.log is not None, "no main_workload log"
        return self.artifacts.log.read_text()

    def exit_codes(self) -> dict[int, int]:
        codes: dict[int, int] = {}
        for m in RANK_EXIT.finditer(self.log):
            if m.group(2) is not None:
                codes[int(m.group(2))] = int(m.group(1))
            else:
                codes[int(m.group(3))] = 0
        return codes


def run_tiny_gloo(tmp_path: Path, fault: FaultType, rank: int = 0, **env: str) -> Run:
    """One experiment, start to end, through LocalBackend."""
    entry = PoolEntry(fault=fault, rank=rank, iter=3, nodes=NODES)
    spec = standalone_spec(
        entry,
        tmp_path,
        TINY_GLOO,
        gpus_per_node=GPUS,
        time_limit_s=120,
        workload="tiny_gloo",
        env={
            "FAULT_DELAY": "0.5",
            "BASE_EXPERIMENTS_DIR": str(tmp_path),
            "FAULTLOOP_COLLECTIVE_TIMEOUT": str(TIMEOUT_S),
            "FAULTLOOP_KILL_GRACE_S": "3",
            "FAULTLOOP_WORKLOAD_HINTS": "1",  # the failure lines these tests check
            **env,
        },
    )
    experiment_dir = spec.experiment_dir
    backend = LocalBackend()
    started = time.monotonic()
    job = backend.submit(spec)
    while job.state.active:
        time.sleep(0.2)
        job = backend.poll(job)
    return Run(job, collect_artifacts(experiment_dir, job.job_id), time.monotonic() - started)


def live_processes_of(job_id: str) -> list[int]:
    """Processes (not zombies) whose environment carries this job's SLURM_JOB_ID."""
    return live_processes_with_env("SLURM_JOB_ID", job_id)


def _stamp(text: str) -> float:
    return datetime.datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%f").timestamp()


def check_fault_run(run: Run, fault: FaultType, rank: int) -> None:
    """Everything issue 3 promises about an experiment with ``fault`` on ``rank``."""
    log = run.log
    assert (run.job.state, run.job.exit_code) == (JobState.FAILED, "1:0"), log[-3000:]
    marker = run.artifacts.marker
    assert marker is not None and marker.fired, "fault_injection.json without fired_at"
    assert (marker.fault, marker.rank, marker.node) == (fault, rank, rank // GPUS)
    assert f"FAULT INJECTION: Rank {rank} will inject fault {fault.value} at " in log
    assert f"FAULT INJECTION: Rank {rank} injecting fault {fault.value} now" in log

    codes = run.exit_codes()
    assert sorted(codes) == list(range(NODES * GPUS)), codes
    assert codes[rank] == TARGET_EXIT[fault], log[-3000:]
    peers = [r for r in codes if r != rank]
    assert all(codes[r] == 1 for r in peers), codes

    failures = {int(r): (_stamp(t), where) for r, t, where in RANK_FAILED.findall(log)}
    for peer in peers:
        assert peer in failures, f"rank {peer} logged no failure line"
        failed_at, where = failures[peer]
        assert where.startswith("in collective "), where
        assert failed_at - marker.fired_at <= TIMEOUT_S + 5, f"rank {peer} failed late"
    if fault in STUCK:
        assert "Timed out waiting" in log
        assert "closing signal SIGTERM" in log
        err = "".join(
            p.read_text() for p in run.job.experiment_dir.glob("logs/slurm/*.launcher.err")
        )
        assert f"launcher: ending rank {rank} (pid " in err and "no progress for" in err

    dumps = sorted(p.name for p in run.artifacts.fr_dir.iterdir())
    expected = [f"_dump_{r}" for r in range(NODES * GPUS) if r != rank or fault not in NO_DUMP]
    assert dumps == expected
    assert all(f"[rank{r}]: " in log for r in range(NODES * GPUS))
    assert "Root Cause (first observed failure)" in log
    assert live_processes_of(run.job.job_id) == []


# --- CI subset -------------------------------------------------------------------------------


def test_clean_run_exits_zero_without_errors(tmp_path: Path) -> None:
    run = run_tiny_gloo(tmp_path, FaultType.NONE)
    log = run.log
    assert (run.job.state, run.job.exit_code) == (JobState.COMPLETED, "0:0"), log[-3000:]
    assert run.exit_codes() == dict.fromkeys(range(NODES * GPUS), 0)
    assert not re.search(r"ERROR|Traceback|FAULT INJECTION|Error", log)
    assert all(f"Rank {r} finished" in log for r in range(NODES * GPUS))
    assert run.artifacts.marker is None
    assert list(run.artifacts.fr_dir.iterdir()) == []
    scalars = (
        (run.artifacts.experiment_dir / "tensorboard" / "scalars.csv").read_text().splitlines()
    )
    assert scalars[0] == "iteration,lm_loss,step_ms" and len(scalars) > 4
    assert live_processes_of(run.job.job_id) == []


@pytest.fixture(scope="module")
def gpu_sleep_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return run_tiny_gloo(tmp_path_factory.mktemp("gpu_sleep"), FaultType.GPU_SLEEP, rank=LAST)


def test_gpu_sleep_hangs_the_target_until_its_launcher_ends_it(gpu_sleep_run: Run) -> None:
    check_fault_run(gpu_sleep_run, FaultType.GPU_SLEEP, LAST)
    assert "(emulated on CPU)" in gpu_sleep_run.log
    # the hang is ended by the launcher, not the job's 120 s limit (a generous ceiling: the
    # run takes about 25 s on an idle machine)
    assert gpu_sleep_run.job.state is not JobState.TIMEOUT
    assert gpu_sleep_run.wall_s < 110, f"{gpu_sleep_run.wall_s:.1f} s"


def test_torchfrtrace_names_the_hung_rank_missing(gpu_sleep_run: Run) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.flight_recorder.fr_trace",
            "-p",
            "_dump_",
            str(gpu_sleep_run.artifacts.fr_dir),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    report = result.stdout + result.stderr
    assert result.returncode == 0, report
    missing = [
        set(map(int, m.split(","))) for m in re.findall(r"missing ranks: \{([\d, ]+)\}", report)
    ]
    assert missing, report
    assert all(LAST in ranks for ranks in missing), report
    assert {LAST} in missing, report  # the hung rank's own tensor-parallel group


@pytest.mark.parametrize(
    ("fault", "rank"),
    [(FaultType.SIGKILL, 0), (FaultType.WORKLOAD_EXC, LAST), (FaultType.SIGTERM, 0)],
)
def test_representative_faults(tmp_path: Path, fault: FaultType, rank: int) -> None:
    check_fault_run(run_tiny_gloo(tmp_path, fault, rank), fault, rank)


def test_bad_fault_type_fails_the_job_with_a_clear_message(tmp_path: Path) -> None:
    run = run_tiny_gloo(tmp_path, FaultType.NONE, FAULT_TYPE="GPU_MELT")
    assert (run.job.state, run.job.exit_code) == (JobState.FAILED, "2:0")
    assert run.artifacts.launcher_notes is not None
    err = run.artifacts.launcher_notes.read_text()
    assert "FAULT_TYPE='GPU_MELT' is not a fault type; valid: GPU_ERROR" in err


# --- full matrix -----------------------------------------------------------------------------


ONE_RANK = [f for f in INJECTABLE if f is not FaultType.NODE_KILL]
"""NODE_KILL ends a whole node (tests/test_e2e_multi.py), not one rank."""


@pytest.mark.slow
@pytest.mark.parametrize("rank", [0, LAST], ids=["rank0", "last"])
@pytest.mark.parametrize("fault", ONE_RANK, ids=[f.value for f in ONE_RANK])
def test_fault_matrix(tmp_path: Path, fault: FaultType, rank: int) -> None:
    check_fault_run(run_tiny_gloo(tmp_path, fault, rank), fault, rank)


def test_the_start_up_timeout_grows_with_the_world_and_the_load() -> None:
    assert startup_timeout_default(4, 0.5) == 38.0  # an idle machine: 30 + 2 x 4
    assert startup_timeout_default(64, 0.2) == 158.0
    assert startup_timeout_default(4, 2.5) == 95.0  # twice as many runnable tasks as CPUs
    assert STARTUP_TIMEOUT.read({"FAULTLOOP_STARTUP_TIMEOUT": "12"}, computed=99.0) == 12.0


def test_a_job_knob_below_its_floor_names_the_variable() -> None:
    with pytest.raises(ConfigError, match=r"FAULTLOOP_COLLECTIVE_TIMEOUT=0.5 must be at least 1"):
        TrainSettings.from_env({"FAULTLOOP_COLLECTIVE_TIMEOUT": "0.5"})
