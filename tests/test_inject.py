"""The injector on its own: configuration, markers, and each fault done to a small real process."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from support.polling import raises_soon

from pytest_faultloop.jobs.workload.fault_injector import FaultInjector
from pytest_faultloop.jobs.workload.inject import (
    CUDA_ERROR_TEXT,
    FaultPlan,
    InjectedException,
    Injector,
)
from pytest_faultloop.models.errors import ConfigError
from pytest_faultloop.models.faults import FaultType


def test_unset_or_none_fault_type_is_a_clean_run() -> None:
    assert FaultPlan.from_env({}, world_size=4) is None
    assert FaultPlan.from_env({"FAULT_TYPE": "NONE", "FAULT_RANK": "9"}, world_size=4) is None


def test_plan_reads_the_seed_variables() -> None:
    env = {"FAULT_TYPE": "SIGKILL", "FAULT_RANK": "3", "FAULT_AT_ITER": "7", "FAULT_DELAY": "1.5"}
    assert FaultPlan.from_env(env, world_size=4) == FaultPlan(FaultType.SIGKILL, 3, 7, 1.5)


def test_unknown_fault_type_names_the_value_and_the_valid_ones() -> None:
    with pytest.raises(ConfigError) as error:
        FaultPlan.from_env({"FAULT_TYPE": "GPU_MELT"}, world_size=4)
    message = str(error.value)
    assert "FAULT_TYPE='GPU_MELT'" in message
    assert all(name in message for name in ("GPU_SLEEP", "SIGSTOP", "LOCK_GIL"))


@pytest.mark.parametrize(
    ("env", "words"),
    [
        ({"FAULT_RANK": "4"}, "FAULT_RANK=4 is outside the job's ranks 0..3"),
        ({"FAULT_RANK": "one"}, "FAULT_RANK='one' is not an integer"),
        ({"FAULT_AT_ITER": "-1"}, "FAULT_AT_ITER=-1 must be at least 0"),
        ({"FAULT_DELAY": "soon"}, "FAULT_DELAY='soon' is not a number of seconds"),
    ],
)
def test_bad_values_are_named(env: dict[str, str], words: str) -> None:
    with pytest.raises(ConfigError, match=words.replace("(", r"\(").replace(".", r"\.")):
        FaultPlan.from_env({"FAULT_TYPE": "SIGTERM", **env}, world_size=4)


def test_only_the_target_rank_gets_an_injector(tmp_path: Path) -> None:
    env = {"FAULT_TYPE": "SIGTERM", "FAULT_RANK": "1", "EXPERIMENT_DIR": str(tmp_path)}
    assert not FaultInjector.from_env({**env, "RANK": "0", "WORLD_SIZE": "2"}).targeted
    assert FaultInjector.from_env({**env, "RANK": "1", "WORLD_SIZE": "2"}).targeted


def _armed(tmp_path: Path, fault: FaultType) -> Injector:
    injector = Injector(
        FaultPlan(fault, rank=0, at_iter=2, delay_s=0.0), node=0, experiment_dir=tmp_path
    )
    injector.on_iteration_end(1)
    assert not (tmp_path / "fault_injection.json").exists(), "armed before FAULT_AT_ITER"
    injector.on_iteration_end(2)
    return injector


def _wait_fired(tmp_path: Path) -> dict[str, object]:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        marker = json.loads((tmp_path / "fault_injection.json").read_text())
        if marker["fired_at"] is not None:
            return marker
        time.sleep(0.01)
    raise AssertionError("the fault never fired")


def test_workload_exception_raises_in_the_loop_after_the_markers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="pytest_faultloop.inject")
    injector = _armed(tmp_path, FaultType.WORKLOAD_EXC)
    raises_soon(lambda: injector.on_iteration_end(3), InjectedException)
    marker = _wait_fired(tmp_path)
    assert (marker["fault"], marker["rank"]) == ("WORKLOAD_EXC", 0)
    assert marker["iteration"] in (2, 3)  # the last iteration completed when it fired
    assert marker["armed_at"] <= marker["fired_at"]
    lines = [r.getMessage() for r in caplog.records if r.name == "pytest_faultloop.inject"]
    assert lines[0].startswith("FAULT INJECTION: Rank 0 will inject fault WORKLOAD_EXC at ")
    assert lines[1].startswith("FAULT INJECTION: Rank 0 injecting fault WORKLOAD_EXC now")


def test_emulated_gpu_error_surfaces_at_the_next_sync_with_cuda_text(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="pytest_faultloop.inject")
    injector = _armed(tmp_path, FaultType.GPU_ERROR)
    error = raises_soon(injector.device_sync, RuntimeError)
    assert str(error).startswith("CUDA error: an illegal memory access was encountered")
    injector.device_step()  # launching work still works: the error is asynchronous
    assert "CUDA kernel errors might be asynchronously reported" in CUDA_ERROR_TEXT
    assert "emulated on CPU" in caplog.records[-1].getMessage()


# --- faults done to a real process -----------------------------------------------------------

LOOP = textwrap.dedent(
    """
    import logging, os, sys, time
    from pytest_faultloop import FaultInjector
    logging.basicConfig(level=logging.INFO, stream=sys.stdout)
    env = {"FAULT_TYPE": sys.argv[1], "FAULT_RANK": "0", "FAULT_AT_ITER": "1", "FAULT_DELAY": "0",
           "EXPERIMENT_DIR": sys.argv[2], "RANK": "0", "WORLD_SIZE": "1"}
    injector = FaultInjector.from_env(env)
    for iteration in range(1, 100):
        injector.step(iteration)
        time.sleep(0.02)
    print("loop finished")
    """
)


def _run_loop(
    tmp_path: Path, fault: FaultType, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", LOOP, fault.value, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.mark.parametrize(
    ("fault", "signum"),
    [
        (FaultType.SIGKILL, signal.SIGKILL),
        (FaultType.SIGTERM, signal.SIGTERM),
        (FaultType.SIGINT, None),
        (FaultType.SEGFAULT, signal.SIGSEGV),
        (FaultType.OS_ABORT, signal.SIGABRT),
    ],
)
def test_fatal_faults_end_the_process_as_they_say(
    tmp_path: Path, fault: FaultType, signum: signal.Signals | None
) -> None:
    result = _run_loop(tmp_path, fault)
    if signum is None:  # SIGINT: Python turns it into KeyboardInterrupt
        assert "KeyboardInterrupt" in result.stderr
    else:
        assert result.returncode == -signum, result.stderr
    assert "loop finished" not in result.stdout
    assert json.loads((tmp_path / "fault_injection.json").read_text())["fired_at"] is not None


def test_sigint_acts_even_in_a_process_started_with_sigint_ignored(tmp_path: Path) -> None:
    """Background jobs (``nohup``, ``cmd &``) start with SIGINT ignored; the fault still acts."""
    result = subprocess.run(
        [sys.executable, "-c", LOOP, FaultType.SIGINT.value, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    assert "KeyboardInterrupt" in result.stderr
    assert "loop finished" not in result.stdout


@pytest.mark.parametrize(
    "fault", [FaultType.ASYNC_EXC, FaultType.SIGNAL_EXC, FaultType.WORKLOAD_EXC]
)
def test_exception_faults_raise_injected_exception(tmp_path: Path, fault: FaultType) -> None:
    result = _run_loop(tmp_path, fault)
    assert result.returncode == 1
    assert "InjectedException" in result.stderr.splitlines()[-1]


@pytest.mark.parametrize("fault", [FaultType.GPU_SLEEP, FaultType.LOCK_GIL, FaultType.SIGSTOP])
def test_hang_faults_leave_the_process_stuck(tmp_path: Path, fault: FaultType) -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", LOOP, fault.value, str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    marker = tmp_path / "fault_injection.json"
    try:
        deadline = time.monotonic() + 120  # the event first: the fault has acted
        while process.poll() is None and time.monotonic() < deadline:
            if marker.exists() and json.loads(marker.read_text())["fired_at"] is not None:
                break
            time.sleep(0.05)
        with pytest.raises(subprocess.TimeoutExpired):
            process.wait(timeout=5)  # the rest of the loop takes under 2 s when not stuck
    finally:
        process.kill()
        process.wait()
        process.stdout.close()  # type: ignore[union-attr]
        process.stderr.close()  # type: ignore[union-attr]
    assert json.loads((tmp_path / "fault_injection.json").read_text())["fired_at"] is not None


def test_early_exit_leaves_the_loop_with_status_zero(tmp_path: Path) -> None:
    """As a rank that returned from its training loop: status 0, no traceback, no more steps."""
    result = _run_loop(tmp_path, FaultType.EARLY_EXIT)
    assert result.returncode == 0, result.stderr
    assert "loop finished" not in result.stdout and "Traceback" not in result.stderr
    assert json.loads((tmp_path / "fault_injection.json").read_text())["fired_at"] is not None


def test_collective_mismatch_needs_a_process_group(tmp_path: Path) -> None:
    result = _run_loop(tmp_path, FaultType.COLLECTIVE_MISMATCH)
    assert result.returncode == 1
    assert "COLLECTIVE_MISMATCH needs torch.distributed's default group" in result.stderr


MISMATCH_JOB = textwrap.dedent(
    """
    import datetime, os, sys
    import torch, torch.distributed as dist, torch.multiprocessing as mp
    from pytest_faultloop import FaultInjector

    def rank_main(rank, port, experiment_dir):
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        dist.init_process_group("gloo", rank=rank, world_size=2,
                                timeout=datetime.timedelta(seconds=300))
        # the peer left waiting gives up soon; the mismatch itself is what fails the job
        dist.distributed_c10d._get_default_group().set_timeout(datetime.timedelta(seconds=5))
        injector = FaultInjector.from_env({
            "FAULT_TYPE": "COLLECTIVE_MISMATCH", "FAULT_RANK": "1", "FAULT_AT_ITER": "2",
            "FAULT_DELAY": "0", "EXPERIMENT_DIR": experiment_dir})
        for iteration in range(1, 200):
            dist.all_reduce(torch.ones(64))
            injector.step(iteration)
        print(f"rank {rank} finished", flush=True)

    if __name__ == "__main__":
        mp.spawn(rank_main, args=(sys.argv[1], sys.argv[2]), nprocs=2)
    """
)


def test_collective_mismatch_meets_its_peers_next_collective(tmp_path: Path) -> None:
    """Two real gloo ranks: rank 1's one-element all_reduce meets rank 0's 64-element one at
    the same sequence number, and gloo itself says so."""
    script = tmp_path / "job.py"
    script.write_text(MISMATCH_JOB)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    result = subprocess.run(
        [sys.executable, str(script), port, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode != 0 and "finished" not in result.stdout
    assert "collective mismatch" in result.stderr, result.stderr[-2000:]
    assert json.loads((tmp_path / "fault_injection.json").read_text())["rank"] == 1


def test_host_oom_raises_what_the_allocator_raises(tmp_path: Path) -> None:
    """Without torch loaded, Python's MemoryError; the limit is given back on the way out (the
    process still prints its traceback and exits as a failed one)."""
    result = _run_loop(tmp_path, FaultType.HOST_OOM)
    assert result.returncode == 1 and "loop finished" not in result.stdout
    assert result.stderr.splitlines()[-1] == "MemoryError", result.stderr[-1000:]
