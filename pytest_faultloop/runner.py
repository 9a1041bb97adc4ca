"""Turn an experiment into its result, at most once per pytest run (xdist workers included).

Stages (:mod:`pytest_faultloop.pipeline`): job (in a slot) -> artifacts -> log and FR analyses
-> verdict. Each calls a hook, so a conftest can replace any of them. The result is memoised
in-process (futures) and across processes (an experiment lock plus a done-marker in the run
directory, the result itself in the session's ``result.json``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from functools import partial

import pytest

from pytest_faultloop.backends.protocol import JobSpec
from pytest_faultloop.cases import joined_logs
from pytest_faultloop.cost_meter import CostMeter
from pytest_faultloop.errors import ConfigError
from pytest_faultloop.inject import read_marker, read_rank_markers
from pytest_faultloop.job_specs import job_spec
from pytest_faultloop.models import Artifacts, Attempt, Experiment, ExperimentResult, JobState
from pytest_faultloop.perturb.catalogue import compositions
from pytest_faultloop.perturb.copies import perturbed_artifacts
from pytest_faultloop.perturb.perturbation import NotApplicable
from pytest_faultloop.pipeline import (
    REUSABLE_STATES,
    Broken,
    Stage,
    fault_fired,
    job_ended,
    score,
    standing,
)
from pytest_faultloop.session_dir import SessionDir
from pytest_faultloop.settings import Settings
from pytest_faultloop.slots import Interrupted, SlotLimiter
from pytest_faultloop.workload.registry import Workload


class Runner:
    def __init__(
        self,
        config: pytest.Config,
        settings: Settings,
        workloads: dict[str, Workload],
        session: SessionDir,
        slots: SlotLimiter,
        stamp: Callable[[ExperimentResult], ExperimentResult],
        on_result: Callable[[ExperimentResult], None],
    ) -> None:
        self.config = config
        self.settings = settings
        self.workloads = workloads
        self.session = session
        self.slots = slots
        self._stamp = stamp
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

    # -- stages -------------------------------------------------------------------------------

    def _produce(self, experiment: Experiment) -> ExperimentResult:
        key = experiment.key
        with self.slots.experiment_lock(key):
            stored = self.session.read_result(experiment)
            if stored is not None and self.slots.done_marker(key).exists():
                return stored  # another process of this run produced it
            try:
                result = self._stamp(self._process(experiment, stored))
            finally:
                self.slots.ended_marker(key).touch()
            if self._worth_storing(result, stored):
                self.session.write_result(result)
            else:
                self.session.event(
                    f"  kept the stored result of {key} (this run: "
                    f"{result.broken}: {result.reason})"
                )
            self.slots.mark_done(key)
        self._on_result(result)
        return result

    def _worth_storing(self, result: ExperimentResult, stored: ExperimentResult | None) -> bool:
        """Never replace a stored result with a worse one; a re-analysis creates none, but for
        the perturbed copies it scores."""
        if stored is None:
            return not self.settings.reanalyze or result.experiment.perturbation is not None
        return standing(result) >= standing(stored)

    def _process(self, experiment: Experiment, stored: ExperimentResult | None) -> ExperimentResult:
        if experiment.perturbation is not None:
            return self.perturbed(experiment)
        if experiment.case is not None:
            return self.replay(experiment)
        if self.settings.reanalyze:
            return score(
                ExperimentResult(experiment=experiment),
                partial(self._stored_job, stored),
                *self._evaluation,
            )
        if stored is not None and stored.job is not None and stored.job.state in REUSABLE_STATES:
            job = stored.job
            self._announce(
                experiment, f" (kept from an earlier run: job={job.job_id} {job.state.value})"
            )
            return stored if stored.verdict is not None else self.evaluate(stored)
        directory = self.session.prepare_job(experiment)
        spec = job_spec(experiment, directory, self.settings, self.workloads)
        if stored is not None and stored.job is not None and stored.job.state.active:
            spec = spec.model_copy(update={"resume": stored.job})
        attempts = list(stored.attempts) if stored is not None else []
        retries = 0
        while True:
            result = score(
                ExperimentResult(experiment=experiment),
                partial(self._run_job, spec),
                *self._evaluation,
            )
            if self._ended_unwatched(spec, result):
                note = ""  # the stopped run's job: run it now, whatever the retries
            elif self._retryable(result) and retries < self.settings.retries_invalid:
                retries += 1
                note = f" (retry {retries} of {self.settings.retries_invalid})"
            else:
                break
            assert result.job is not None and result.reason is not None
            moved = self.session.set_aside(experiment, result.job)
            attempts.append(Attempt(job=result.job, reason=result.reason, moved_to=moved))
            self.session.event(f"  resubmitting {experiment.key}: {result.reason}{note}")
            spec = spec.model_copy(update={"resume": None})
        return result.model_copy(update={"attempts": attempts})

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

    # -- the pipeline: each stage adds to the result or raises Broken ------------------------

    @property
    def _evaluation(self) -> tuple[Stage, ...]:
        """A finished job's stages: its end state, artifacts, the fault's firing, analyses,
        verdict."""
        return (job_ended, self._artifacts, fault_fired, self._analyses, self._verdict)

    def evaluate(self, result: ExperimentResult) -> ExperimentResult:
        """Artifacts -> analyses -> verdict for a stored finished job, scored afresh."""
        clean = result.model_copy(
            update={
                "log_analysis": None,
                "fr_analysis": None,
                "verdict": None,
                "broken": None,
                "reason": None,
                "costs": None,
            }
        )
        return score(clean, *self._evaluation)

    def replay(self, experiment: Experiment) -> ExperimentResult:
        """A stored case: its artifacts through the same analyzers and judge, no job."""
        return score(
            ExperimentResult(experiment=experiment),
            self._case_artifacts,
            self._analyses,
            self._verdict,
        )

    def perturbed(self, experiment: Experiment) -> ExperimentResult:
        """The unperturbed experiment's artifacts, rewritten by the perturbation, through the
        same analyzers and judge (its job, replay or re-analysis runs once, first)."""
        unperturbed = self.result(experiment.unperturbed)
        return score(
            ExperimentResult(experiment=experiment, job=unperturbed.job),
            partial(self._perturbed_artifacts, unperturbed),
            self._analyses,
            self._verdict,
        )

    def _perturbed_artifacts(
        self, unperturbed: ExperimentResult, result: ExperimentResult
    ) -> ExperimentResult:
        experiment = result.experiment
        assert experiment.perturbation is not None
        if unperturbed.broken in ("infrastructure", "run_invalid") or unperturbed.artifacts is None:
            kind = unperturbed.broken or "analysis_failed"
            raise Broken(
                kind, f"the unperturbed {unperturbed.experiment.key}: {unperturbed.reason}"
            )
        (composition,) = compositions(experiment.perturbation)
        try:
            artifacts = perturbed_artifacts(
                unperturbed.artifacts, composition, self.session.prepare(experiment), experiment
            )
        except (NotApplicable, OSError) as exc:
            raise Broken("analysis_failed", f"perturbation {composition.name}: {exc}") from None
        return result.model_copy(update={"artifacts": artifacts})

    def _stored_job(
        self, stored: ExperimentResult | None, result: ExperimentResult
    ) -> ExperimentResult:
        """A re-analysis scores the job the session stored."""
        if stored is None or stored.job is None:
            raise Broken(
                "infrastructure",
                f"--faultloop-reanalyze: no stored job for "
                f"{result.experiment.key} in {self.session.path}",
            )
        state = stored.job.state.value
        self._announce(result.experiment, f" (stored job={stored.job.job_id} {state})")
        return stored.model_copy(
            update={
                "experiment": result.experiment,
                "broken": None,
                "reason": None,
                "log_analysis": None,
                "fr_analysis": None,
                "verdict": None,
                "costs": None,
            }
        )

    def _run_job(self, spec: JobSpec, result: ExperimentResult) -> ExperimentResult:
        """One job of the experiment, in a slot, to its end."""
        experiment = result.experiment
        try:
            with self.slots.slot(experiment.key):
                self._announce(experiment)
                job = self.config.hook.pytest_faultloop_run_job(config=self.config, spec=spec)
        except Interrupted:
            raise Broken(
                "infrastructure", "the run was interrupted before the job started"
            ) from None
        finally:
            self.slots.ended_marker(experiment.key).touch()
        if job is None:
            raise Broken(
                "infrastructure", "no pytest_faultloop_run_job implementation returned a job"
            )
        self.session.record_submission(job, experiment)
        return result.model_copy(update={"job": job})

    def _announce(self, experiment: Experiment, note: str = "") -> None:
        """``>>> Experiment n of N`` (``>>> Re-scoring`` in a re-analysis), numbered in the order
        the run's processes start experiments, or the seed's ``>>> Batch k: experiments a–b of
        N`` (pairs); nothing for a resubmission."""
        slots, key = self.slots, experiment.key
        what = "Re-scoring" if self.settings.reanalyze else "Experiment"
        with slots.numbered_start(key) as number:
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

    def _artifacts(self, result: ExperimentResult) -> ExperimentResult:
        assert result.job is not None
        try:
            artifacts = self.config.hook.pytest_faultloop_collect_artifacts(
                config=self.config,
                experiment=result.experiment,
                job=result.job,
                experiment_dir=self.session.experiment_dir(result.experiment),
            )
        except ConfigError as exc:  # an unreadable marker: as on replay, the run is not scored
            raise Broken("analysis_failed", str(exc)) from None
        return result.model_copy(update={"artifacts": artifacts})

    def _case_artifacts(self, result: ExperimentResult) -> ExperimentResult:
        case = result.experiment.case
        assert case is not None
        try:
            marker = read_marker(case.directory)
            rank_markers = read_rank_markers(case.directory)
        except ConfigError as exc:
            raise Broken("analysis_failed", str(exc)) from None
        log = case.logs[0]
        if len(case.logs) > 1:
            log = joined_logs(case.logs, self.session.prepare(result.experiment) / "logs")
        return result.model_copy(
            update={
                "artifacts": Artifacts(
                    experiment_dir=case.directory,
                    log=log,
                    fr_dir=case.dumps,
                    marker=marker,
                    rank_markers=rank_markers,
                )
            }
        )

    def _analyses(self, result: ExperimentResult) -> ExperimentResult:
        """The log and FR analyses (a user's analyzer hook may fail: the pool goes on), each
        metered into the result's costs (kept when the stage breaks)."""
        hook, artifacts, meter = self.config.hook, result.artifacts, CostMeter()
        try:
            with meter.stage("log"):
                log_analysis = hook.pytest_faultloop_analyze_log(
                    config=self.config, experiment=result.experiment, artifacts=artifacts
                )
            with meter.stage("fr"):
                fr_analysis = hook.pytest_faultloop_analyze_fr(
                    config=self.config, experiment=result.experiment, artifacts=artifacts
                )
        except Exception as exc:
            reason = f"{type(exc).__name__}: {exc}"
            raise Broken("analysis_failed", reason, {"costs": meter.costs}) from None
        if log_analysis is None or fr_analysis is None:
            missing = "log" if log_analysis is None else "FR"
            reason = f"no {missing} analyzer returned a result"
            raise Broken("analysis_failed", reason, {"costs": meter.costs})
        meter.usage("log", log_analysis.usage)
        return result.model_copy(
            update={"log_analysis": log_analysis, "fr_analysis": fr_analysis, "costs": meter.costs}
        )

    def _verdict(self, result: ExperimentResult) -> ExperimentResult:
        """The judge's verdict, metered into the result's costs (kept when it breaks)."""
        meter = CostMeter(result.costs)
        try:
            with meter.stage("judge"):
                verdict = self.config.hook.pytest_faultloop_judge(
                    config=self.config,
                    experiment=result.experiment,
                    artifacts=result.artifacts,
                    log_analysis=result.log_analysis,
                    fr_analysis=result.fr_analysis,
                )
        except Exception as exc:
            reason = getattr(exc, "reason", None) or f"{type(exc).__name__}: {exc}"
            raise Broken("judge_failed", str(reason), {"costs": meter.costs}) from None
        if verdict is None:
            reason = "no pytest_faultloop_judge implementation answered"
            raise Broken("judge_failed", reason, {"costs": meter.costs})
        meter.usage("judge", verdict.usage)
        return result.model_copy(update={"verdict": verdict, "costs": meter.costs})
