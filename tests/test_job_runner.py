"""The built-in job runner never leaves a job running behind an error: a job whose submission
or progress cannot be recorded (an unwritable session) is cancelled before the error goes on."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from pytest_faultloop.engine.job_runner import BackendJobRunner
from pytest_faultloop.jobs.backends.protocol import JobSpec, standalone_spec
from pytest_faultloop.models import Job, JobState, PoolEntry
from pytest_faultloop.models.errors import SessionUnwritable
from pytest_faultloop.models.faults import FaultType


class FakeBackend:
    """Jobs that run until cancelled."""

    name = "fake"

    def __init__(self) -> None:
        self.cancelled: list[str] = []

    def submit(self, spec: JobSpec) -> Job:
        return Job(
            job_id="7",
            backend=self.name,
            state=JobState.RUNNING,
            experiment_dir=spec.experiment_dir,
            submitted_at=0.0,
        )

    def poll(self, job: Job) -> Job:
        return job

    def cancel(self, job: Job) -> Job:
        self.cancelled.append(job.job_id)
        return job.model_copy(update={"state": JobState.CANCELLED})


def spec(tmp_path: Path) -> JobSpec:
    entry = PoolEntry(fault=FaultType.NONE, rank=0, iter=3, nodes=1)
    return standalone_spec(entry, tmp_path, tmp_path / "job.sh", gpus_per_node=1, time_limit_s=60)


def unwritable(*_: object) -> None:
    raise SessionUnwritable("cannot write the session directory")


@pytest.mark.parametrize("keep_jobs", [False, True])
@pytest.mark.parametrize("failing", ["on_submitted", "progress"])
def test_a_job_that_cannot_be_recorded_is_cancelled(
    tmp_path: Path, failing: str, keep_jobs: bool
) -> None:
    """Unless --faultloop-keep-jobs asks for jobs to be left running."""
    backend = FakeBackend()
    hooks = {"on_submitted": lambda *_: None, "progress": lambda *_: None, failing: unwritable}
    runner = BackendJobRunner(
        backend,
        poll_interval=0.1,
        stop=threading.Event(),
        keep_jobs=keep_jobs,
        on_submitted=hooks["on_submitted"],
        progress=hooks["progress"],
    )
    with pytest.raises(SessionUnwritable):
        runner.run(spec(tmp_path))
    assert backend.cancelled == ([] if keep_jobs else ["7"])
