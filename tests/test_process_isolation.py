"""Jobs never reach into each other: the local backend signals only process groups it still owns.

PIDs wrap within a pool run on this machine (``pid_max`` 32768, torch threads use PIDs too), and
every launcher leads its own session, so a reaped launcher's PID can come back as another job's
launcher. These tests make that happen on purpose: ``/proc/sys/kernel/ns_last_pid`` (root) sets
the next PID the kernel hands out, so a bystander process can be started with exactly the PID of
a launcher the backend has seen exit.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_faultloop.jobs.backends.local import LocalBackend
from pytest_faultloop.jobs.backends.ports import lease_port
from pytest_faultloop.jobs.backends.protocol import standalone_spec
from pytest_faultloop.models import Job, JobState, PoolEntry
from pytest_faultloop.models.faults import FaultType

HERE = Path(__file__).resolve().parent
SPLIT_EXIT = HERE / "fixtures" / "jobs" / "split_exit.sh"
NS_LAST_PID = Path("/proc/sys/kernel/ns_last_pid")


def _can_choose_pids() -> bool:
    try:
        with open(NS_LAST_PID, "w"):
            return True
    except OSError:
        return False


needs_pid_control = pytest.mark.skipif(
    not _can_choose_pids(), reason="needs a writable /proc/sys/kernel/ns_last_pid (root)"
)


def _state(pid: int) -> str | None:
    """The process state letter of ``pid`` (``Z`` for a zombie), ``None`` once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def _spawn_with_pid(pid: int, attempts: int = 30) -> subprocess.Popen[bytes] | None:
    """A session-leading bystander (like another job's launcher) that got exactly ``pid``, or
    ``None`` when the kernel would not hand that PID out (it is still in use)."""
    for _ in range(attempts):
        NS_LAST_PID.write_text(str(pid - 1))
        process = subprocess.Popen(["sleep", "120"], start_new_session=True)
        if process.pid == pid:
            return process
        process.kill()
        process.wait()
        if _state(pid) not in (None,):  # held by someone: the kernel will not reuse it
            return None
    return None


def _wait_for_end(backend: LocalBackend, job: Job, timeout_s: float = 120) -> Job:
    deadline = time.monotonic() + timeout_s
    while (job := backend.poll(job)).state.active:
        assert time.monotonic() < deadline, f"job {job.job_id} did not end"
        time.sleep(0.1)
    return job


@needs_pid_control
def test_a_reaped_launchers_recycled_pid_is_never_signalled(tmp_path: Path) -> None:
    """Node 0's launcher exits at once, node 1's runs into the time limit; ending the job must
    not signal whatever process now carries node 0's old PID."""
    entry = PoolEntry(fault=FaultType.NONE, rank=0, iter=1, nodes=2)
    spec = standalone_spec(
        entry,
        tmp_path,
        SPLIT_EXIT,
        gpus_per_node=1,
        time_limit_s=8,
        env={"PYTHONPATH": str(HERE / "support")},
    )
    backend = LocalBackend(kill_grace_s=1)
    job = backend.submit(spec)
    pid_file = spec.experiment_dir / "node0.pid"
    deadline = time.monotonic() + 60
    while not pid_file.exists():
        assert time.monotonic() < deadline, "node 0 never started"
        time.sleep(0.05)
    node0 = int(pid_file.read_text())
    deadline = time.monotonic() + 120
    while _state(node0) not in ("Z", None):
        assert time.monotonic() < deadline, "node 0 never exited"
        time.sleep(0.05)
    time.sleep(0.3)  # time enough for a backend that reaps at once to have done so

    bystander = _spawn_with_pid(node0)
    held_while_running = _state(node0) == "Z" if bystander is None else False
    try:
        job = _wait_for_end(backend, job)
        assert job.state is JobState.TIMEOUT
        if bystander is None:
            # the backend keeps the exited launcher unreaped, so its PID (and group id) cannot
            # be handed to anyone else while the job still might signal it
            assert held_while_running, f"pid {node0} was neither reused nor held"
        else:
            time.sleep(0.5)
            assert bystander.poll() is None, (
                f"the backend signalled pid {node0}'s new owner: exit {bystander.returncode}"
            )
    finally:
        if bystander is not None:
            bystander.kill()
            bystander.wait()


@needs_pid_control
def test_after_a_job_ends_its_old_group_ids_are_left_alone(tmp_path: Path) -> None:
    """Once a job has ended, cancelling it again signals nothing, even where its launchers'
    PIDs now belong to other session leaders."""
    entry = PoolEntry(fault=FaultType.NONE, rank=0, iter=1, nodes=2)
    spec = standalone_spec(
        entry,
        tmp_path,
        SPLIT_EXIT,
        gpus_per_node=1,
        time_limit_s=2,
        env={"PYTHONPATH": str(HERE / "support")},
    )
    backend = LocalBackend(kill_grace_s=1)
    job = _wait_for_end(backend, backend.submit(spec))
    node0 = int((spec.experiment_dir / "node0.pid").read_text())
    bystander = _spawn_with_pid(node0)
    if bystander is None and _state(node0) not in (None, "Z"):
        pytest.skip(f"pid {node0} was taken by another process meanwhile (a busy machine)")
    assert bystander is not None, f"pid {node0} is still held after the job ended"
    try:
        assert backend.cancel(job).state is JobState.TIMEOUT
        time.sleep(0.3)
        assert bystander.poll() is None
        os.kill(bystander.pid, signal.SIGCONT)  # still ours and alive
    finally:
        bystander.kill()
        bystander.wait()


def test_a_node_that_starts_late_is_waited_for_not_killed(tmp_path: Path) -> None:
    """Start-up is not a stall: with a 4 s collective timeout (a stalled rank is ended after 5 s),
    node 1's launcher starting 12 s after node 0's still joins, and nobody is signalled."""
    entry = PoolEntry(fault=FaultType.NONE, rank=0, iter=2, nodes=2)
    spec = standalone_spec(entry, tmp_path, SPLIT_EXIT, gpus_per_node=2, time_limit_s=120)
    lease = lease_port()
    env = {
        **os.environ,
        **spec.env,
        "SLURM_JOB_ID": "77",
        "SLURM_NNODES": "2",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(lease.port),
        "FAULTLOOP_COLLECTIVE_TIMEOUT": "4",
        "FAULTLOOP_FR_STALL_S": "2",
        "FAULTLOOP_KILL_GRACE_S": "1",
        "FAULTLOOP_EXIT_MARGIN_S": "0.5",
        "FAULTLOOP_STARTUP_TIMEOUT": "60",
    }
    launcher = [sys.executable, "-m", "pytest_faultloop.jobs.workload.launcher"]
    try:
        nodes = [subprocess.Popen(launcher, env={**env, "SLURM_NODEID": "0"})]
        time.sleep(12)
        nodes.append(subprocess.Popen(launcher, env={**env, "SLURM_NODEID": "1"}))
        codes = [node.wait(timeout=120) for node in nodes]
    finally:
        lease.release()
    log = (spec.experiment_dir / "logs" / "slurm" / "77.0.1.main_workload.log").read_text()
    assert codes == [0, 0], log[-3000:]
    assert "closing signal" not in log
    assert all(f"Rank {r} finished" in log for r in range(4))
