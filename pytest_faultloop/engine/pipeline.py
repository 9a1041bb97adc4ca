"""An experiment's pipeline, in one place: every path — a live job, a stored job re-scored, a
replayed case, a perturbed copy, a leaderboard configuration — runs these stages, each calling
its hook, and ends in one ``ExperimentResult`` (``broken`` set by the first stage that stops).

Stages: job (in a slot) -> its end state -> artifacts -> the fault's firing -> log and FR
analyses -> verdict; a replayed case starts at its stored artifacts, a leaderboard
configuration at any experiment's artifacts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from functools import partial
from pathlib import Path
from typing import Literal, Protocol

from pytest_faultloop.engine.cost_meter import CostMeter
from pytest_faultloop.engine.run_session import RunSession
from pytest_faultloop.engine.slots import Interrupted
from pytest_faultloop.inputs.cases import joined_logs
from pytest_faultloop.inputs.perturb.catalogue import compositions
from pytest_faultloop.inputs.perturb.copies import perturbed_artifacts
from pytest_faultloop.inputs.perturb.perturbation import NotApplicable
from pytest_faultloop.jobs.backends.protocol import JobSpec
from pytest_faultloop.models import (
    Artifacts,
    Attempt,
    BrokenKind,
    Experiment,
    ExperimentResult,
    FrAnalysis,
    Job,
    JobState,
    LogAnalysis,
    Verdict,
)
from pytest_faultloop.models.errors import ConfigError, FaultloopError
from pytest_faultloop.store.artifacts import read_marker, read_rank_markers, refuse_linked
from pytest_faultloop.store.session_dir import SessionDir
from pytest_faultloop.store.stored_files import LinkRefused

INFRASTRUCTURE_STATES = {
    JobState.SUBMIT_FAILED: "the scheduler refused the job",
    JobState.NODE_FAIL: "a node failed under the job",
    JobState.BOOT_FAIL: "the job's nodes failed to boot",
    JobState.CANCELLED: "the job was cancelled before it ended",
    JobState.UNKNOWN: "the job's end state is unknown",
}
REUSABLE_STATES = (
    set(JobState)
    - set(INFRASTRUCTURE_STATES)
    - {
        JobState.PENDING,
        JobState.RUNNING,
        JobState.COMPLETING,
    }
)
StageName = Literal["job", "artifacts", "analyses", "judge"]
"""The stages that call out (a hook, the scheduler, a user's analyzer): where breakage comes
from."""
_SCORED_PARTS = ("log_analysis", "fr_analysis", "verdict", "broken", "reason", "costs")
"""A scoring's outcome (analyses, verdict, breakage, costs): cleared before a stored job is
scored afresh."""


class Broken(Exception):
    """A stage cannot go on: the experiment has no valid run to score (its items ERROR).

    ``update`` holds what the stage produced before it stopped (e.g. its costs); the pipeline
    records it with the breakage.
    """

    def __init__(
        self, kind: BrokenKind, reason: str, update: Mapping[str, object] | None = None
    ) -> None:
        super().__init__(f"{kind}: {reason}")
        self.kind: BrokenKind = kind
        self.reason = reason
        self.update = dict(update or {})


def broken_by(
    stage: StageName, exc: Exception, update: Mapping[str, object] | None = None
) -> Broken:
    """The breakage an exception stands for, the same for every path through the stages:
    an interrupted wait for a slot is the infrastructure's; an unreadable artifact (a marker,
    a perturbed copy) or any failure of an analyzer is ``analysis_failed``; any failure of the
    judge is ``judge_failed`` (its own ``reason`` when it gives one)."""
    if isinstance(exc, Broken):
        return exc
    if isinstance(exc, Interrupted):
        return Broken("infrastructure", "the run was interrupted before the job started", update)
    if stage == "judge":
        reason = getattr(exc, "reason", None) or f"{type(exc).__name__}: {exc}"
        return Broken("judge_failed", str(reason), update)
    if stage == "analyses":
        return Broken("analysis_failed", f"{type(exc).__name__}: {exc}", update)
    return Broken("analysis_failed", str(exc), update)


Stage = Callable[[ExperimentResult], ExperimentResult]
"""One step of an experiment's pipeline: the result so far, with this step's part added."""


def run_stages(result: ExperimentResult, *stages: Stage) -> ExperimentResult:
    """Run the stages in order; the first that cannot go on ends the experiment, recorded
    with what the earlier stages produced."""
    for stage in stages:
        try:
            result = stage(result)
        except Broken as broken:
            return result.model_copy(
                update={**broken.update, "broken": broken.kind, "reason": broken.reason}
            )
    return result


class StageCalls(Protocol):
    """How the pipeline reaches each stage's implementation: a run's pytest hooks (a conftest
    may replace any), or the built-in stages themselves (the leaderboard)."""

    def run_job(self, spec: JobSpec, submitted: Callable[[Job], None]) -> Job | None: ...

    def collect_artifacts(
        self, experiment: Experiment, job: Job, experiment_dir: Path
    ) -> Artifacts | None: ...

    def analyze_log(self, experiment: Experiment, artifacts: Artifacts) -> LogAnalysis | None: ...

    def analyze_fr(self, experiment: Experiment, artifacts: Artifacts) -> FrAnalysis | None: ...

    def judge(
        self,
        experiment: Experiment,
        artifacts: Artifacts,
        log_analysis: LogAnalysis,
        fr_analysis: FrAnalysis,
    ) -> Verdict | None: ...

    def stamp(self, result: ExperimentResult) -> ExperimentResult:
        """The result with the policy hash and the fingerprint of the stages that answered."""
        ...


class Pipeline:
    """Every stage of an experiment and its call; the entry points differ only in where
    they start. ``session``: where jobs, their records and scratch files are written (None:
    the caller gives artifacts and runs no job)."""

    def __init__(self, calls: StageCalls, session: RunSession | None = None) -> None:
        self.calls = calls
        self.session = session

    # -- entry points: each returns the stamped result ----------------------------------------

    def live(
        self,
        spec: JobSpec,
        slot: Callable[[], AbstractContextManager[object]],
        attempts: Sequence[Attempt] = (),
    ) -> ExperimentResult:
        """A job run now (``slot``: held while it runs; it raises Interrupted when the run
        stops first), then the finished job's stages. ``attempts``: the experiment's earlier
        jobs, kept in the record made when this one is submitted."""

        ledger = self._run_session.ledger

        def job(result: ExperimentResult) -> ExperimentResult:
            submitted = partial(ledger.job_submitted, experiment=spec.experiment, attempts=attempts)
            try:
                with slot():
                    ran = self.calls.run_job(spec, submitted)
            except Interrupted as exc:
                raise broken_by("job", exc) from None
            if ran is None:
                raise Broken(
                    "infrastructure", "no pytest_faultloop_run_job implementation returned a job"
                )
            ledger.job_submitted(
                ran, spec.experiment, attempts
            )  # once per job id: a no-op when told
            return result.model_copy(update={"job": ran})

        return self._stamped(ExperimentResult(experiment=spec.experiment), job, *self._finished)

    def rescored(self, experiment: Experiment, stored: ExperimentResult | None) -> ExperimentResult:
        """A re-analysis: the job the session stored, through the finished job's stages."""

        def stored_job(result: ExperimentResult) -> ExperimentResult:
            if stored is None or stored.job is None:
                where = f" in {self.session.directory.path}" if self.session is not None else ""
                raise Broken(
                    "infrastructure",
                    f"--faultloop-reanalyze: no stored job for {experiment.key}{where}",
                )
            return _unscored(stored).model_copy(update={"experiment": experiment})

        return self._stamped(ExperimentResult(experiment=experiment), stored_job, *self._finished)

    def evaluated(self, stored: ExperimentResult) -> ExperimentResult:
        """A stored finished job without a verdict, scored afresh."""
        return self._stamped(_unscored(stored), *self._finished)

    def replayed(self, experiment: Experiment) -> ExperimentResult:
        """A stored case: its artifacts through the analyzers and the judge, no job."""
        return self._stamped(
            ExperimentResult(experiment=experiment), self._case_artifacts, *self._scoring
        )

    def perturbed(self, experiment: Experiment, unperturbed: ExperimentResult) -> ExperimentResult:
        """The unperturbed experiment's artifacts, rewritten by the perturbation, through the
        analyzers and the judge."""

        def rewritten(result: ExperimentResult) -> ExperimentResult:
            assert experiment.perturbation is not None
            if (
                unperturbed.broken in ("infrastructure", "run_invalid")
                or unperturbed.artifacts is None
            ):
                kind = unperturbed.broken or "analysis_failed"
                raise Broken(
                    kind, f"the unperturbed {unperturbed.experiment.key}: {unperturbed.reason}"
                )
            (composition,) = compositions(experiment.perturbation)
            into = self._directory.prepare(experiment)
            try:
                artifacts = perturbed_artifacts(
                    unperturbed.artifacts, composition, into, experiment
                )
            except (NotApplicable, LinkRefused, OSError) as exc:
                raise broken_by("artifacts", exc) from None
            return result.model_copy(update={"artifacts": artifacts})

        start = ExperimentResult(experiment=experiment, job=unperturbed.job)
        return self._stamped(start, rewritten, *self._scoring)

    def on_artifacts(self, experiment: Experiment, artifacts: Artifacts) -> ExperimentResult:
        """Given artifacts through the analyzers and the judge (a leaderboard's
        configuration re-scoring a stored session)."""
        return self._stamped(
            ExperimentResult(experiment=experiment, artifacts=artifacts), *self._scoring
        )

    # -- the stages ---------------------------------------------------------------------------

    @property
    def _finished(self) -> tuple[Stage, ...]:
        """A finished job's stages: its end state, artifacts, the fault's firing, analyses,
        verdict."""
        return (job_ended, self._artifacts, fault_fired, *self._scoring)

    @property
    def _scoring(self) -> tuple[Stage, ...]:
        return (unlinked, self._analyses, self._verdict)

    @property
    def _run_session(self) -> RunSession:
        if self.session is None:
            raise ConfigError("this pipeline runs no job and writes no session (a leaderboard)")
        return self.session

    @property
    def _directory(self) -> SessionDir:
        return self._run_session.directory

    def _stamped(self, result: ExperimentResult, *stages: Stage) -> ExperimentResult:
        return self.calls.stamp(run_stages(result, *stages))

    def _artifacts(self, result: ExperimentResult) -> ExperimentResult:
        assert result.job is not None
        try:
            artifacts = self.calls.collect_artifacts(
                result.experiment, result.job, self._directory.experiment_dir(result.experiment)
            )
        except FaultloopError as exc:  # an unreadable marker, a link: the run is not scored
            raise broken_by("artifacts", exc) from None
        return result.model_copy(update={"artifacts": artifacts})

    def _case_artifacts(self, result: ExperimentResult) -> ExperimentResult:
        case = result.experiment.case
        assert case is not None
        try:
            marker = read_marker(case.directory)
            rank_markers = read_rank_markers(case.directory)
        except FaultloopError as exc:
            raise broken_by("artifacts", exc) from None
        log = case.logs[0]
        if len(case.logs) > 1:
            log = joined_logs(case.logs, self._directory.prepare(result.experiment) / "logs")
        artifacts = Artifacts(
            experiment_dir=case.directory,
            log=log,
            fr_dir=case.dumps,
            marker=marker,
            rank_markers=rank_markers,
        )
        return result.model_copy(update={"artifacts": artifacts})

    def _analyses(self, result: ExperimentResult) -> ExperimentResult:
        """The log and FR analyses (a user's analyzer may fail: the pool goes on), each
        metered into the result's costs (kept when the stage breaks)."""
        artifacts, meter = result.artifacts, CostMeter()
        assert artifacts is not None
        try:
            with meter.stage("log"):
                log_analysis = self.calls.analyze_log(result.experiment, artifacts)
            with meter.stage("fr"):
                fr_analysis = self.calls.analyze_fr(result.experiment, artifacts)
        except Exception as exc:
            raise broken_by("analyses", exc, {"costs": meter.costs}) from None
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
        assert result.artifacts is not None
        assert result.log_analysis is not None and result.fr_analysis is not None
        try:
            with meter.stage("judge"):
                verdict = self.calls.judge(
                    result.experiment, result.artifacts, result.log_analysis, result.fr_analysis
                )
        except Exception as exc:
            raise broken_by("judge", exc, {"costs": meter.costs}) from None
        if verdict is None:
            reason = "no pytest_faultloop_judge implementation answered"
            raise Broken("judge_failed", reason, {"costs": meter.costs})
        meter.usage("judge", verdict.usage)
        return result.model_copy(update={"verdict": verdict, "costs": meter.costs})


