"""An experiment's pipeline: each stage adds its part to the result, or raises ``Broken`` when
the experiment cannot go on; ``score`` runs the stages and records the first that stops.

Stages: job (in a slot) -> its end state -> artifacts -> the fault's firing -> log and FR
analyses -> verdict; a replayed case starts at its stored artifacts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pytest_faultloop.models import (
    Artifacts,
    BrokenKind,
    Experiment,
    ExperimentResult,
    Job,
    JobState,
)

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


class Broken(Exception):
    """A stage cannot go on: the experiment has no valid run to score (its items ERROR).

    ``update`` holds what the stage produced before it stopped (e.g. its costs); ``score``
    records it with the breakage.
    """

    def __init__(
        self, kind: BrokenKind, reason: str, update: Mapping[str, object] | None = None
    ) -> None:
        super().__init__(f"{kind}: {reason}")
        self.kind: BrokenKind = kind
        self.reason = reason
        self.update = dict(update or {})


Stage = Callable[[ExperimentResult], ExperimentResult]
"""One step of an experiment's pipeline: the result so far, with this step's part added."""


def score(result: ExperimentResult, *stages: Stage) -> ExperimentResult:
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
