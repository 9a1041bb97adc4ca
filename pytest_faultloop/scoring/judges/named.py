"""What an analysis named, read as the deterministic judge reads it, and that beside what the
truth expects: per dimension, the ``named primary rank 3; expected rank 1`` line of a failing
cell, whichever judge scored it."""

from __future__ import annotations

from collections.abc import Iterable

from pytest_faultloop.analyzers.rank_ranges import rank_ranges
from pytest_faultloop.models import (
    Decision,
    ExperimentResult,
    FrAnalysis,
    Issue,
    LogAnalysis,
    Truth,
)
from pytest_faultloop.scoring.judges.mentions import (
    Mentions,
    first_rank,
    mentions,
    node_index,
    primary_section,
)


def decided(analysis: LogAnalysis) -> Decision:
    """The analyzer's decision: its ``decision_text`` when that states one, else ``decision``."""
    return Decision.from_text(analysis.decision_text) or analysis.decision


def headline_issue(analysis: LogAnalysis, culprit: list[int] | None) -> Issue | None:
    """The primary issue about a culprit, else the first: the one whose nature is scored."""
    about_culprit = [i for i in analysis.primary if i.rank in set(culprit or [])]
    return next(iter(about_culprit or analysis.primary), None)


def primary_view(analysis: LogAnalysis) -> tuple[set[int], Mentions, int | None]:
    """The ranks the primary issues name, what their text mentions, and the first rank."""
    primary_text = " ".join(
        [primary_section(analysis.attribution_text), *(i.summary for i in analysis.primary)]
    )
    named = mentions(primary_text)
    ranks = {i.rank for i in analysis.primary if i.rank is not None} | named.ranks
    first = next((i.rank for i in analysis.primary if i.rank is not None), None)
    return ranks, named, first if first is not None else first_rank(primary_text)


def all_text(analysis: LogAnalysis) -> str:
    issues = [*analysis.primary, *analysis.secondary]
    return " ".join([analysis.attribution_text, analysis.explanation, *(i.summary for i in issues)])


def named_ranks(analysis: LogAnalysis) -> set[int]:
    """Every rank named anywhere in the analysis, individually."""
    issues = [*analysis.primary, *analysis.secondary]
    return {i.rank for i in issues if i.rank is not None} | mentions(all_text(analysis)).ranks


def primary_named(analysis: LogAnalysis) -> str:
    """``primary rank 3``, ``primary ranks 3, 1 and node 0`` (first-named rank first), ``rank 1
    outside the primary issues`` or ``no rank``."""
    ranks, found, first = primary_view(analysis)
    ordered = ([first] if first in ranks else []) + sorted(ranks - {first})
    nodes = _node_labels(analysis.primary, found.nodes)
    where = _and(
        _several("rank", ordered),
        *(f"ranks {r.start}-{r.stop - 1}" for r in found.groups),
        _several("node", nodes),
    )
    elsewhere = _several("rank", sorted(named_ranks(analysis) - ranks))
    if where:
        return f"primary {where}" + (f", {elsewhere} elsewhere" if elsewhere else "")
    return f"{elsewhere} outside the primary issues" if elsewhere else "no rank"


def issues_line(analysis: LogAnalysis, width: int = 60) -> str:
    """``primary: rank 3 crash (segfault); secondary: rank 1 hang (stuck)``, summaries cut to
    ``width`` characters; '' without issues."""

    def one(issue: Issue) -> str:
        where = "job" if issue.rank is None else f"rank {issue.rank}"
        where += f" on node {issue.node}" if issue.node else ""
        summary = " ".join(issue.summary.split())
        summary = summary if len(summary) <= width else summary[: width - 1] + "…"
        return f"{where} {issue.nature.value}" + (f" ({summary})" if summary else "")

    parts = [
        f"{kind}: {'; '.join(one(i) for i in issues)}"
        for kind, issues in (("primary", analysis.primary), ("secondary", analysis.secondary))
        if issues
    ]
    return " | ".join(parts)


# --- what each dimension scores, beside what the truth expects ---------------------------------
# One function per dimension (its registry entry names it), each given the result, its two
# analyses and its truth: (``decided STOP``, ``RESTART``), (``named primary rank 3``, ``rank 1``).


