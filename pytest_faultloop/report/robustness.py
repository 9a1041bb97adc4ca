"""Robustness: the cells whose outcome a perturbation changed, against the same experiment
unperturbed — per perturbation and per analyzer (each dimension scores the log or the FR
analysis: its registry entry's ``analysis``): cells lost (passed before, not after) and gained."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from pytest_faultloop.models import ExperimentResult, Verdict
from pytest_faultloop.report.mdtable import table
from pytest_faultloop.scoring.dimensions import DIMENSION_NAMES, dimension_named
from pytest_faultloop.scoring.pass_rule import DEFAULT_RULE, PassRule, scored_verdict

CellChange = Literal["lost", "gained", "same"]
MAX_LISTED = 12
"""Cells listed by name in a row; the rest are counted."""


@dataclass
class Change:
    """How one perturbation changed one analyzer's cells."""

    perturbation: str
    analyzer: str
    """``log: builtin``, ``FR: cmd:…``: the stage and what answered it."""
    cases: set[str] = field(default_factory=set)
    cells: int = 0
    """Cells compared: the dimension applied before or after."""
    lost: list[str] = field(default_factory=list)
    gained: list[str] = field(default_factory=list)
    unscored: list[str] = field(default_factory=list)
    """Perturbed experiments without a verdict where the unperturbed one had one."""


def split(
    results: Sequence[ExperimentResult],
) -> tuple[list[ExperimentResult], list[ExperimentResult]]:
    """(unperturbed, perturbed) results."""
    plain = [r for r in results if r.experiment.perturbation is None]
    return plain, [r for r in results if r.experiment.perturbation is not None]


def changes(results: Sequence[ExperimentResult], rule: PassRule = DEFAULT_RULE) -> list[Change]:
    """Every perturbed result against its unperturbed one, cell by cell."""
    plain, perturbed = split(results)
    originals = {r.experiment.key: r for r in plain}
    rows: dict[tuple[str, str], Change] = {}
    for result in perturbed:
        experiment = result.experiment
        original = originals.get(experiment.unperturbed.key)
        before = scored_verdict(original) if original is not None else None
        if original is None or before is None:
            continue
        assert experiment.perturbation is not None
        after = scored_verdict(result)
        for dimension in DIMENSION_NAMES:
            change = cell_change(rule, dimension, before, after)
            if change is None and (after is not None or dimension != DIMENSION_NAMES[0]):
                continue
            analyzer = _analyzer(original, dimension)
            row = rows.setdefault(
                (experiment.perturbation, analyzer), Change(experiment.perturbation, analyzer)
            )
            row.cases.add(experiment.unperturbed.key)
            if after is None:
                if dimension == DIMENSION_NAMES[0]:
                    row.unscored.append(f"{experiment.key} ({result.broken}: {result.reason})")
                continue
            row.cells += 1
            cell = f"{experiment.key}::{dimension} {before.value(dimension)} → {after.value(dimension)}"
            if change == "lost":
                row.lost.append(cell)
            elif change == "gained":
                row.gained.append(cell)
    return sorted(rows.values(), key=lambda c: (c.perturbation, c.analyzer))


def cell_change(
    rule: PassRule, dimension: str, before: Verdict, after: Verdict | None
) -> CellChange | None:
    """How a cell fared under a perturbation (``after`` None: the copy was not scored, so it
    passes nothing); None where the dimension applies to neither verdict."""
    was = rule.passes(dimension, before.value(dimension))
    now = rule.passes(dimension, after.value(dimension)) if after else None
    if was is None and now is None:
        return None
    if was and not now:
        return "lost"
    return "gained" if now and not was else "same"


def _analyzer(result: ExperimentResult, dimension: str) -> str:
    if dimension_named(dimension).analysis == "fr":
        return f"FR: {result.fr_analysis.analyzer if result.fr_analysis else '-'}"
    return f"log: {result.log_analysis.analyzer if result.log_analysis else '-'}"


def robustness_section(results: Sequence[ExperimentResult], rule: PassRule = DEFAULT_RULE) -> str:
    """The report's "Robustness" section ('' when the run scored no perturbed copy)."""
    rows = changes(results, rule)
    if not rows:
        return ""
    lost = sum(len(r.lost) for r in rows)
    gained = sum(len(r.gained) for r in rows)
    cells = sum(r.cells for r in rows)
    lines = [
        "## Robustness",
        "",
        "Each perturbed copy against the same experiment unperturbed (`CASE[NAME]`: its "
        "artifacts rewritten by the perturbation `NAME`): cells lost (passed before, not "
        "after) and gained, per perturbation and analyzer.",
        "",
        f"In all: {cells} cells compared, {lost} lost, {gained} gained.",
        "",
        *table(
            ("perturbation", "analyzer", "cases", "cells", "lost", "gained", "which"),
            [
                (
                    r.perturbation,
                    r.analyzer,
                    len(r.cases),
                    r.cells,
                    len(r.lost),
                    len(r.gained),
                    _which(r),
                )
                for r in rows
            ],
        ),
    ]
    return "\n".join(lines) + "\n"


def _which(row: Change) -> str:
    named = [f"lost {c}" for c in row.lost] + [f"gained {c}" for c in row.gained]
    named += [f"unscored {c}" for c in row.unscored]
    shown = "; ".join(named[:MAX_LISTED])
    return shown + (f"; and {len(named) - MAX_LISTED} more" if len(named) > MAX_LISTED else "")


def robustness_line(
    results: Sequence[ExperimentResult], rule: PassRule = DEFAULT_RULE
) -> str | None:
    """One line for the terminal summary (None without perturbed copies)."""
    rows = changes(results, rule)
    if not rows:
        return None
    names = sorted({r.perturbation for r in rows})
    lost = [c for r in rows for c in r.lost]
    gained = sum(len(r.gained) for r in rows)
    unscored = sum(len(r.unscored) for r in rows)
    line = (
        f"robustness: {len(names)} perturbation(s), {sum(r.cells for r in rows)} cells "
        f"compared with the unperturbed: {len(lost)} lost, {gained} gained"
    )
    if unscored:
        line += f", {unscored} perturbed cop{'y' if unscored == 1 else 'ies'} unscored"
    if lost:
        line += " (" + "; ".join(lost[:3]) + ("; …" if len(lost) > 3 else "") + ")"
    return line