def _unscored(stored: ExperimentResult) -> ExperimentResult:
    return stored.model_copy(update=dict.fromkeys(_SCORED_PARTS))


def job_ended(result: ExperimentResult) -> ExperimentResult:
    """The job ended on its own (not left running, not lost to the infrastructure)."""
    job = result.job
    assert job is not None
    if job.state.active:
        raise Broken(
            "infrastructure",
            f"job {job.job_id} is still {job.state.value} (left "
            "running); continue with --faultloop-session",
        )
    if job.state in INFRASTRUCTURE_STATES:
        detail = f": {job.reason}" if job.reason else ""
        raise Broken(
            "infrastructure",
            f"job {job.job_id} {job.state.value}: {INFRASTRUCTURE_STATES[job.state]}{detail}",
        )
    return result


def unlinked(result: ExperimentResult) -> ExperimentResult:
    """The analyzers and the judge read the artifacts themselves, never through a symbolic
    link (whoever located them: a hook, a stored case, a leaderboard's stored result)."""
    assert result.artifacts is not None
    try:
        refuse_linked(result.artifacts)
    except LinkRefused as exc:
        raise broken_by("artifacts", exc) from None
    return result


def fault_fired(result: ExperimentResult) -> ExperimentResult:
    assert result.job is not None
    invalid = run_invalid_reason(result.experiment, result.job, result.artifacts)
    if invalid:
        raise Broken("run_invalid", invalid)
    return result


def standing(result: ExperimentResult) -> int:
    """How much a result tells: a verdict, a finished job without one, or no finished job."""
    if result.broken is None:
        return 2
    return 0 if result.broken == "infrastructure" else 1


def run_invalid_reason(experiment: Experiment, job: Job, artifacts: Artifacts | None) -> str | None:
    """Why the job gives nothing to score (the fault never fired; on several ranks, one of
    them never acted), or None when it does."""
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
    if artifacts is not None and len(experiment.live.ranks) > 1:
        why = _not_acted(experiment, artifacts)
        return f"{why}: {state}" if why else None
    return None


def _not_acted(experiment: Experiment, artifacts: Artifacts) -> str | None:
    """On a fault of several ranks, why a listed rank's fault did not act (the first such)."""
    markers = {m.rank: m for m in artifacts.markers}
    for rank in experiment.live.ranks:
        marker = markers.get(rank)
        if marker is None:
            return f"rank {rank}'s fault never armed"
        if not marker.fired:
            return f"rank {rank}'s fault was armed but never fired"
        if marker.acted_at is None:
            return f"rank {rank}'s fault fired but never acted (a peer's failure ended it first)"
    return None
