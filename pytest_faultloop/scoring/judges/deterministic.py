"""The default judge: the five dimensions computed by rule from the analyses and the truth.

The truth (:func:`pytest_faultloop.scoring.truth.truth_of`) gives sets of acceptable answers: culprit
ranks C, natures, neighbouring natures, a decision, FR culprits. An injected fault on rank R has
C = {R}, the fault's natures and the policy's decision; a real incident's case says them. C may
come in groups G1..Gn that must each be named (naming any rank of a group names it), and a lost
node names its ranks:

========================  =============  ==============================  =================
injected                  C              groups (each must be named)     naming its node
========================  =============  ==============================  =================
``F:R`` (the seed's)      {R}            one: C                          locates (partial)
``F:12+14``               {12, 14}       {12}, {14}                      locates (partial)
``NODE_KILL:1`` (4/node)  {0..3}         one: node 0's ranks             names it (true)
``NODE_KILL:1+9``         {0..3, 8..11}  node 0's ranks, node 2's ranks  names it (true)
========================  =============  ==============================  =================

- restart_correct: the analyzer's normalised decision equals the expected one; ``N/A`` when
  none is expected. UNKNOWN, ``NO LOGS`` and ``LLM FAILURE`` are false.
- rank_primary: every group is named among the primary issues (an issue's ``rank``, a rank in
  the ``Primary issues:`` text or a primary summary; for a lost node also its ``node`` — index,
  ``nodeN`` or the marker's hostname —, ``node N`` in the text or a rank range inside it) and
  the first rank they name is in C (or, for a lost node, they name no rank) (true); some group
  is named, or the primary issues name no rank but locate a culprit's node (an issue's
  ``node``, or ``node N`` in the text) or a rank range holding it (partial); else false.
  Blaming another rank on the node is false. ``N/A`` when C is unknown. With C = {} (no single
  culprit) it is true when no primary issue names a rank.
- rank_any: a rank of C is named individually anywhere in the attribution (issues, text,
  explanation), or for a lost node its node is; a range such as ``ranks 0-7`` does not name
  a rank (unless it lies inside a lost node). ``N/A`` when C is unknown or empty (nothing to
  find), except for a clean run.
- fault_described: the nature of the primary issue about a culprit (else the first primary
  issue) is acceptable (true), neighbouring or a generic failure (nature ``none``) (partial);
  otherwise, or with no primary issue, false.
- fr_rank_correct: FR suspects lie within the acceptable FR culprits (C: every injected rank,
  every rank of a lost node) (rank), within one culprit's GPUS_PER_NODE block (node) or
  FR_SEGMENT_SIZE block (segment); no dump read and no suspect (no_dumps); else false. ``N/A``
  when the truth has no FR culprits (no dumps stored).

The notes name the groups left out (``rank 14 of 12+14 not named among the primary issues``) and
what was named instead (``rank 1 not named (the analyzer named primary rank 3)``).

A clean run (the NONE control, or a case whose nature is ``none``) reads as "no false alarm":
restart_correct against the expected decision (CONTINUE); rank_primary true when no primary
issue names a rank or node; rank_any true when no rank is named anywhere; fault_described true
when no primary issue describes a failure (all natures ``none``); fr_rank_correct ``rank`` when
FR has no suspects, dumps or not.
"""

from __future__ import annotations

from typing import Literal

from pytest_faultloop.models import (
    Binary,
    FrScope,
    Graded,
    Issue,
    RestartCorrect,
    Verdict,
)
from pytest_faultloop.models.faults import Nature
from pytest_faultloop.scoring.judges.judge import JudgeCase
from pytest_faultloop.scoring.judges.mentions import mentions, node_index, same_host
from pytest_faultloop.scoring.judges.named import (
    all_text,
    decided,
    headline_issue,
    named_ranks,
    primary_named,
    primary_view,
)
from pytest_faultloop.scoring.restart_policy import RestartPolicy

GroupStatus = Literal["named", "located", ""]


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
    ranks, named, first = primary_view(analysis)
    if not truth.culprit:
        if ranks:
            return "false"
        blamed = named.groups or named.nodes or _nodes(analysis.primary)
        return "false" if truth.clean and blamed else "true"
    status = [_group_status(case, group) for group in truth.groups]
    ranked_first = first in set(truth.culprit) or (first is None and truth.node_names_count)
    if ranked_first and all(s == "named" for s in status):
        return "true"
    return "partial" if any(status) else "false"


def rank_any(case: JudgeCase) -> Binary:
    truth, analysis = case.expected, case.log_analysis
    named = named_ranks(analysis)
    if truth.clean:
        return "false" if named else "true"
    if not truth.culprit:
        return "N/A"
    if named & set(truth.culprit):
        return "true"
    if truth.node_names_count:
        issues = [*analysis.primary, *analysis.secondary]
        found = mentions(all_text(analysis))
        for group in truth.groups:
            nodes = _nodes_of(case, group)
            if found.nodes & nodes or any(_on_node(i, case, nodes) for i in issues):
                return "true"
            if any(set(r) <= set(group) for r in found.groups):
                return "true"
    return "false"


def fault_described(case: JudgeCase) -> Graded:
    truth, primary = case.expected, case.log_analysis.primary
    if truth.clean:
        return "true" if all(i.nature is Nature.NONE for i in primary) else "false"
    issue = headline_issue(case.log_analysis, truth.culprit)
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