def decision_named(
    result: ExperimentResult, log: LogAnalysis, fr: FrAnalysis, truth: Truth
) -> tuple[str, str]:
    verdict = result.verdict
    decision = (verdict.expected_decision if verdict else None) or truth.decision
    made, read = log.decision_text.strip(), decided(log)
    said = f"{made} ({read})" if made and made != read.value else read.value
    return f"decided {said}", decision.value if decision else "no decision"


def primary_rank_named(
    result: ExperimentResult, log: LogAnalysis, fr: FrAnalysis, truth: Truth
) -> tuple[str, str]:
    return f"named {primary_named(log)}", _who(truth, result.experiment.gpus_per_node)


def any_rank_named(
    result: ExperimentResult, log: LogAnalysis, fr: FrAnalysis, truth: Truth
) -> tuple[str, str]:
    issues = [*log.primary, *log.secondary]
    anywhere = _and(
        _several("rank", sorted(named_ranks(log))),
        _several("node", _node_labels(issues, mentions(all_text(log)).nodes)),
    )
    return f"named {anywhere or 'no rank'}", _who(truth, result.experiment.gpus_per_node)


def nature_named(
    result: ExperimentResult, log: LogAnalysis, fr: FrAnalysis, truth: Truth
) -> tuple[str, str]:
    issue = headline_issue(log, truth.culprit)
    said = "nothing (no primary issue)" if issue is None else issue.nature.value
    if issue is not None and issue.rank is not None:
        said += f" (rank {issue.rank})"
    natures = " or ".join(n.value for n in truth.natures)
    neighbours = ", ".join(n.value for n in truth.neighbours)
    return f"described {said}", natures + (f" (partial: {neighbours})" if neighbours else "")


def suspects_named(
    result: ExperimentResult, log: LogAnalysis, fr: FrAnalysis, truth: Truth
) -> tuple[str, str]:
    return _fr_named(fr), _fr_expected(truth.fr_culprit)


def _who(truth: Truth, gpus_per_node: int) -> str:
    """``rank 1``, ``rank 9 or 14``, ``ranks 1 and 2`` (each), ``node 0 (ranks 0-3)``."""
    if truth.culprit is None:
        return "no known culprit"
    if not truth.culprit:
        return "no rank (a clean run)" if truth.clean else "no single rank"
    groups = truth.groups
    if truth.node_names_count:
        return " and ".join(
            f"node {g[0] // gpus_per_node} (ranks {rank_ranges(g)})" for g in groups
        )
    if len(groups) > 1:
        return "ranks " + " and ".join("/".join(map(str, g)) for g in groups)
    return "rank " + " or ".join(map(str, groups[0]))


def _fr_named(fr: FrAnalysis) -> str:
    if fr.no_dumps and not fr.suspects:
        return "FR read no dump"
    suspects = _several("suspect", sorted(set(fr.suspects))) or "no suspect"
    return f"FR named {suspects} ({fr.dumps_read} dumps read)"


def _fr_expected(culprit: list[int] | None) -> str:
    if culprit is None:
        return "no FR expectation"
    if not culprit:
        return "no suspect"
    return (
        f"rank {culprit[0]}"
        if len(culprit) == 1
        else f"suspects within ranks {rank_ranges(culprit)}"
    )


def _node_labels(issues: Iterable[Issue], nodes: set[int]) -> list[str]:
    """Node indices mentioned and the issues' ``node`` labels (an index, else a hostname)."""
    labels = {str(n) for n in nodes}
    for issue in issues:
        if issue.node and issue.node.strip():
            index = node_index(issue.node)
            labels.add(str(index) if index is not None else issue.node.strip())
    return sorted(labels, key=lambda label: (not label.isdigit(), label.zfill(8)))


def _several(noun: str, values: list[int] | list[str]) -> str:
    if not values:
        return ""
    return f"{noun}{'s' if len(values) > 1 else ''} {', '.join(map(str, values))}"


def _and(*parts: str) -> str:
    return " and ".join(p for p in parts if p)
