"""The default judge: the five dimensions computed by rule from the analyses and the policy.

Rules for an injected fault (rank R on node R // GPUS_PER_NODE):

- restart_correct: the analyzer's normalised decision equals the policy's; ``N/A`` only where
  the policy has no entry for the fault. UNKNOWN, ``NO LOGS`` and ``LLM FAILURE`` are false.
- rank_primary: R is a primary issue's rank or is named in a primary summary or in the
  ``Primary issues:`` part of the attribution text (true); the primary issues name no rank but
  locate R's node (an issue's ``node``: index, ``nodeN`` or the marker's hostname; or
  ``node N`` in the text), or name a rank range holding R (partial); else false. Blaming
  another rank on R's node is false: the culprit is wrong.
- rank_any: R is named individually anywhere in the attribution (issues, attribution text,
  explanation); a range such as ``ranks 0-7`` does not name it.
- fault_described: the nature of the primary issue about R (else the first primary issue) is
  one of the fault's natures (true), a neighbouring nature or a generic failure (nature
  ``none``) (partial); otherwise, or with no primary issue, false.
- fr_rank_correct: FR suspects exactly {R} (rank), a subset of R's GPUS_PER_NODE block
  (node), a subset of R's FR_SEGMENT_SIZE block (segment), no dump read and no suspect
  (no_dumps), else false.

The NONE control (no fault injected) reads as "no false alarm": restart_correct against the
policy (CONTINUE); rank_primary true when no primary issue names a rank or node; rank_any true
when no rank is named anywhere; fault_described true when no primary issue describes a failure
(all natures ``none``); fr_rank_correct ``rank`` when FR has no suspects, dumps or not.
"""

from __future__ import annotations

import re