def _group_status(case: JudgeCase, group: list[int]) -> GroupStatus:
    """How the primary issues name one culprit group: a rank of it (or, for a lost node, its
    node or a range inside it) is named; only its node or a range holding it is; neither."""
    ranks, named, _ = primary_view(case.log_analysis)
    if ranks & set(group):
        return "named"
    unranked = [i for i in case.log_analysis.primary if i.rank is None]
    nodes = _nodes_of(case, group)
    node_named = any(_on_node(i, case, nodes) for i in unranked)
    if case.expected.node_names_count:
        inside = any(set(r) <= set(group) for r in named.groups)
        if node_named or inside or nodes & named.nodes:
            return "named"
    elif node_named or (not ranks and bool(nodes & named.nodes)):
        return "located"
    return "located" if any(named.locates(r) for r in group) else ""


def _nodes_of(case: JudgeCase, group: list[int]) -> set[int]:
    return {rank // case.gpus_per_node for rank in group}


def _nodes(issues: list[Issue]) -> bool:
    return any(i.node and i.node.strip() for i in issues)


def _on_node(issue: Issue, case: JudgeCase, nodes: set[int]) -> bool:
    """The issue's ``node`` is one of ``nodes`` (index, ``nodeN`` or a marker's hostname)."""
    if not issue.node:
        return False
    if node_index(issue.node) in nodes:
        return True
    if case.node_hosts:
        hosts = [host for node, host in case.node_hosts.items() if node in nodes]
    else:
        hosts = [case.node_host] if case.node_host is not None else []
    return any(same_host(issue.node, host) for host in hosts)


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
    """``rank 12``, ``rank 9/14`` (acceptable culprits), ``ranks 12+14`` (each a culprit) or
    ``node 0 (ranks 0-3)`` (a lost node)."""
    truth = case.expected
    if truth.node_names_count:
        return " and ".join(_group_label(case, g) for g in truth.groups)
    if truth.culprit_groups:
        return "ranks " + "+".join(_group_label(case, g) for g in truth.groups)
    return "rank " + "/".join(str(r) for r in truth.culprit or [])


def _group_label(case: JudgeCase, group: list[int]) -> str:
    if not case.expected.node_names_count:
        return "/".join(map(str, group))
    nodes = "/".join(map(str, sorted(_nodes_of(case, group))))
    return f"node {nodes} (ranks {group[0]}-{group[-1]})"


def _missed(case: JudgeCase) -> str:
    """``rank 14 of 12+14 not named``: the culprit groups the primary issues leave out."""
    groups = case.expected.groups
    if len(groups) < 2:
        return ""
    missed = [g for g in groups if _group_status(case, g) != "named"]
    if not missed:
        return ""
    if case.expected.node_names_count:
        hit = "+".join(str(min(_nodes_of(case, g))) for g in groups)
        what = " and ".join(f"node {min(_nodes_of(case, g))}" for g in missed)
        return f"{what} of nodes {hit} not named among the primary issues"
    every = "+".join(_group_label(case, g) for g in groups)
    what = " and ".join(_group_label(case, g) for g in missed)
    return (
        f"rank{'s' if len(missed) > 1 else ''} {what} of {every} not named among the primary issues"
    )


def _gaps(case: JudgeCase, verdict: Verdict) -> list[str]:
    truth = case.expected
    who = _who(case)
    nodes = "/".join(sorted({str(r // case.gpus_per_node) for r in truth.culprit or []}))
    issue = headline_issue(case.log_analysis, truth.culprit)
    nature = issue.nature.value if issue else "nothing"
    suspects = sorted(set(case.fr_analysis.suspects))
    named = primary_named(case.log_analysis)
    rank_gap = {
        ("partial", "true"): f"{who} named but not first among the primary issues",
        ("partial", "false"): f"only {who}'s node {nodes} or group is primary",
        ("false", "true"): f"{who} named only outside the primary issues (as collateral)",
        ("false", "false"): f"{who} not named (the analyzer named {named})",
    }.get((verdict.rank_primary, verdict.rank_any), "")
    if truth.culprit == [] and verdict.rank_primary == "false":
        rank_gap = "a single rank blamed where the cause is not one rank"
    elif verdict.rank_primary == "partial" and _missed(case):
        rank_gap = _missed(case)
    natures = " or ".join(n.value for n in truth.natures)
    fr_gap = {
        "node": f"FR narrowed to node {nodes} only (suspects {suspects})",
        "segment": f"FR narrowed to the segment only (suspects {suspects})",
        "false": f"FR suspects {suspects} miss {who}" if suspects else "FR named no suspect",
        "no_dumps": "no FR dumps were read"
        + (
            f" ({len(case.fr_analysis.unreadable)} unusable)" if case.fr_analysis.unreadable else ""
        ),
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
        alarms.append(f"ranks {sorted(named_ranks(case.log_analysis))} blamed")
    if verdict.fr_rank_correct == "false":
        alarms.append(f"FR suspects {sorted(set(case.fr_analysis.suspects))}")
    if alarms:
        return "False alarm on a clean run: " + "; ".join(alarms) + "."
    return "No false alarm: the clean run was read as healthy, with no culprit and no FR suspect."
