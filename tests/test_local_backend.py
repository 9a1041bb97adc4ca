"""LocalBackend: job ids, refusals, time limits and cancellation leave nothing running."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from test_workload import GPUS, NODES, TINY_GLOO, live_processes_of

from pytest_faultloop.jobs.backends.local import (
    LocalBackend,
    allocate_job_id,
    launcher_module,
)
from pytest_faultloop.jobs.backends.protocol import JobSpec, standalone_spec
from pytest_faultloop.models import Job, JobState, PoolEntry
from pytest_faultloop.models.faults import FaultType

REPO = Path(__file__).resolve().parent.parent


def spec_for(tmp_path: Path, script: Path, *, time_limit_s: int = 120, **env: str) -> JobSpec:
    entry = PoolEntry(fault=FaultType.NONE, rank=0, iter=3, nodes=NODES)
    return standalone_spec(
        entry,
        tmp_path,
        script,
        gpus_per_node=GPUS,
        time_limit_s=time_limit_s,
        env={"FAULT_AT_ITER": "1", **env},
        workload="tiny_gloo",
    )


def long_clean_run(tmp_path: Path, time_limit_s: int = 120) -> JobSpec:
    """A clean run that would train for a minute."""
    return spec_for(tmp_path, TINY_GLOO, time_limit_s=time_limit_s, FAULTLOOP_EXIT_MARGIN_S="60")


def wait_until_training(job: Job, backend: LocalBackend, timeout_s: float = 60) -> Path:
    log = job.experiment_dir / "logs" / "slurm" / f"{job.job_id}.0.1.main_workload.log"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if log.exists() and "iteration        2 " in log.read_text():
            return log
        assert backend.poll(job).state is JobState.RUNNING
        time.sleep(0.2)
    raise AssertionError("the job never started training")


def test_job_ids_are_numeric_and_unique_across_threads(tmp_path: Path) -> None:
    counter = tmp_path / "job-id"
    ids: list[str] = []
    threads = [
        threading.Thread(target=lambda: ids.append(allocate_job_id(counter))) for _ in range(16)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(ids)) == 16 and all(i.isdigit() for i in ids)


def test_a_damaged_job_id_counter_still_gives_an_id(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 in the counter (a damaged disk) were a UnicodeDecodeError at
    every submission."""
    counter = tmp_path / "job-id"
    counter.write_bytes(b"12\xe934")
    assert allocate_job_id(counter).isdigit()
    assert int(allocate_job_id(counter)) == int(counter.read_text())


def test_scripts_without_a_local_launcher_are_refused(tmp_path: Path) -> None:
    job = LocalBackend().submit(spec_for(tmp_path, REPO / "sbatch" / "l4_gb200_reduced.sh"))
    assert job.state is JobState.SUBMIT_FAILED
    assert "l4_gb200_reduced.sh cannot run on the local backend" in (job.reason or "")
    assert launcher_module(TINY_GLOO) == "pytest_faultloop.jobs.workload.launcher"


def test_a_missing_experiment_directory_is_refused(tmp_path: Path) -> None:
    spec = spec_for(tmp_path, TINY_GLOO).model_copy(update={"experiment_dir": tmp_path / "nowhere"})
    job = LocalBackend().submit(spec)
    assert job.state is JobState.SUBMIT_FAILED and "does not exist" in (job.reason or "")


def test_polling_a_job_from_elsewhere_says_unknown(tmp_path: Path) -> None:
    job = Job(job_id="1", backend="local", state=JobState.RUNNING, experiment_dir=tmp_path)
    assert LocalBackend().poll(job).state is JobState.UNKNOWN


def test_time_limit_ends_the_job_as_timeout_with_nothing_left(tmp_path: Path) -> None:
    backend = LocalBackend(kill_grace_s=2)
    job = backend.submit(long_clean_run(tmp_path, time_limit_s=12))
    assert job.state is JobState.RUNNING
    assert live_processes_of(job.job_id)  # the limit cannot have struck yet: it counts seconds
    deadline = time.monotonic() + 600  # generous: a loaded 2-core machine runs the job late
    while (job := backend.poll(job)).state.active:
        assert time.monotonic() < deadline, f"job {job.job_id} still {job.state} after 600 s"
        time.sleep(0.2)
    slurm = job.experiment_dir / "logs" / "slurm"
    logs = "".join(
        f"\n--- {p.name}\n{p.read_text()[-4000:]}"
        for p in sorted(slurm.glob(f"{job.job_id}.*"))
        if not p.name.endswith(".out")
    )
    # 12 s limit + 2 s grace; left alone the job would train for over 60 s: the ceiling is
    # generous for a loaded machine and still tells the two apart
    assert job.state is JobState.TIMEOUT and job.elapsed is not None and job.elapsed < 45, (
        f"{job!r}{logs}"
    )  # the launchers' and ranks' own words, should it ever end otherwise
    assert live_processes_of(job.job_id) == []
    assert "DUE TO TIME LIMIT" in (slurm / f"{job.job_id}.launch.err").read_text()


def test_cancel_ends_every_process_of_the_job(tmp_path: Path) -> None:
    backend = LocalBackend(kill_grace_s=2)
    job = backend.submit(long_clean_run(tmp_path))
    log = wait_until_training(job, backend)
    started = time.monotonic()
    job = backend.cancel(job)
    assert (job.state, job.exit_code) == (JobState.CANCELLED, "0:15")
    took = time.monotonic() - started
    assert took < 45, f"cancelling took {took:.1f} s (2 s grace; the job trains for 60 s)"
    assert live_processes_of(job.job_id) == []
    assert "closing signal SIGTERM" in log.read_text()
    err = (log.parent / f"{job.job_id}.launcher.err").read_text()
    assert "launcher: ending rank " in err and "the launcher was asked to shut down" in err
    assert backend.cancel(job).state is JobState.CANCELLED  # cancelling again changes nothing
