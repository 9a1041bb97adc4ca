"""Build ``JudgeCase``s for judge tests in one line."""

from __future__ import annotations

from pytest_faultloop.models import (
    Decision,
    Experiment,
    FrAnalysis,
    Issue,
    LogAnalysis,
    PoolEntry,
)
from pytest_faultloop.models.faults import FaultType, Nature
from pytest_faultloop.scoring.judges import JudgeCase

DECISION_TEXT = {
    Decision.RESTART: "RESTART IMMEDIATE",
    Decision.STOP: "STOP - DONT RESTART IMMEDIATE",
    Decision.CONTINUE: "ERRORS NOT FOUND",
    Decision.UNKNOWN: "LLM FAILURE",
}


def issue(
    rank: int | None, nature: str = "hang", node: str | None = None, summary: str = ""
) -> Issue:
    return Issue(rank=rank, node=node, nature=Nature(nature), summary=summary)


def case(
    fault: str = "GPU_SLEEP",
    rank: int = 1,
    *,
    nodes: int = 2,
    gpus_per_node: int = 4,
    segment_size: int = 32,
    decision: Decision = Decision.RESTART,
    decision_text: str | None = None,
    primary: list[Issue] | None = None,
    secondary: list[Issue] | None = None,
    attribution_text: str = "",
    suspects: list[int] | None = None,
    dumps_read: int = 8,
    node_host: str | None = None,
    ranks: str | None = None,
    node_hosts: dict[int, str] | None = None,
) -> JudgeCase:
    """``ranks`` (``"1+6"``) makes a fault on several ranks; ``rank`` is then its first."""
    if ranks is None:
        entry = PoolEntry(fault=FaultType(fault), rank=rank, iter=5, nodes=nodes)
    else:
        entry = PoolEntry.of(FaultType(fault), ranks, 5, nodes)
        rank = entry.rank
    experiment = Experiment(
        entry=entry,
        workload="test",
        gpus_per_node=gpus_per_node,
        pool="test",
        source="test.pool",
        line=1,
    )
    analysis = LogAnalysis(
        analyzer="builtin",
        decision=decision,
        decision_text=DECISION_TEXT[decision] if decision_text is None else decision_text,
        primary=[issue(rank)] if primary is None else primary,
        secondary=secondary or [],
        attribution_text=attribution_text,
    )
    fr = FrAnalysis(
        analyzer="builtin",
        suspects=[rank] if suspects is None else suspects,
        dumps_read=dumps_read,
        table="PGID | Process Group Desc | Op Type | Size | Dtype | Missing Ranks",
    )
    return JudgeCase(
        experiment=experiment,
        log_analysis=analysis,
        fr_analysis=fr,
        log_tail="[rank0]: iteration 5 done\n[rank0]: Watchdog caught collective operation timeout",
        gpus_per_node=gpus_per_node,
        segment_size=segment_size,
        node_host=node_host,
        node_hosts=node_hosts or {},
    )
