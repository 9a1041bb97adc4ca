"""Turn an experiment into its result, at most once per pytest run (xdist workers included).

Stages: job (in a scheduler slot) -> artifacts -> log and FR analyses -> verdict. Each stage is
a hook, so a conftest can replace any of them. The result is memoised in-process (futures) and
across processes (an experiment lock plus a done-marker in the run's lock directory, the result
itself in the session's ``result.json``).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path

import pytest

from pytest_faultloop.backends.base import JobSpec
from pytest_faultloop.errors import ConfigError
from pytest_faultloop.inject import read_marker
from pytest_faultloop.models import (
    Artifacts,
    Attempt,
    Experiment,
    ExperimentResult,
    Job,
    JobState,
    Overrides,
)
from pytest_faultloop.scheduler import Interrupted, Scheduler
from pytest_faultloop.session import Session
from pytest_faultloop.settings import Settings, time_limit_seconds
from pytest_faultloop.workloads import Workload

_INFRASTRUCTURE_STATES = {
    JobState.SUBMIT_FAILED: "the scheduler refused the job",
    JobState.NODE_FAIL: "a node failed under the job",
    JobState.BOOT_FAIL: "the job's nodes failed to boot",
    JobState.CANCELLED: "the job was cancelled before it ended",
    JobState.UNKNOWN: "the job's end state is unknown",
}
_REUSABLE_STATES = set(JobState) - set(_INFRASTRUCTURE_STATES) - {
    JobState.PENDING, JobState.RUNNING, JobState.COMPLETING,
}


class Runner:
    def __init__(
        self,
        config: pytest.Config,
        settings: Settings,
        workloads: dict[str, Workload],
        session: Session,
        scheduler: Scheduler,
        stamp: Callable[[ExperimentResult], ExperimentResult],
        on_result: Callable[[ExperimentResult], None],
    ) -> None:
        self.config = config
        self.settings = settings
        self.workloads = workloads
        self.session = session
        self.scheduler = scheduler
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
        return done.result()

    def prefetch(self, experiments: Sequence[Experiment]) -> None:
        """Start every experiment in the background, BATCH_SIZE at a time, in this order."""
        queue = list(experiments)
        mutex = threading.Lock()

        def work() -> None:
            while not self.scheduler.stop.is_set():
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
        with self.scheduler.experiment_lock(key):
            stored = self.session.read_result(experiment)
            if stored is not None and self.scheduler.done_marker(key).exists():
                return stored  # another process of this run produced it
            try:
                result = self._stamp(self._process(experiment, stored))
            finally:
                self.scheduler.ended_marker(key).touch()
            if self._worth_storing(result, stored):
                self.session.write_result(result)
            else:
                self.session.event(f"  kept the stored result of {key} (this run: "
                                   f"{result.broken}: {result.reason})")
            self.scheduler.mark_done(key)
        self._on_result(result)
        return result

    def _worth_storing(self, result: ExperimentResult, stored: ExperimentResult | None) -> bool:
        """Never replace a stored result with a worse one; a re-analysis never creates one."""
        if stored is None:
            return not self.settings.reanalyze
        return _standing(result) >= _standing(stored)

    def _process(self, experiment: Experiment, stored: ExperimentResult | None) -> ExperimentResult:
        if experiment.case is not None:
            return self.replay(experiment)
        if self.settings.reanalyze:
            if stored is None or stored.job is None:
                return ExperimentResult(
                    experiment=experiment, broken="infrastructure",
                    reason=f"--faultloop-reanalyze: no stored job for {experiment.key} in "
                    f"{self.session.path}",
                )
            return self.evaluate(stored.model_copy(update={"experiment": experiment}))
        if stored is not None and stored.job is not None and stored.job.state in _REUSABLE_STATES:
            if stored.verdict is not None:
                return stored
            return self.evaluate(stored)
        experiment_dir = self.session.prepare(experiment)
        spec = self.job_spec(experiment, experiment_dir)
        if stored is not None and stored.job is not None and stored.job.state.active:
            spec = spec.model_copy(update={"resume": stored.job})
        attempts = list(stored.attempts) if stored is not None else []
        for retry in range(self.settings.retries_invalid + 1):
            result = self._run_job(experiment, spec)
            if not self._retryable(result) or retry == self.settings.retries_invalid:
                break
            assert result.job is not None and result.reason is not None
            moved = self.session.set_aside(experiment, result.job)
            attempts.append(Attempt(job=result.job, reason=result.reason, moved_to=moved))
            self.session.event(f"  resubmitting {experiment.key}: {result.reason} "
                               f"(retry {retry + 1} of {self.settings.retries_invalid})")
            spec = spec.model_copy(update={"resume": None})
        return result.model_copy(update={"attempts": attempts})

    def _retryable(self, result: ExperimentResult) -> bool:
        """The job ended before the fault fired (never a failed control run: that one is the
        harness's own alarm)."""
        return (
            result.broken == "run_invalid"
            and result.job is not None
            and result.experiment.entry is not None
            and not result.experiment.entry.fault.is_control
            and not self.scheduler.stop.is_set()
        )

    def _run_job(self, experiment: Experiment, spec: JobSpec) -> ExperimentResult:
        """One job of the experiment in a scheduler slot, then its evaluation."""
        try:
            with self.scheduler.slot(experiment.key):
                self._announce(experiment)
                job = self.config.hook.pytest_faultloop_run_job(config=self.config, spec=spec)
        except Interrupted:
            return ExperimentResult(
                experiment=experiment, broken="infrastructure",
                reason="the run was interrupted before the job started",
            )
        finally:
            self.scheduler.ended_marker(experiment.key).touch()
        if job is None:
            return ExperimentResult(
                experiment=experiment, broken="infrastructure",
                reason="no pytest_faultloop_run_job implementation returned a job",
            )
        self.session.record_submission(job, experiment)
        return self.evaluate(ExperimentResult(experiment=experiment, job=job))

    def _announce(self, experiment: Experiment) -> None:
        """The seed's ``>>> Batch k: experiments a–b of N`` (pairs) or one line per start."""
        scheduler = self.scheduler
        position, total = scheduler.position(experiment.key), len(scheduler.order)
        if position is None:
            asked_by = f" (asked for by {experiment.test})" if experiment.test else ""
            self.session.event(f">>> Experiment {experiment.key}{asked_by}")
        elif scheduler.mode == "pairs":
            if position % scheduler.batch_size == 0:
                last = min(position + scheduler.batch_size, total)
                self.session.event(f">>> Batch {position // scheduler.batch_size + 1}: "
                                   f"experiments {position + 1}–{last} of {total}")
        else:
            self.session.event(f">>> Experiment {position + 1} of {total}: {experiment.key}")

    def evaluate(self, result: ExperimentResult) -> ExperimentResult:
        """Artifacts -> analyses -> verdict for a finished job; what breaks is recorded."""
        experiment, job = result.experiment, result.job
        assert job is not None
        clean = result.model_copy(update={
            "log_analysis": None, "fr_analysis": None, "verdict": None,
            "broken": None, "reason": None,
        })
        if job.state.active:
            return clean.model_copy(update={
                "broken": "infrastructure",
                "reason": f"job {job.job_id} is still {job.state.value} (left running); "
                "continue with --faultloop-session",
            })
        if job.state in _INFRASTRUCTURE_STATES:
            reason = _INFRASTRUCTURE_STATES[job.state]
            detail = f": {job.reason}" if job.reason else ""
            return clean.model_copy(update={
                "broken": "infrastructure",
                "reason": f"job {job.job_id} {job.state.value}: {reason}{detail}",
            })
        experiment_dir = self.session.experiment_dir(experiment)
        artifacts = self.config.hook.pytest_faultloop_collect_artifacts(
            config=self.config, experiment=experiment, job=job, experiment_dir=experiment_dir
        )
        clean = clean.model_copy(update={"artifacts": artifacts})
        invalid = run_invalid_reason(experiment, job, artifacts)
        if invalid:
            return clean.model_copy(update={"broken": "run_invalid", "reason": invalid})
        return self._analyze(clean, artifacts)

    def replay(self, experiment: Experiment) -> ExperimentResult:
        """A stored case: its artifacts through the same analyzers and judge, no job."""
        case = experiment.case
        assert case is not None
        result = ExperimentResult(experiment=experiment)
        try:
            marker = read_marker(case.directory)
        except ConfigError as exc:
            return result.model_copy(update={"broken": "analysis_failed", "reason": str(exc)})
        log = case.logs[0] if len(case.logs) == 1 else self._joined_logs(experiment)
        artifacts = Artifacts(experiment_dir=case.directory, log=log, fr_dir=case.dumps,
                              marker=marker)
        return self._analyze(result.model_copy(update={"artifacts": artifacts}), artifacts)

    def _joined_logs(self, experiment: Experiment) -> Path:
        """A case's several logs as one file (in name order), for analyzers that read one."""
        assert experiment.case is not None
        joined = self.session.prepare(experiment) / "logs" / "joined.log"
        with joined.open("wb") as out:
            for log in experiment.case.logs:
                data = log.read_bytes()
                out.write(data if data.endswith(b"\n") or not data else data + b"\n")
        return joined

    def _analyze(self, clean: ExperimentResult, artifacts: Artifacts) -> ExperimentResult:
        """Log and FR analyses, then the verdict; what breaks is recorded."""
        experiment, hook = clean.experiment, self.config.hook
        try:
            log_analysis = hook.pytest_faultloop_analyze_log(
                config=self.config, experiment=experiment, artifacts=artifacts
            )
            fr_analysis = hook.pytest_faultloop_analyze_fr(
                config=self.config, experiment=experiment, artifacts=artifacts
            )
        except Exception as exc:  # a user's analyzer hook; the rest of the pool goes on
            return clean.model_copy(update={
                "broken": "analysis_failed", "reason": f"{type(exc).__name__}: {exc}",
            })
        if log_analysis is None or fr_analysis is None:
            missing = "log" if log_analysis is None else "FR"
            return clean.model_copy(update={
                "broken": "analysis_failed", "reason": f"no {missing} analyzer returned a result",
            })
        clean = clean.model_copy(update={"log_analysis": log_analysis, "fr_analysis": fr_analysis})
        try:
            verdict = hook.pytest_faultloop_judge(
                config=self.config, experiment=experiment, artifacts=artifacts,
                log_analysis=log_analysis, fr_analysis=fr_analysis,
            )
        except Exception as exc:
            reason = getattr(exc, "reason", None) or f"{type(exc).__name__}: {exc}"
            return clean.model_copy(update={"broken": "judge_failed", "reason": str(reason)})
        if verdict is None:
            return clean.model_copy(update={
                "broken": "judge_failed", "reason": "no pytest_faultloop_judge implementation answered",
            })
        return clean.model_copy(update={"verdict": verdict})

    def job_spec(self, experiment: Experiment, experiment_dir: Path) -> JobSpec:
        settings, entry = self.settings, experiment.live
        workload = self.workloads[experiment.workload]
        chosen = experiment.overrides or Overrides()
        env = {
            "FAULT_RANK": str(entry.rank),
            "FAULT_AT_ITER": str(entry.iter),
            "FAULT_DELAY": f"{effective_fault_delay(settings, workload, chosen):g}",
            "EXPERIMENT_DIR": str(experiment_dir),
            "BASE_EXPERIMENTS_DIR": str(settings.base_experiments_dir),
            "GPUS_PER_NODE": str(experiment.gpus_per_node),
            "WORKLOAD": workload.name,
            "FAULTLOOP_PYTHON": sys.executable,
        }
        if not entry.fault.is_control:
            env["FAULT_TYPE"] = entry.fault.value
        for name in ("megatron_repo_host_path", "shared_tmp_base_dir", "workspace_host_path",
                     "container_image"):
            value = getattr(settings, name)
            if value:
                env[name.upper()] = str(value)
        env.update(chosen.env)
        return JobSpec(
            experiment=experiment,
            experiment_dir=experiment_dir,
            script=effective_script(settings, workload, chosen),
            nodes=entry.nodes,
            gpus_per_node=experiment.gpus_per_node,
            time_limit_s=time_limit_seconds(effective_time(settings, workload, chosen)),
            env=env,
            account=settings.account,
            partition=settings.partition,
        )


def effective_fault_delay(settings: Settings, workload: Workload, chosen: Overrides) -> float:
    """Seconds from the iteration anchor to the fault: the test's, the run's, the workload's,
    else 15."""
    for delay in (chosen.fault_delay, settings.fault_delay, workload.fault_delay):
        if delay is not None:
            return delay
    return 15.0


def effective_time(settings: Settings, workload: Workload, chosen: Overrides) -> str:
    return chosen.time or settings.time or workload.time or "00:30:00"


def effective_script(settings: Settings, workload: Workload, chosen: Overrides) -> Path:
    return chosen.sbatch_script or settings.sbatch_script or workload.script


def _standing(result: ExperimentResult) -> int:
    """How much a result tells: a verdict, a finished job without one, or no finished job."""
    if result.broken is None:
        return 2
    return 0 if result.broken == "infrastructure" else 1


def run_invalid_reason(experiment: Experiment, job: Job, artifacts: Artifacts | None) -> str | None:
    """Why the job gives nothing to score (the fault never fired), or None when it does."""
    marker = artifacts.marker if artifacts is not None else None
    state = f"job {job.job_id} ended {job.state.value}" + (
        f" (exit {job.exit_code})" if job.exit_code else ""
    )
    if experiment.live.fault.is_control:
        if job.state is not JobState.COMPLETED:
            return f"the control run failed: {state}"
        return None
    if marker is None:
        return f"the fault never armed: {state} without fault_injection.json"
    if not marker.fired:
        return f"the fault was armed but never fired: {state}"
    return None
