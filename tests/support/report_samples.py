"""Realistic ``ExperimentResult`` objects for the report and history tests."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from support.verdicts import labels

from pytest_faultloop.models import (
    Artifacts,
    BrokenKind,
    Decision,
    Experiment,
    ExperimentResult,
    FrAnalysis,
    FrGroup,
    Issue,
    Job,
    JobState,
    LogAnalysis,
    PoolEntry,
    Verdict,
)
from pytest_faultloop.models.faults import FaultType, Nature

SEED_RESTART = {
    FaultType.GPU_SLEEP: Decision.RESTART,
    FaultType.GPU_ERROR: Decision.STOP,
    FaultType.SIGKILL: Decision.STOP,
    FaultType.SEGFAULT: Decision.STOP,
    FaultType.LOCK_GIL: Decision.RESTART,
    FaultType.SIGTERM: Decision.RESTART,
    FaultType.NONE: Decision.CONTINUE,
}
DECISION_TEXT = {
    Decision.RESTART: "RESTART IMMEDIATE",
    Decision.STOP: "STOP - DONT RESTART IMMEDIATE",
    Decision.CONTINUE: "ERRORS NOT FOUND",
    Decision.UNKNOWN: "LLM FAILURE",
}


def make_result(
    fault: FaultType,
    rank: int,
    nodes: int = 2,
    *,
    scores: Mapping[str, str] | None = None,
    notes: str = "correct on all dimensions",
    decided: Decision | None = None,
    nature: Nature | None = None,
    named_ranks: tuple[int, ...] | None = None,
    broken: BrokenKind | None = None,
    reason: str | None = None,
    priority: int = 0,
    job_id: str = "1850",
) -> ExperimentResult:
    """One result; ``scores`` its verdict's labels by dimension (``labels(rank_any="false")``;
    default: every dimension passing).

    The log analysis decides ``decided`` (default: the seed's expected decision) and names
    ``named_ranks`` (default: the injected rank) as primary issues of ``nature`` (default: the
    fault's headline nature); an empty ``named_ranks`` is an analyzer that found nothing.
    An invalid run has no analyses; any ``broken`` experiment has no verdict.
    """
    entry = PoolEntry(fault=fault, rank=rank, iter=5, nodes=nodes)
    directory = Path("/exp/session") / entry.dirname
    run_valid = broken not in ("infrastructure", "run_invalid")
    values: dict[str, Any] = dict(labels() if scores is None else scores)
    return ExperimentResult(
        experiment=Experiment(
            entry=entry,
            workload="llama4_scout",
            gpus_per_node=4,
            pool="default",
            source="experiments/default.pool",
            line=priority + 1,
            priority=priority,
        ),
        job=Job(
            job_id=job_id,
            backend="slurm",
            state=JobState.FAILED if run_valid else JobState.TIMEOUT,
            exit_code="1:0",
            experiment_dir=directory,
        ),
        artifacts=Artifacts(
            experiment_dir=directory,
            log=directory / "logs/slurm" / f"{job_id}.0.1.main_workload.log",
            fr_dir=directory / "checkpoints",
        ),
        log_analysis=_log_analysis(fault, rank, decided, nature, named_ranks)
        if run_valid
        else None,
        fr_analysis=_fr_analysis(rank, dumps=values["fr_rank_correct"] != "no_dumps")
        if run_valid
        else None,
        verdict=Verdict(
            **values, notes=notes, judge="deterministic", expected_decision=SEED_RESTART[fault]
        )
        if broken is None
        else None,
        broken=broken,
        reason=reason,
        fingerprint="fp-a",
    )


def _log_analysis(
    fault: FaultType,
    rank: int,
    decided: Decision | None,
    nature: Nature | None,
    named_ranks: tuple[int, ...] | None,
) -> LogAnalysis:
    decision = SEED_RESTART[fault] if decided is None else decided
    ranks = (rank,) if named_ranks is None else named_ranks
    issue_nature = fault.spec.nature if nature is None else nature
    return LogAnalysis(
        analyzer="nvrx_logsage",
        decision=decision,
        decision_text=DECISION_TEXT[decision],
        explanation=f"rank {rank} stopped making progress",
        primary=[Issue(rank=r, nature=issue_nature, summary="culprit") for r in ranks],
        attribution_text=f"Attribution: Primary issues: {list(ranks)}, Secondary issues: []",
    )


def _fr_analysis(rank: int, *, dumps: bool) -> FrAnalysis:
    group = FrGroup(
        pg_id="0",
        desc="default_pg",
        op="allreduce",
        size="8",
        dtype="Float",
        missing_ranks=[rank],
        culprit=True,
    )
    return FrAnalysis(
        analyzer="nvrx_fr",
        suspects=[rank] if dumps else [],
        groups=[group] if dumps else [],
        dumps_read=8 if dumps else 0,
    )
