"""The report's "Cost of the analyses": seconds, timeouts and LLM tokens per analysis stage.

p95 is taken by the nearest-rank method: the ⌈0.95·n⌉-th smallest of the n values (with 20
experiments, the 19th; with fewer than 20, the largest).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_faultloop.models import COST_STAGES, CostStage, ExperimentResult, Usage
from pytest_faultloop.report.mdtable import table

TITLE = "## Cost of the analyses"
STAGE_NAMES: dict[CostStage, str] = {"log": "log analysis", "fr": "FR analysis", "judge": "judge"}


@dataclass(frozen=True)
class StageCost:
    """One stage over a session: how many experiments ran it, how long, at what LLM cost."""

    stage: CostStage
    experiments: int
    median_s: float | None
    p95_s: float | None
    timed_out: int
    usages: tuple[Usage, ...] = ()
    """One per experiment whose stage used an LLM."""

    @property
    def tokens_in(self) -> int:
        return sum(u.tokens_in for u in self.usages)

    @property
    def tokens_out(self) -> int:
        return sum(u.tokens_out for u in self.usages)

    @property
    def median_tokens(self) -> tuple[float, float] | None:
        """The median tokens in and out per experiment, ``None`` when no LLM ran."""
        if not self.usages:
            return None
        return (
            statistics.median(u.tokens_in for u in self.usages),
            statistics.median(u.tokens_out for u in self.usages),
        )


def nearest_rank(values: Sequence[float], percent: float) -> float:
    """The nearest-rank percentile: the ⌈percent/100·n⌉-th smallest value (n > 0)."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = max(1, math.ceil(percent / 100 * len(ordered)))
    return ordered[rank - 1]


def stage_costs(results: Sequence[ExperimentResult]) -> list[StageCost]:
    """Each stage's costs over the results that recorded any (older results have none)."""
    costs = [r.costs for r in results if r.costs is not None]
    rows = []
    for stage in COST_STAGES:
        seconds = [s for c in costs if (s := c.seconds(stage)) is not None]
        usages = tuple(u for c in costs if (u := c.usage(stage)) is not None)
        rows.append(
            StageCost(
                stage=stage,
                experiments=len(seconds),
                median_s=statistics.median(seconds) if seconds else None,
                p95_s=nearest_rank(seconds, 95) if seconds else None,
                timed_out=sum(stage in c.timed_out for c in costs),
                usages=usages,
            )
        )
    return rows


def costs_section(results: Sequence[ExperimentResult]) -> str:
    """The markdown section, led by a blank line; empty when no result recorded costs."""
    rows = [row for row in stage_costs(results) if row.experiments]
    if not rows:
        return ""
    header = ("stage", "experiments", "median s", "p95 s", "timed out", "tokens in/out")
    lines = ["", TITLE, "", *table(header, [_cells(row) for row in rows])]
    lines += ["", "p95: nearest rank (the ⌈0.95·n⌉-th smallest time). Tokens: total (median)."]
    return "\n".join(lines) + "\n"


def _cells(row: StageCost) -> list[object]:
    return [
        STAGE_NAMES[row.stage],
        row.experiments,
        _seconds(row.median_s),
        _seconds(row.p95_s),
        row.timed_out,
        _tokens(row),
    ]


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def _tokens(row: StageCost) -> str:
    median = row.median_tokens
    if median is None:
        return "—"
    calls = sum(u.calls for u in row.usages)
    return (
        f"{row.tokens_in} / {row.tokens_out} (median {median[0]:g} / {median[1]:g}; {calls} calls)"
    )
