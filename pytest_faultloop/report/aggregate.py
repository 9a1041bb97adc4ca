"""The aggregate section after the report's table: pass rates, confusion matrices, patterns."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from pytest_faultloop.models import Experiment, ExperimentResult
from pytest_faultloop.models.faults import Nature
from pytest_faultloop.report.decision_errors import DecisionErrors
from pytest_faultloop.report.mdtable import escape_cell, table
from pytest_faultloop.report.patterns import detect_patterns
from pytest_faultloop.report.stats import clustered_rate, rate_text, wilson
from pytest_faultloop.report.trials import trials_section
from pytest_faultloop.scoring.dimensions import DIMENSION_NAMES
from pytest_faultloop.scoring.pass_rule import DEFAULT_RULE, PassRule, scored_verdict
from pytest_faultloop.scoring.truth import expected_nature

RANK_POSITIONS = ("0", "1", "mid", "last", "other", "several", "-")
NO_PRIMARY = "(no primary issue)"


@dataclass(frozen=True)
class Rate:
    passed: int = 0
    total: int = 0
    """Scored runs to which the dimension applied."""
    clusters: tuple[tuple[int, int], ...] = field(default=(), compare=False)
    """``(passed, total)`` per experiment: its trials are not independent draws (only the
    interval reads it)."""

    @property
    def interval(self) -> tuple[float, float]:
        """95 % interval of the rate: Wilson, clustered by experiment when repeated."""
        if not self.clusters:
            return wilson(self.passed, self.total)
        _, low, high = clustered_rate(list(self.clusters))
        return low, high

    def __str__(self) -> str:
        return rate_text(self.passed, self.total, self.interval if self.total else None)


@dataclass
class Tally:
    """How many experiments were scored, and which were counted apart (by key)."""

    total: int = 0
    scored: int = 0
    invalid_runs: list[str] = field(default_factory=list)
    analysis_failures: list[str] = field(default_factory=list)
    judge_errors: list[str] = field(default_factory=list)
    attribution_misses: list[str] = field(default_factory=list)
    """Valid runs of an injected fault where the log analyzer named no issue at all."""


def rank_position(experiment: Experiment) -> str:
    """``0``, ``1``, ``mid`` (world_size // 2), ``last`` (world_size - 1) or ``other``;
    ``several`` for a fault on several ranks; ``-`` for a real incident (no injected rank)."""
    if experiment.entry is None or experiment.world_size is None:
        return "-"
    if len(experiment.entry.ranks) > 1:
        return "several"
    rank, world = experiment.entry.rank, experiment.world_size
    for position, where in (("0", 0), ("1", 1), ("mid", world // 2), ("last", world - 1)):
        if rank == where:
            return position
    return "other"


def corpus_of(result: ExperimentResult) -> str:
    """The corpus of a replayed case with its split (``public dev``), ``live`` for an
    experiment that ran a job."""
    case = result.experiment.case
    if case is None:
        return "live"
    return f"{case.corpus} {case.split}" if case.split else case.corpus


def tally(results: Sequence[ExperimentResult]) -> Tally:
    counts = Tally(total=len(results))
    for result in results:
        key = result.experiment.key
        if not result.run_valid:
            counts.invalid_runs.append(key)
        elif result.broken == "analysis_failed":
            counts.analysis_failures.append(key)
        elif result.broken == "judge_failed":
            counts.judge_errors.append(key)
        counts.scored += scored_verdict(result) is not None
        analysis = result.log_analysis
        if (
            result.run_valid
            and analysis is not None
            and expected_nature(result.experiment) is not Nature.NONE
            and not analysis.primary
            and not analysis.secondary
        ):
            counts.attribution_misses.append(key)
    return counts


@dataclass(frozen=True)
class GroupRates:
    experiments: int
    scored: int
    rates: dict[str, Rate]
    """Dimension -> pass rate over the group's scored experiments."""


def pass_rates(
    results: Sequence[ExperimentResult],
    group: Callable[[ExperimentResult], str],
    rule: PassRule = DEFAULT_RULE,
    cells: Mapping[str, set[str]] | None = None,
) -> dict[str, GroupRates]:
    """Pass rates per group and dimension; groups in first-appearance order. ``cells``
    (experiment base key -> dimensions): only those dimensions of the experiments it names."""
    members: dict[str, list[ExperimentResult]] = {}
    for result in results:
        members.setdefault(group(result), []).append(result)
    return {name: _group_rates(grouped, rule, cells or {}) for name, grouped in members.items()}


def _group_rates(
    results: Sequence[ExperimentResult], rule: PassRule, cells: Mapping[str, set[str]]
) -> GroupRates:
    outcomes: dict[str, dict[str, Counter[bool]]] = {d: {} for d in DIMENSION_NAMES}
    scored = 0
    for result in results:
        verdict = scored_verdict(result)
        if verdict is None:
            continue
        scored += 1
        selected = cells.get(result.experiment.base_key, DIMENSION_NAMES)
        for dimension in (d for d in DIMENSION_NAMES if d in selected):
            passed = rule.passes(dimension, verdict.value(dimension))
            if passed is not None:
                cluster = outcomes[dimension].setdefault(result.experiment.base_key, Counter())
                cluster[passed] += 1
    rates = {}
    for dimension, by_experiment in outcomes.items():
        clusters = tuple((c[True], c[True] + c[False]) for c in by_experiment.values())
        rates[dimension] = Rate(sum(k for k, _ in clusters), sum(n for _, n in clusters), clusters)
    return GroupRates(len(results), scored, rates)


@dataclass(frozen=True)
class WorkloadRates:
    """One workload's pass rates, and how long its jobs ran."""

    rates: GroupRates
    job_seconds: tuple[float, ...]
    """Each of its jobs that recorded a start and an end (a replayed case runs none)."""

    @property
    def median_job(self) -> str:
        """``41.3 (6 jobs)``: the median seconds and how many jobs it is taken over."""
        if not self.job_seconds:
            return "—"
        count = len(self.job_seconds)
        return f"{statistics.median(self.job_seconds):.1f} ({count} job{'s' * (count != 1)})"


def by_workload(
    results: Sequence[ExperimentResult], rule: PassRule = DEFAULT_RULE
) -> dict[str, WorkloadRates]:
    """Pass rates and job times per workload (the framework the job ran on), in
    first-appearance order; empty when the results ran on one workload only (nothing to
    break down)."""
    groups = pass_rates(results, lambda r: r.experiment.workload, rule)
    if len(groups) < 2:
        return {}
    seconds: dict[str, list[float]] = {}
    for result in results:
        elapsed = result.job.elapsed if result.job is not None else None
        if elapsed is not None:
            seconds.setdefault(result.experiment.workload, []).append(elapsed)
    return {name: WorkloadRates(g, tuple(seconds.get(name, ()))) for name, g in groups.items()}


def nature_confusion(results: Sequence[ExperimentResult]) -> Counter[tuple[Nature, str]]:
    """(fault's headline nature, first primary issue's nature) counts over scored experiments."""
    matrix: Counter[tuple[Nature, str]] = Counter()
    for result in results:
        if scored_verdict(result) is None or result.log_analysis is None:
            continue
        primary = result.log_analysis.primary
        attributed = primary[0].nature.value if primary else NO_PRIMARY
        matrix[expected_nature(result.experiment), attributed] += 1
    return matrix


def aggregate_section(
    results: Sequence[ExperimentResult],
    rule: PassRule = DEFAULT_RULE,
    *,
    unreadable: Sequence[str] = (),
) -> str:
    """The markdown after the table; ``unreadable`` lists result files that could not be loaded."""
    lines = ["## Aggregate", "", f"Pass rule: {rule.describe()}.", ""]
    lines += _tally_lines(tally(results), unreadable)
    lines += [
        "",
        "Rates read `passed/applicable (rate%, low–high)`: the 95 % interval is Wilson's, "
        "clustered by experiment when experiments were repeated (their trials are not "
        "independent draws).",
    ]
    trials = trials_section(results, rule)
    if trials:
        lines += ["", trials.rstrip()]
    by_fault = pass_rates(results, lambda r: r.experiment.columns.fault, rule)
    by_fault["**all**"] = _group_rates(results, rule, {})
    by_nodes = pass_rates(results, lambda r: r.experiment.columns.nodes, rule)
    by_position = pass_rates(results, lambda r: rank_position(r.experiment), rule)
    lines += ["", "### Pass rate by fault type", "", *_rate_table("FAULT_TYPE", by_fault)]
    lines += ["", "### Pass rate by node count", ""]
    ordered = sorted(by_nodes, key=lambda n: (not n.isdigit(), int(n) if n.isdigit() else 0, n))
    lines += _rate_table("NODES", {n: by_nodes[n] for n in ordered})
    lines += ["", "### Pass rate by rank position", ""]
    several = ", several (a fault on several ranks)" if "several" in by_position else ""
    lines += [
        f"Positions: 0, 1, mid = world_size // 2, last = world_size - 1, other{several}; "
        "- for real incidents (no injected rank).",
        "",
    ]
    lines += _rate_table("RANK", {p: by_position[p] for p in RANK_POSITIONS if p in by_position})
    lines += _workload_lines(by_workload(results, rule))
    if any(r.experiment.case is not None for r in results):
        by_corpus = pass_rates(results, corpus_of, rule)
        lines += ["", "### Pass rate by corpus", ""]
        lines += [
            "Replayed cases by the corpus directory that holds them and their split (`dev`: "
            "the cases rules may be written against; `test`: held out to measure them); "
            "`live`: injected runs.",
            "",
        ]
        lines += _rate_table("CORPUS", by_corpus)
    lines += ["", "### Restart decision: expected vs decided", ""]
    lines += DecisionErrors.of(results).markdown()
    lines += ["", "### Fault nature: fault vs primary issue", ""]
    lines += _nature_lines(nature_confusion(results))
    lines += ["", "### Failure-mode patterns", "", *_pattern_lines(results)]
    return "\n".join(lines) + "\n"


def _keys(keys: Sequence[str]) -> str:
    return f"{len(keys)}" + (f" ({', '.join(f'`{k}`' for k in keys)})" if keys else "")


def _tally_lines(counts: Tally, unreadable: Sequence[str]) -> list[str]:
    lines = [
        f"- Experiments: {counts.total}",
        f"- Scored (counted in the rates): {counts.scored}",
        f"- Invalid runs: {_keys(counts.invalid_runs)}",
        f"- Analysis failures: {_keys(counts.analysis_failures)}",
        f"- Judge errors: {_keys(counts.judge_errors)}",
        "- Attribution misses (valid run, the analyzer named no issue; kept in the rates): "
        + _keys(counts.attribution_misses),
    ]
    if unreadable:
        lines.append(f"- Unreadable results: {len(unreadable)}")
        lines += [f"  - {escape_cell(line)}" for line in unreadable]
    return lines


def _rate_table(label: str, groups: dict[str, GroupRates]) -> list[str]:
    rows = [
        (name, f"{g.scored}/{g.experiments}", *(str(g.rates[d]) for d in DIMENSION_NAMES))
        for name, g in groups.items()
    ]
    return table((label, "scored", *DIMENSION_NAMES), rows)


def _workload_lines(workloads: dict[str, WorkloadRates]) -> list[str]:
    """``### Pass rate by workload`` ([] for a session on one workload: its report stays as it
    was)."""
    if not workloads:
        return []
    rows = [
        (
            name,
            f"{w.rates.scored}/{w.rates.experiments}",
            *(str(w.rates.rates[d]) for d in DIMENSION_NAMES),
            w.median_job,
        )
        for name, w in workloads.items()
    ]
    return [
        "",
        "### Pass rate by workload",
        "",
        "The framework each job ran on (the experiment's workload); median job s: from the "
        "job's start to its end, over the workload's jobs that recorded both.",
        "",
        *table(("WORKLOAD", "scored", *DIMENSION_NAMES, "median job s"), rows),
    ]


def _nature_lines(matrix: Counter[tuple[Nature, str]]) -> list[str]:
    if not matrix:
        return ["No scored experiment with a log analysis."]
    faults = [n for n in Nature if any(f is n for f, _ in matrix)]
    attributed = [n.value for n in Nature if any(a == n.value for _, a in matrix)]
    attributed += [NO_PRIMARY] if any(a == NO_PRIMARY for _, a in matrix) else []
    rows = [(f.value, *(matrix[f, a] for a in attributed)) for f in faults]
    return table(("fault \\ attributed", *attributed), rows)


def _pattern_lines(results: Sequence[ExperimentResult]) -> list[str]:
    matches = detect_patterns(results)
    if not matches:
        return ["No known failure-mode pattern found."]
    rows = [
        (m.pattern.name, len(m.experiments), ", ".join(m.experiments), m.pattern.interpretation)
        for m in matches
    ]
    return table(("Pattern", "Count", "Experiments", "Interpretation"), rows)
