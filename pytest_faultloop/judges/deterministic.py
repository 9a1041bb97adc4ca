"""The default judge: the five dimensions computed by rule from the analyses and the truth.

The truth (:func:`pytest_faultloop.truth.truth_of`) gives sets of acceptable answers: culprit
ranks C, natures, neighbouring natures, a decision, FR culprits. An injected fault on rank R has
C = {R}, the fault's natures and the policy's decision; a real incident's case says them.

- restart_correct: the analyzer's normalised decision equals the expected one; ``N/A`` when
  none is expected. UNKNOWN, ``NO LOGS`` and ``LLM FAILURE`` are false.
- rank_primary: the first rank the primary issues name (an issue's ``rank``, else the first
  rank in the ``Primary issues:`` text or a primary summary) is in C (true); a rank of C is
  primary but not first, or the primary issues name no rank but locate a culprit's node (an
  issue's ``node``: index, ``nodeN`` or the marker's hostname; or ``node N`` in the text) or a
  rank range holding it (partial); else false. Blaming another rank on the node is false.
  ``N/A`` when C is unknown. With C = {} (no single culprit) it is true when no primary issue
  names a rank.
- rank_any: a rank of C is named individually anywhere in the attribution (issues, text,
  explanation); a range such as ``ranks 0-7`` does not name it. ``N/A`` when C is unknown or
  empty (nothing to find), except for a clean run.
- fault_described: the nature of the primary issue about a culprit (else the first primary
  issue) is acceptable (true), neighbouring or a generic failure (nature ``none``) (partial);
  otherwise, or with no primary issue, false.
- fr_rank_correct: FR suspects lie within the acceptable FR culprits (rank), within one
  culprit's GPUS_PER_NODE block (node) or FR_SEGMENT_SIZE block (segment); no dump read and no
  suspect (no_dumps); else false. ``N/A`` when the truth has no FR culprits (no dumps stored).

A clean run (the NONE control, or a case whose nature is ``none``) reads as "no false alarm":
restart_correct against the expected decision (CONTINUE); rank_primary true when no primary
issue names a rank or node; rank_any true when no rank is named anywhere; fault_described true
when no primary issue describes a failure (all natures ``none``); fr_rank_correct ``rank`` when
FR has no suspects, dumps or not.
"""

from __future__ import annotations

from pytest_faultloop.faults import Nature
from pytest_faultloop.judges.judge import JudgeCase
from pytest_faultloop.judges.mentions import (
    first_rank,
    mentions,
    node_index,
    primary_section,
    same_host,
)
from pytest_faultloop.models import (
    Binary,
    Decision,
    FrScope,
    Graded,
    Issue,
    LogAnalysis,
    RestartCorrect,
    Verdict,
)
from pytest_faultloop.restart_policy import RestartPolicy


def decided(analysis: LogAnalysis) -> Decision:
    """The analyzer's decision: its ``decision_text`` when that states one, else ``decision``."""
    return Decision.from_text(analysis.decision_text) or analysis.decision


class DeterministicJudge:
    name = "deterministic"

    def __init__(self, policy: RestartPolicy) -> None:
        self.policy = policy

    def judge(self, case: JudgeCase) -> Verdict:
        case = case.resolved(self.policy)
        verdict = Verdict(
            restart_correct=restart_correct(case),
            rank_primary=rank_primary(case),
            rank_any=rank_any(case),
            fault_described=fault_described(case),
            fr_rank_correct=fr_rank_correct(case),
            notes="",
            judge=self.name,
            expected_decision=case.expected.decision,
        )
        return verdict.model_copy(update={"notes": notes(case, verdict)})


def restart_correct(case: JudgeCase) -> RestartCorrect:
    expected = case.expected.decision
    if expected is None:
        return "N/A"
    return "true" if decided(case.log_analysis) is expected else "false"


