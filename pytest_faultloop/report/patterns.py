"""The seed's failure-mode patterns (Step 5), recognised in scored verdicts."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pytest_faultloop.models import ExperimentResult, Verdict
from pytest_faultloop.models.faults import FaultGroup, FaultType
from pytest_faultloop.scoring.pass_rule import scored_verdict


@dataclass(frozen=True)
class Pattern:
    name: str
    """The pattern in the seed's words, e.g. ``rank_primary=false, rank_any=true``."""
    interpretation: str
    matches: Callable[[ExperimentResult, Verdict], bool]


@dataclass(frozen=True)
class PatternMatch:
    pattern: Pattern
    experiments: tuple[str, ...]
    """Keys of the experiments that show the pattern, in report order."""


PATTERNS: tuple[Pattern, ...] = (
    Pattern(
        "rank_primary=false, rank_any=true",
        "rank detected but treated as collateral: the analyzer lists it among secondary issues",
        lambda r, v: v.rank_primary == "false" and v.rank_any == "true",
    ),
    Pattern(
        "rank_any=false for rank 0",
        "rank-0 hang silences the watchdog on the other ranks: the analyzer lacks a rank-0 signal",
        lambda r, v: (
            v.rank_any == "false"
            and r.experiment.entry is not None
            and r.experiment.entry.rank == 0
        ),
    ),
    Pattern(
        "fault_described=partial for crash types",
        "crash keywords present but the fault type not specifically named",
        lambda r, v: (
            v.fault_described == "partial"
            and r.experiment.entry is not None
            and r.experiment.entry.fault.spec.group is FaultGroup.CRASH
        ),
    ),
    Pattern(
        "restart_correct=false for GPU_ERROR",
        "hardware GPU error conflated with a recoverable hang",
        lambda r, v: (
            v.restart_correct == "false"
            and r.experiment.entry is not None
            and r.experiment.entry.fault is FaultType.GPU_ERROR
        ),
    ),
    Pattern(
        "fr_rank_correct=no_dumps",
        "watchdog did not fire before the job ended — lower the heartbeat timeout "
        "(TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC)",
        lambda r, v: v.fr_rank_correct == "no_dumps",
    ),
    Pattern(
        "fr_rank_correct=node",
        "FR isolated the GPUS_PER_NODE rank block holding the injected rank, but not the rank",
        lambda r, v: v.fr_rank_correct == "node",
    ),
    Pattern(
        "fr_rank_correct=segment",
        "FR isolated the FR_SEGMENT_SIZE rank block holding the injected rank, "
        "but not its node or the rank",
        lambda r, v: v.fr_rank_correct == "segment",
    ),
)


def detect_patterns(results: Sequence[ExperimentResult]) -> list[PatternMatch]:
    """The patterns shown by at least one scored experiment, in the seed's order."""
    matches = []
    for pattern in PATTERNS:
        keys = tuple(
            r.experiment.key
            for r in results
            if (verdict := scored_verdict(r)) is not None and pattern.matches(r, verdict)
        )
        if keys:
            matches.append(PatternMatch(pattern, keys))
    return matches
