"""Turn an experiment into its result, at most once per pytest run (xdist workers included).

The stages are :class:`pytest_faultloop.engine.pipeline.Pipeline`'s; here the result is memoised
in-process (futures) and across processes (an experiment lock plus a done-marker in the run
directory, the result itself in the session's ``result.json``), jobs wait for a slot, and a job
that ended before its fault fired is resubmitted.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager, suppress
from functools import partial

from pytest_faultloop.engine.job_specs import job_spec
from pytest_faultloop.engine.pipeline import REUSABLE_STATES, Pipeline, standing
from pytest_faultloop.engine.run_session import RunSession
from pytest_faultloop.engine.slots import SlotLimiter
from pytest_faultloop.inputs.settings import Settings
from pytest_faultloop.jobs.backends.protocol import JobSpec
from pytest_faultloop.jobs.workload.registry import Workload
from pytest_faultloop.models import (
    Attempt,
    Experiment,
    ExperimentResult,
    JobState,
    UnreadableResult,
)
from pytest_faultloop.models.errors import SessionUnwritable


class Runner:
    """Runs each experiment's pipeline once per pytest run: the memo, the background threads,
    the experiment lock, the retries and the announcements; the stages are the pipeline's."""

    def __init__(
        self,
        settings: Settings,
        workloads: dict[str, Workload],
        session: RunSession,
        slots: SlotLimiter,
        pipeline: Pipeline,
        on_result: Callable[[ExperimentResult], None],
    ) -> None:
        self.settings = settings
        self.workloads = workloads
        self.session = session.directory
        self.ledger = session.ledger
        self.slots = slots
        self.pipeline = pipeline
        self._on_result = on_result
        self._futures: dict[str, Future[ExperimentResult]] = {}
        self._mutex = threading.Lock()
        self._threads: list[threading.Thread] = []

    # -- memo ---------------------------------------------------------------------------------

    def result(self, experiment: Experiment) -> ExperimentResult:
        """The experiment's result, computing it here unless someone already is."""
        with self._mutex:
            future = self._futures.get(experiment.key)
            owner = future is None
            if owner:
                future = self._futures[experiment.key] = Future()
        assert future is not None
        if owner:
            try:
                future.set_result(self._produce(experiment))
            except BaseException as exc:
                future.set_exception(exc)
        return future.result()

    def in_background(self, experiment: Experiment) -> ExperimentResult:
        """The experiment's result, its job run by a background thread: the caller (a test in
        the main thread) waits interruptibly, and Ctrl-C cancels the job like a pool's."""
        return self._started(experiment).result()

    def results(self, experiments: Sequence[Experiment]) -> list[ExperimentResult]:
        """Several experiments' results (an experiment's trials), their jobs run side by side
        as the slots allow."""
        if len(experiments) == 1:
            return [self.result(experiments[0])]
        return [future.result() for future in [self._started(e) for e in experiments]]

    def _started(self, experiment: Experiment) -> Future[ExperimentResult]:
        done: Future[ExperimentResult] = Future()

        def work() -> None:
            try:
                done.set_result(self.result(experiment))
            except BaseException as exc:
                done.set_exception(exc)

        thread = threading.Thread(target=work, name=f"faultloop-{experiment.key}", daemon=True)
        with self._mutex:
            self._threads.append(thread)
        thread.start()
        return done

    def prefetch(self, experiments: Sequence[Experiment]) -> None:
        """Start every experiment in the background, BATCH_SIZE at a time, in this order."""
        queue = list(experiments)
        mutex = threading.Lock()

        def work() -> None:
            while not self.slots.stop.is_set():
                with mutex:
                    if not queue:
                        return
                    experiment = queue.pop(0)
                try:
                    self.result(experiment)
                except BaseException:  # reported by the items that wait for it
                    continue

        for index in range(min(self.settings.batch_size, len(queue))):
            thread = threading.Thread(target=work, name=f"faultloop-{index}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def join(self, timeout: float) -> None:
        for thread in self._threads:
            thread.join(timeout)

    # -- one experiment -------------------------------------------------------------------------------

    def _produce(self, experiment: Experiment) -> ExperimentResult:
        key = experiment.key
        with self.ledger.experiment_lock(key):
            # a re-analysis re-scores the stored job: one it cannot read stays as it is
            rescoring = (
                self.settings.reanalyze
                and experiment.case is None
                and experiment.perturbation is None
            )
            stored: ExperimentResult | None = None
            unreadable: UnreadableResult | None = None
            set_aside: list[Attempt] = []
            try:
                stored = self.session.read_result(experiment)
            except UnreadableResult as exc:
                unreadable = exc
                if not rescoring:
                    set_aside = [self._set_aside_unreadable(experiment, exc)]
            if stored is not None and self.ledger.is_done(key):
                return stored  # another process of this run produced it
            try:
                if unreadable is not None and rescoring:
                    result = self._unscorable(experiment, unreadable)
                else:
                    result = self._process(experiment, stored)
            finally:
                self.ledger.mark_ended(key)
            if set_aside:
                result = result.model_copy(update={"attempts": [*set_aside, *result.attempts]})
            if self._worth_storing(result, stored):
                self.session.write_result(result)
            else:
                self.session.event(
                    f"  kept the stored result of {key} (this run: "
                    f"{result.broken}: {result.reason})"
                )
            self.ledger.mark_done(key)
        self._on_result(result)
        return result

    def _set_aside_unreadable(
        self, experiment: Experiment, unreadable: UnreadableResult
    ) -> Attempt:
        """Before the experiment runs again, everything its earlier job left goes under
        ``attempts/`` (the new result lists that attempt: the report shows it)."""
        attempt = self.session.set_aside_unreadable(experiment, unreadable)
        self.session.event(
            f"  stored result of {experiment.key} unreadable ({unreadable}): its files are "
            f"kept in {attempt.moved_to}; running it again"
        )
        return attempt

    def _set_aside(
        self, result: ExperimentResult, attempts: list[Attempt], note: str
    ) -> list[Attempt]:
        """The attempts with ``result``'s job added: its files go under ``attempts/<JOB_ID>/``
        before the experiment runs again, and the experiment's result lists it at once (its
        row stays in the report whatever stops the run next); the attempt says why (its
        result's breakage). Without room for the next job nothing moves: ``result`` is stored
        as it stands and the run stops (SessionUnwritable)."""
        experiment, job = result.experiment, result.job
        assert job is not None
        reason = result.reason or f"job {job.job_id} ended {job.state.value}"
        try:
            moved = self.session.set_aside(experiment, job)
        except SessionUnwritable:
            with suppress(SessionUnwritable):  # a full disk may refuse this too: then the
                # record made when the job was submitted stays, and a continued run adopts it
                self.session.write_result(result.model_copy(update={"attempts": attempts}))
            raise
        kind = "run_invalid" if result.broken == "run_invalid" else "infrastructure"
        attempts = [*attempts, Attempt(job=job, reason=reason, kind=kind, moved_to=moved)]
        self.session.write_result(ExperimentResult(experiment=experiment, attempts=attempts))
        self.session.event(f"  resubmitting {experiment.key}: {reason}{note}")
        return attempts

    def _unscorable(self, experiment: Experiment, unreadable: UnreadableResult) -> ExperimentResult:
        """A re-analysis cannot re-score a result it cannot read: the experiment ERRORs."""
        self.session.event(f"  stored result of {experiment.key} unreadable ({unreadable})")
        return ExperimentResult(
            experiment=experiment,
            broken="analysis_failed",
            reason=f"stored result unreadable: {unreadable}; its files are kept as they are",
        )

    def _worth_storing(self, result: ExperimentResult, stored: ExperimentResult | None) -> bool:
        """Never replace a stored result with a worse one; a re-analysis creates none, but for
        the perturbed copies it scores."""
        if stored is None:
            return not self.settings.reanalyze or result.experiment.perturbation is not None
        return standing(result) >= standing(stored)

    def _process(self, experiment: Experiment, stored: ExperimentResult | None) -> ExperimentResult:
        if experiment.perturbation is not None:
            return self.pipeline.perturbed(experiment, self.result(experiment.unperturbed))
        if experiment.case is not None:
            return self.pipeline.replayed(experiment)
        if self.settings.reanalyze:
            if stored is not None and stored.job is not None:
                job = stored.job
                self._announce(experiment, f" (stored job={job.job_id} {job.state.value})")
            return self.pipeline.rescored(experiment, stored)
        if stored is not None and stored.job is not None and stored.job.state in REUSABLE_STATES:
            job = stored.job
            self._announce(
                experiment, f" (kept from an earlier run: job={job.job_id} {job.state.value})"
            )
            kept = stored if stored.verdict is not None else self.pipeline.evaluated(stored)
            if not self._retry_owed(kept):
                return kept
            stored = kept
        attempts = list(stored.attempts) if stored is not None else []
        if stored is not None and stored.job is not None and not stored.job.state.active:
            # the stored job gave nothing worth keeping (refused, cancelled, its end unknown,
            # or it ended before its fault fired and an earlier run stopped before its retry)
            attempts = self._set_aside(stored, attempts, " (stored job)")
        directory = self.session.prepare_job(experiment)
        spec = job_spec(experiment, directory, self.settings, self.workloads)
        if stored is not None and stored.job is not None and stored.job.state.active:
            spec = spec.model_copy(update={"resume": stored.job})
        while True:
            result = self.pipeline.live(spec, partial(self._slot, experiment), attempts)
            retries = _retries(attempts) + 1
            if self._ended_unwatched(spec, result):
                note = ""  # the stopped run's job: run it now, whatever the retries
            elif self._retryable(result) and retries <= self.settings.retries_invalid:
                note = f" (retry {retries} of {self.settings.retries_invalid})"
            else:
                break
            attempts = self._set_aside(result, attempts, note)
            spec = spec.model_copy(update={"resume": None})
        return result.model_copy(update={"attempts": attempts})

    def _retry_owed(self, stored: ExperimentResult) -> bool:
        """A stored job that ended before its fault fired, with retries left: the run that
        stored it stopped before resubmitting (interrupted, or no room for the next job)."""
        return self._retryable(stored) and _retries(stored.attempts) < self.settings.retries_invalid

    def _ended_unwatched(self, spec: JobSpec, result: ExperimentResult) -> bool:
        """A job re-attached from an earlier run that was cancelled (by that run as it stopped,
        or while no run watched) or whose end is unknown: nothing to score, so submit again."""
        return (
            spec.resume is not None
            and result.job is not None
            and result.job.state in (JobState.CANCELLED, JobState.UNKNOWN)
            and not self.slots.stop.is_set()
        )

    def _retryable(self, result: ExperimentResult) -> bool:
        """The job ended before the fault fired (never a failed control run: that one is the
        harness's own alarm)."""
        return (
            result.broken == "run_invalid"
            and result.job is not None
            and result.experiment.entry is not None
            and not result.experiment.entry.fault.is_control
            and not self.slots.stop.is_set()
        )

    @contextmanager
    def _slot(self, experiment: Experiment) -> Iterator[None]:
        """One of the run's slots while the experiment's job runs (announced once it holds
        one); its ended-marker is set however the wait or the job ends."""
        try:
            with self.slots.slot(experiment.key):
                self._announce(experiment)
                yield
        finally:
            self.ledger.mark_ended(experiment.key)

    def _announce(self, experiment: Experiment, note: str = "") -> None:
        """``>>> Experiment n of N`` (``>>> Re-scoring`` in a re-analysis), numbered in the order
        the run's processes start experiments, or the seed's ``>>> Batch k: experiments a–b of
        N`` (pairs); nothing for a resubmission."""
        slots, key = self.slots, experiment.key
        what = "Re-scoring" if self.settings.reanalyze else "Experiment"
        with self.ledger.started(key, set(slots.order)) as number:
            position, total = slots.position(key), len(slots.order)
            if number is None:
                return
            if position is None:
                asked_by = f" (asked for by {experiment.test})" if experiment.test else ""
                self.session.event(f">>> {what} {key}{asked_by}{note}")
            elif slots.mode == "pairs" and not self.settings.reanalyze:
                if position % slots.batch_size == 0:
                    last = min(position + slots.batch_size, total)
                    self.session.event(
                        f">>> Batch {position // slots.batch_size + 1}: "
                        f"experiments {position + 1}–{last} of {total}"
                    )
            else:
                self.session.event(f">>> {what} {number} of {total}: {key}{note}")


def _retries(attempts: Sequence[Attempt]) -> int:
    """How many times the experiment was resubmitted because its fault never fired."""
    return sum(attempt.kind == "run_invalid" for attempt in attempts)