def rank_primary(case: JudgeCase) -> Graded:
    truth, analysis = case.expected, case.log_analysis
    if truth.culprit is None:
        return "N/A"
    primary_text = " ".join(
        [primary_section(analysis.attribution_text), *(i.summary for i in analysis.primary)]
    )
    named = mentions(primary_text)
    ranks = {i.rank for i in analysis.primary if i.rank is not None} | named.ranks
    if not truth.culprit:
        if ranks:
            return "false"
        blamed = named.groups or named.nodes or _nodes(analysis.primary)
        return "false" if truth.clean and blamed else "true"
    culprits = set(truth.culprit)
    first = next((i.rank for i in analysis.primary if i.rank is not None), None)
    if first is None:
        first = first_rank(primary_text)
    if first in culprits:
        return "true"
    if culprits & ranks:
        return "partial"
    unranked = [i for i in analysis.primary if i.rank is None]
    nodes = {rank // case.gpus_per_node for rank in culprits}
    on_node = any(_on_node(i, case, nodes) for i in unranked) or (
        not ranks and bool(nodes & named.nodes)
    )
    return "partial" if on_node or any(named.locates(r) for r in culprits) else "false"


def rank_any(case: JudgeCase) -> Binary:
    truth = case.expected
    named = _named_ranks(case.log_analysis)
    if truth.clean:
        return "false" if named else "true"
    if not truth.culprit:
        return "N/A"
    return "true" if named & set(truth.culprit) else "false"


def fault_described(case: JudgeCase) -> Graded:
    truth, primary = case.expected, case.log_analysis.primary
    if truth.clean:
        return "true" if all(i.nature is Nature.NONE for i in primary) else "false"
    issue = _headline_issue(case)
    if issue is None:
        return "false"
    if issue.nature in truth.natures:
        return "true"
    return "partial" if issue.nature in truth.neighbours or issue.nature is Nature.NONE else "false"


def fr_rank_correct(case: JudgeCase) -> FrScope:
    expected = case.expected.fr_culprit
    suspects = set(case.fr_analysis.suspects)
    if expected is None:
        return "N/A"
    if not expected:
        return "false" if suspects else "rank"
    if not suspects:
        return "no_dumps" if case.fr_analysis.no_dumps else "false"
    if suspects <= set(expected):
        return "rank"
    if any(suspects <= set(case.node_block(rank)) for rank in expected):
        return "node"
    if any(suspects <= set(case.segment_block(rank)) for rank in expected):
        return "segment"
    return "false"


def _headline_issue(case: JudgeCase) -> Issue | None:
    primary = case.log_analysis.primary
    culprits = set(case.expected.culprit or [])
    about_culprit = [i for i in primary if i.rank in culprits]
    return next(iter(about_culprit or primary), None)


def _named_ranks(analysis: LogAnalysis) -> set[int]:
    issues = [*analysis.primary, *analysis.secondary]
    text = " ".join([analysis.attribution_text, analysis.explanation, *(i.summary for i in issues)])
    return {i.rank for i in issues if i.rank is not None} | mentions(text).ranks


def _nodes(issues: list[Issue]) -> bool:
    return any(i.node and i.node.strip() for i in issues)


def _on_node(issue: Issue, case: JudgeCase, nodes: set[int]) -> bool:
    if not issue.node:
        return False
    if node_index(issue.node) in nodes:
        return True
    return case.node_host is not None and same_host(issue.node, case.node_host)


# --- notes -----------------------------------------------------------------------------------


def notes(case: JudgeCase, verdict: Verdict) -> str:
    """One sentence: what was right, or the gaps (main one first)."""
    truth = case.expected
    if truth.clean:
        return _control_notes(case, verdict)
    gaps = [gap for gap in _gaps(case, verdict) if gap]
    if not gaps:
        made = decided(case.log_analysis)
        restart = f"{made} as expected" if verdict.restart_correct == "true" else f"{made}"
        culprit = f"{_who(case)} primary" if truth.culprit else "no single culprit rank"
        fr = (
            "FR narrowed to the exact rank"
            if verdict.fr_rank_correct == "rank"
            else "FR not scored"
        )
        return (
            f"Correct on all dimensions: {restart}, {culprit}, {truth.natures[0].value} "
            f"described, {fr}."
        )
    return "Main gap: " + "; ".join(gaps) + "."


def _who(case: JudgeCase) -> str:
    """``rank 12`` or ``rank 9/14`` (acceptable culprits)."""
    return "rank " + "/".join(str(r) for r in case.expected.culprit or [])


def _gaps(case: JudgeCase, verdict: Verdict) -> list[str]:
    truth = case.expected
    who = _who(case)
    nodes = "/".join(sorted({str(r // case.gpus_per_node) for r in truth.culprit or []}))
    issue = _headline_issue(case)
    nature = issue.nature.value if issue else "nothing"
    suspects = sorted(set(case.fr_analysis.suspects))
    rank_gap = {
        ("partial", "true"): f"{who} named but not first among the primary issues",
        ("partial", "false"): f"only {who}'s node {nodes} or group is primary",
        ("false", "true"): f"{who} named only outside the primary issues (as collateral)",
        ("false", "false"): f"{who} not named",
    }.get((verdict.rank_primary, verdict.rank_any), "")
    if truth.culprit == [] and verdict.rank_primary == "false":
        rank_gap = "a single rank blamed where the cause is not one rank"
    natures = " or ".join(n.value for n in truth.natures)
    fr_gap = {
        "node": f"FR narrowed to node {nodes} only (suspects {suspects})",
        "segment": f"FR narrowed to the segment only (suspects {suspects})",
        "false": f"FR suspects {suspects} miss {who}" if suspects else "FR named no suspect",
        "no_dumps": "no FR dumps were read",
    }.get(verdict.fr_rank_correct, "")
    if truth.fr_culprit == [] and verdict.fr_rank_correct == "false":
        fr_gap = f"FR suspects {suspects} where no single rank is the cause"
    return [
        _restart_gap(case, verdict),
        rank_gap,
        "" if verdict.fault_described == "true" else f"described {nature}, expected {natures}",
        fr_gap,
    ]


def _restart_gap(case: JudgeCase, verdict: Verdict) -> str:
    if verdict.restart_correct != "false" or verdict.expected_decision is None:
        return ""
    made = case.log_analysis.decision_text.strip() or decided(case.log_analysis)
    given = case.experiment.case is not None and case.experiment.case.truth is not None
    return (
        f"decided {made} where {'the case' if given else 'the policy'} expects "
        f"{verdict.expected_decision}"
    )


def _control_notes(case: JudgeCase, verdict: Verdict) -> str:
    alarms = []
    if verdict.restart_correct == "false":
        alarms.append(f"decided {decided(case.log_analysis)}")
    if verdict.rank_primary == "false" or verdict.fault_described == "false":
        alarms.append("a primary issue reported")
    if verdict.rank_any == "false":
        alarms.append(f"ranks {sorted(_named_ranks(case.log_analysis))} blamed")
    if verdict.fr_rank_correct == "false":
        alarms.append(f"FR suspects {sorted(set(case.fr_analysis.suspects))}")
    if alarms:
        return "False alarm on a clean run: " + "; ".join(alarms) + "."
    return "No false alarm: the clean run was read as healthy, with no culprit and no FR suspect."