from pytest_faultloop.faults import Nature
from pytest_faultloop.judges.base import JudgeCase
from pytest_faultloop.judges.mentions import (
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
from pytest_faultloop.policy import RestartPolicy

_STOP = re.compile(r"\bSTOP\b|\bDO\s*N'?O?T\s+RESTART\b|\bNO\s+RESTART\b")
_RESTART = re.compile(r"\bRESTART\b")
_CONTINUE = re.compile(r"\bERRORS NOT FOUND\b|\bCONTINUE\b|\bNO (?:FAILURE|ERRORS?)\b")
_UNKNOWN = re.compile(r"\bNO LOGS\b|\bLLM FAILURE\b|^UNKNOWN$")


def normalise_decision(text: str) -> Decision | None:
    """The decision a text states; None when it states none.

    STOP wins over RESTART, so ``STOP - DONT RESTART IMMEDIATE`` reads STOP (the seed's
    substring bug read it as RESTART).
    """
    words = " ".join(text.upper().replace("’", "'").split())
    for pattern, decision in (
        (_UNKNOWN, Decision.UNKNOWN),
        (_STOP, Decision.STOP),
        (_RESTART, Decision.RESTART),
        (_CONTINUE, Decision.CONTINUE),
    ):
        if pattern.search(words):
            return decision
    return None


def decided(analysis: LogAnalysis) -> Decision:
    """The analyzer's decision: its ``decision_text`` when that states one, else ``decision``."""
    return normalise_decision(analysis.decision_text) or analysis.decision


class DeterministicJudge:
    name = "deterministic"

    def __init__(self, policy: RestartPolicy) -> None:
        self.policy = policy

    def judge(self, case: JudgeCase) -> Verdict:
        expectation = self.policy.expected(case.experiment.entry.fault)
        verdict = Verdict(
            restart_correct=restart_correct(case, self.policy),
            rank_primary=rank_primary(case),
            rank_any=rank_any(case),
            fault_described=fault_described(case),
            fr_rank_correct=fr_rank_correct(case),
            notes="",
            judge=self.name,
            expected_decision=expectation.decision if expectation else None,
        )
        return verdict.model_copy(update={"notes": notes(case, verdict)})


def restart_correct(case: JudgeCase, policy: RestartPolicy) -> RestartCorrect:
    expectation = policy.expected(case.experiment.entry.fault)
    if expectation is None:
        return "N/A"
    return "true" if decided(case.log_analysis) is expectation.decision else "false"


def rank_primary(case: JudgeCase) -> Graded:
    analysis = case.log_analysis
    primary_text = " ".join(
        [primary_section(analysis.attribution_text), *(i.summary for i in analysis.primary)]
    )
    named = mentions(primary_text)
    ranks = {i.rank for i in analysis.primary if i.rank is not None} | named.ranks
    if case.experiment.entry.fault.is_control:
        has_culprit = ranks or named.groups or named.nodes or _nodes(analysis.primary)
        return "false" if has_culprit else "true"
    if case.rank in ranks:
        return "true"
    unranked = [i for i in analysis.primary if i.rank is None]
    on_node = any(_on_node(i, case) for i in unranked) or (not ranks and case.node in named.nodes)
    return "partial" if on_node or named.locates(case.rank) else "false"


def rank_any(case: JudgeCase) -> Binary:
    named = _named_ranks(case.log_analysis)
    if case.experiment.entry.fault.is_control:
        return "false" if named else "true"
    return "true" if case.rank in named else "false"


def fault_described(case: JudgeCase) -> Graded:
    primary = case.log_analysis.primary
    if case.experiment.entry.fault.is_control:
        return "true" if all(i.nature is Nature.NONE for i in primary) else "false"
    issue = _headline_issue(case)
    if issue is None:
        return "false"
    spec = case.experiment.entry.fault.spec
    if issue.nature in spec.natures:
        return "true"
    return "partial" if issue.nature in spec.neighbours or issue.nature is Nature.NONE else "false"


def fr_rank_correct(case: JudgeCase) -> FrScope:
    suspects = set(case.fr_analysis.suspects)
    if case.experiment.entry.fault.is_control:
        return "false" if suspects else "rank"
    if not suspects:
        return "no_dumps" if case.fr_analysis.no_dumps else "false"
    if suspects == {case.rank}:
        return "rank"
    if suspects <= set(case.node_block):
        return "node"
    if suspects <= set(case.segment_block):
        return "segment"
    return "false"


def _headline_issue(case: JudgeCase) -> Issue | None:
    primary = case.log_analysis.primary
    about_rank = [i for i in primary if i.rank == case.rank]
    return (about_rank or primary or [None])[0]


def _named_ranks(analysis: LogAnalysis) -> set[int]:
    issues = [*analysis.primary, *analysis.secondary]
    text = " ".join([analysis.attribution_text, analysis.explanation, *(i.summary for i in issues)])
    return {i.rank for i in issues if i.rank is not None} | mentions(text).ranks


def _nodes(issues: list[Issue]) -> bool:
    return any(i.node and i.node.strip() for i in issues)


def _on_node(issue: Issue, case: JudgeCase) -> bool:
    if not issue.node:
        return False
    if node_index(issue.node) == case.node:
        return True
    return case.node_host is not None and same_host(issue.node, case.node_host)


# --- notes -----------------------------------------------------------------------------------


def notes(case: JudgeCase, verdict: Verdict) -> str:
    """One sentence: what was right, or the gaps (main one first)."""
    if case.experiment.entry.fault.is_control:
        return _control_notes(case, verdict)
    gaps = [gap for gap in _gaps(case, verdict) if gap]
    if not gaps:
        made = decided(case.log_analysis)
        restart = f"{made} as expected" if verdict.restart_correct == "true" else f"{made}"
        return (
            f"Correct on all dimensions: {restart}, rank {case.rank} primary, "
            f"{case.experiment.entry.fault.spec.nature} described, FR narrowed to the exact rank."
        )
    return "Main gap: " + "; ".join(gaps) + "."


def _gaps(case: JudgeCase, verdict: Verdict) -> list[str]:
    rank, node = case.rank, case.node
    fault = case.experiment.entry.fault
    issue = _headline_issue(case)
    nature = issue.nature.value if issue else "nothing"
    suspects = sorted(set(case.fr_analysis.suspects))
    rank_gap = {
        ("partial", "true"): f"rank {rank} named but only its node/group is primary",
        ("partial", "false"): f"only rank {rank}'s node {node} or group is primary",
        ("false", "true"): f"rank {rank} named only outside the primary issues (as collateral)",
        ("false", "false"): f"rank {rank} not named",
    }.get((verdict.rank_primary, verdict.rank_any), "")
    natures = " or ".join(n.value for n in fault.spec.natures)
    fr_gap = {
        "node": f"FR narrowed to node {node} only (suspects {suspects})",
        "segment": f"FR narrowed to the segment only (suspects {suspects})",
        "false": f"FR suspects {suspects} miss rank {rank}" if suspects else "FR named no suspect",
        "no_dumps": "no FR dumps were read",
    }.get(verdict.fr_rank_correct, "")
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
    return f"decided {made} where the policy expects {verdict.expected_decision}"


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
