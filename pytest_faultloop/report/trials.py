"""Repeated trials: each cell's ``k/N`` over an experiment's trials, ``pass^N`` (every trial
passed), and the flaky cells (passed in some trials, failed in others).

A flaky cell counts as a failure for the stop condition: the history keeps one cell per trial,
and the condition asks every cell to pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pytest_faultloop.models import ExperimentResult
from pytest_faultloop.report.mdtable import table
from pytest_faultloop.report.stats import wilson
from pytest_faultloop.scoring.dimensions import DIMENSION_NAMES
from pytest_faultloop.scoring.pass_rule import PassRule


@dataclass(frozen=True)
class TrialCell:
    """One experiment × dimension over its scored trials (where the dimension applies)."""

    key: str
    dimension: str
    outcomes: tuple[tuple[int, bool], ...]
    """``(trial, passed)`` per scored trial."""

    @property
    def k(self) -> int:
        return sum(passed for _, passed in self.outcomes)

    @property
    def n(self) -> int:
        return len(self.outcomes)

    @property
    def flaky(self) -> bool:
        return 0 < self.k < self.n

    def __str__(self) -> str:
        if not self.n:
            return "—"
        low, high = wilson(self.k, self.n)
        return f"{self.k}/{self.n} [{100 * low:.0f}–{100 * high:.0f}%]"


def trial_cells(results: Sequence[ExperimentResult], rule: PassRule) -> list[TrialCell]:
    """The cells of repeated experiments (those with trials), in report order."""
    by_key: dict[str, list[ExperimentResult]] = {}
    for result in results:
        if result.experiment.trial is not None:
            by_key.setdefault(result.experiment.base_key, []).append(result)
    cells = []
    for key, runs in by_key.items():
        for dimension in DIMENSION_NAMES:
            outcomes = []
            for run in sorted(runs, key=lambda r: r.experiment.trial or 0):
                if run.broken is None and run.verdict is not None:
                    passed = rule.passes(dimension, run.verdict.value(dimension))
                    if passed is not None:
                        outcomes.append((run.experiment.trial or 0, passed))
            cells.append(TrialCell(key, dimension, tuple(outcomes)))
    return cells


def trials_section(results: Sequence[ExperimentResult], rule: PassRule) -> str:
    """``### Trials``: k/N with a Wilson 95 % interval per cell, pass^N, and the flaky cells;
    empty when no experiment was repeated."""
    cells = trial_cells(results, rule)
    if not cells:
        return ""
    by_key: dict[str, dict[str, TrialCell]] = {}
    for cell in cells:
        by_key.setdefault(cell.key, {})[cell.dimension] = cell
    rows = [(key, *(str(row[d]) for d in DIMENSION_NAMES)) for key, row in by_key.items()]
    applying = [c for c in cells if c.n]
    all_passed = sum(c.k == c.n for c in applying)
    steady = [key for key, row in by_key.items() if not any(c.flaky for c in row.values())]
    lines = [
        "### Trials",
        "",
        "Passes of each cell over its scored trials, with a Wilson 95 % interval.",
        "",
        *table(("experiment", *DIMENSION_NAMES), rows),
        "",
        f"pass^N (every trial passed): {all_passed}/{len(applying)} cells.",
        f"Experiments whose trials all agreed on every dimension: {len(steady)}/{len(by_key)}"
        + (
            " (deterministic here: the analyzers and judge gave the same answer each time)."
            if len(steady) == len(by_key)
            else "."
        ),
        "",
        *flaky_lines(cells),
    ]
    return "\n".join(lines) + "\n"


def flaky_lines(cells: Sequence[TrialCell]) -> list[str]:
    """The flaky cells, one line each with the trials that failed."""
    flaky = [c for c in cells if c.flaky]
    if not flaky:
        return ["No flaky cell: every cell passed in all its trials or in none."]
    lines = [f"Flaky cells ({len(flaky)}; each counts as a failure for the stop condition):"]
    for cell in flaky:
        failed = ", ".join(f"#{t}" for t, passed in cell.outcomes if not passed)
        lines.append(f"- `{cell.key}` {cell.dimension}: {cell.k}/{cell.n}, failed in {failed}")
    return lines
