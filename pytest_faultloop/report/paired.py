"""Paired run-over-run comparison: per dimension, the cells that improved, regressed or stayed,
and whether that change is distinguishable from chance (exact McNemar test)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pytest_faultloop.report.history import MIXED, Cell, CellChange, HistoryRecord
from pytest_faultloop.report.mdtable import table
from pytest_faultloop.report.stats import mcnemar_exact
from pytest_faultloop.scoring.dimensions import DIMENSION_NAMES
from pytest_faultloop.scoring.pass_rule import DEFAULT_RULE, PassRule

ALPHA = 0.05
"""Significance level of "distinguishable from chance"."""
OVERALL = "overall"
"""The pseudo-dimension of whole cells: a cell passes when no dimension fails."""


@dataclass(frozen=True)
class DimensionChange:
    """Paired counts of one dimension; N/A cells (in either run) are left out."""

    dimension: str
    improved: int
    regressed: int
    same: int

    @property
    def p_value(self) -> float:
        return mcnemar_exact(self.regressed, self.improved)

    @property
    def distinguishable(self) -> bool:
        return self.p_value < ALPHA

    def verdict(self) -> str:
        return ("" if self.distinguishable else "not ") + "distinguishable from chance"

    def describe(self) -> str:
        """``rank_primary: 5 improved, 0 regressed, 29 same; McNemar p=0.0625: not …``."""
        return (
            f"{self.dimension}: {self.improved} improved, {self.regressed} regressed, "
            f"{self.same} same; McNemar p={self.p_value:.4g}: {self.verdict()}"
        )


@dataclass(frozen=True)
class PairedComparison:
    before: str
    after: str
    paired: int
    """Cells scored in both runs (matched by experiment key)."""
    dimensions: tuple[DimensionChange, ...]
    overall: DimensionChange
    changes: tuple[tuple[str, CellChange], ...]
    """``("improved" | "regressed", change)`` per cell and dimension that changed."""

    def describe(self, limit: int = 20) -> list[str]:
        """The header, one line per dimension, the overall line and the changed cells."""
        lines = [f"compared {self.before} -> {self.after}: {self.paired} cell(s) scored in both"]
        lines += [d.describe() for d in (*self.dimensions, self.overall)]
        shown = [
            f"  {kind}: {c.cell} {c.dimension}: {c.before} -> {c.after}"
            for kind, c in self.changes[:limit]
        ]
        if len(self.changes) > limit:
            shown.append(f"  ... and {len(self.changes) - limit} more change(s)")
        return lines + shown

    def table(self) -> list[str]:
        """A Markdown table: one row per dimension and the overall row."""
        rows = [
            (d.dimension, d.improved, d.regressed, d.same, f"{d.p_value:.4g}", d.verdict())
            for d in (*self.dimensions, self.overall)
        ]
        header = ("dimension", "improved", "regressed", "same", "McNemar p", f"at {ALPHA}")
        return table(header, rows)


def paired_cells(
    before: Mapping[str, Cell],
    after: Mapping[str, Cell],
    rule: PassRule = DEFAULT_RULE,
    *,
    names: tuple[str, str] = ("before", "after"),
) -> PairedComparison:
    """Match the cells scored in both runs by key and count, per dimension, the pass/fail
    transitions under ``rule``; a whole cell passes when none of its dimensions fails."""
    keys = [k for k, c in after.items() if c.scored and before.get(k, Cell()).scored]
    counts = {d: [0, 0, 0] for d in (*DIMENSION_NAMES, OVERALL)}  # improved, regressed, same
    changes: list[tuple[str, CellChange]] = []
    for key in keys:
        was_values, now_values = before[key].values, after[key].values
        was_all = now_all = True
        for dimension in DIMENSION_NAMES:
            was = rule.passes(dimension, was_values[dimension])
            now = rule.passes(dimension, now_values[dimension])
            was_all = was_all and was is not False
            now_all = now_all and now is not False
            if was is None or now is None:
                continue
            kind = _tally(counts[dimension], was, now)
            if kind:
                change = CellChange(key, dimension, was_values[dimension], now_values[dimension])
                changes.append((kind, change))
        _tally(counts[OVERALL], was_all, now_all)
    by_dimension = {d: DimensionChange(d, *counts[d]) for d in counts}
    return PairedComparison(
        names[0],
        names[1],
        len(keys),
        tuple(by_dimension[d] for d in DIMENSION_NAMES),
        by_dimension[OVERALL],
        tuple(changes),
    )


def paired_records(
    before: HistoryRecord, after: HistoryRecord, rule: PassRule = DEFAULT_RULE
) -> PairedComparison:
    """:func:`paired_cells` of two history records, named by their sessions."""
    return paired_cells(before.cells, after.cells, rule, names=(before.session, after.session))


def paired_by_version(
    before: HistoryRecord, after: HistoryRecord, rule: PassRule = DEFAULT_RULE
) -> list[PairedComparison]:
    """:func:`paired_records`, once per pair of analyzer versions where either record holds
    cells several versions scored: a change is told only between cells scored by the same
    two versions, each comparison named by them."""
    if MIXED not in before.fingerprint and MIXED not in after.fingerprint:
        return [paired_records(before, after, rule)]
    groups: dict[tuple[str, str], list[str]] = {}
    for key, cell in after.cells.items():
        was = before.cells.get(key)
        if was is not None and was.scored and cell.scored:
            pair = (was.fingerprint or before.fingerprint, cell.fingerprint or after.fingerprint)
            groups.setdefault(pair, []).append(key)
    if not groups:
        return [paired_records(before, after, rule)]
    return [
        paired_cells(
            {k: before.cells[k] for k in keys},
            {k: after.cells[k] for k in keys},
            rule,
            names=(f"{before.session} [{was}]", f"{after.session} [{now}]"),
        )
        for (was, now), keys in sorted(groups.items())
    ]


def mixed_line(record: HistoryRecord) -> str | None:
    """What to say of a record whose cells several analyzer versions scored (None: one)."""
    if MIXED not in record.fingerprint:
        return None
    counts = {}
    for version in record.fingerprint.split(MIXED):
        counts[version] = sum(c.fingerprint == version for c in record.cells.values() if c.scored)
    shown = ", ".join(f"{v} ({n} cell(s))" for v, n in counts.items())
    return (
        f"{record.session} holds cells scored by {len(counts)} analyzer versions: {shown}; "
        "compared per version"
    )


def _tally(count: list[int], was: bool, now: bool) -> str | None:
    """Add one pair to ``[improved, regressed, same]``; the kind of change, if any."""
    if now and not was:
        count[0] += 1
        return "improved"
    if was and not now:
        count[1] += 1
        return "regressed"
    count[2] += 1
    return None
