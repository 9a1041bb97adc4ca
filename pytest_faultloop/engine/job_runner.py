"""The built-in ``pytest_faultloop_run_job``: submit to a backend, poll with backoff, cancel on stop."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from pytest_faultloop.jobs.backends.protocol import Backend, JobSpec
from pytest_faultloop.models import Job, JobState
from pytest_faultloop.models.layout import ExperimentLayout

_FIRST_POLL = 1.0
_TICK = 0.5
"""How often the job-ended marker is looked for (a stat) between queue polls."""


class BackendJobRunner:
    def __init__(
        self,
        backend: Backend,
        poll_interval: float,
        stop: threading.Event,
        keep_jobs: bool,
        on_submitted: Callable[[Job], None],
        progress: Callable[[str], None],
        watch_marker: bool = True,
    ) -> None:
        self.backend = backend
        cap = getattr(backend, "max_poll_interval", None)
        self.poll_interval = min(poll_interval, cap) if cap else poll_interval
        self.stop = stop
        self.keep_jobs = keep_jobs
        self.on_submitted = on_submitted
        self.progress = progress
        self.watch_marker = watch_marker

    def run(self, spec: JobSpec) -> Job:
        job = self._reattach(spec) if spec.resume is not None else None
        submitted = job is None
        if job is None:
            ExperimentLayout(spec.experiment_dir).job_ended.unlink(missing_ok=True)
            job = self.backend.submit(spec)
            if job.state is JobState.SUBMIT_FAILED:
                self.progress(f"  rejected: {spec.experiment.live.key}: {job.reason}")
                return job
        try:
            return self._follow(spec, job, submitted)
        except BaseException:
            if not self.keep_jobs:  # its run cannot be recorded (e.g. an unwritable session)
                self.backend.cancel(job)
            raise

    def _follow(self, spec: JobSpec, job: Job, submitted: bool) -> Job:
        """Announce a new job, then poll it to its end (or cancel it when the run stops)."""
        entry = spec.experiment.live
        marker = ExperimentLayout(spec.experiment_dir).job_ended
        if submitted:
            self.progress(
                f"  submitted: {entry.fault.value} rank={entry.rank_text} iter={entry.iter} "
                f"nodes={entry.nodes} -> job={job.job_id}"
            )
            self.on_submitted(job)
        started = time.monotonic()
        delay = min(_FIRST_POLL, self.poll_interval)
        next_poll = started + delay
        next_note = started + self.poll_interval
        while job.state.active:
            if self.stop.wait(min(_TICK, delay)):
                if self.keep_jobs:
                    self.progress(f"  left running: job={job.job_id} ({entry.key})")
                    return job
                job = self.backend.cancel(job)
                self.progress(f"  cancelled: job={job.job_id} ({entry.key})")
                return job
            now = time.monotonic()
            ended = self.watch_marker and marker.exists()
            if now < next_poll and not ended:
                continue
            job = self.backend.poll(job)
            delay = _TICK if ended else min(delay * 1.5, self.poll_interval)
            next_poll = now + delay
            if time.monotonic() >= next_note and job.state.active:
                waited = int(time.monotonic() - started)
                self.progress(f"  waiting for {entry.key} ({job.job_id}) ... {waited}s")
                next_note += self.poll_interval
        return self._finished(job, started)

    def _reattach(self, spec: JobSpec) -> Job | None:
        """The earlier run's job when the backend still sees it, else None (submit anew)."""
        assert spec.resume is not None
        job = self.backend.poll(spec.resume)
        if job.state is JobState.UNKNOWN:
            self.progress(
                f"  cannot re-attach job={spec.resume.job_id} ({job.reason}); submitting again"
            )
            return None
        self.progress(f"  re-attached: job={job.job_id} {job.state.value} ({spec.experiment.key})")
        return job

    def _finished(self, job: Job, started: float) -> Job:
        elapsed = job.elapsed if job.elapsed is not None else time.monotonic() - started
        exit_note = f" exit {job.exit_code}" if job.exit_code else ""
        self.progress(
            f"  finished: job={job.job_id} {job.state.value}{exit_note} in {elapsed:.0f} s"
        )
        return job
