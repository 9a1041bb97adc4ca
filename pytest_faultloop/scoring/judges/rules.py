"""The five dimensions computed by rule from the analyses and the truth: the deterministic
judge's scorers, one per dimension (the registry, :mod:`pytest_faultloop.scoring.dimensions`,
names each beside its dimension).

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

A clean run (the NONE control, or a case whose nature is ``none``) reads as "no false alarm":
restart_correct against the expected decision (CONTINUE); rank_primary true when no primary
issue names a rank or node; rank_any true when no rank is named anywhere; fault_described true
when no primary issue describes a failure (all natures ``none``); fr_rank_correct ``rank`` when
FR has no suspects, dumps or not.
"""

from __future__ import annotations

from typing import Literal

from pytest_faultloop.models import Binary, FrScope, Graded, Issue, RestartCorrect
from pytest_faultloop.models.faults import Nature
from pytest_faultloop.scoring.judges.judge import JudgeCase
from pytest_faultloop.scoring.judges.mentions import mentions, node_index, same_host
from pytest_faultloop.scoring.judges.named import (
    all_text,
    decided,
    headline_issue,
    named_ranks,
    primary_view,
)

GroupStatus = Literal["named", "located", ""]


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
    status = [group_status(case, group) for group in truth.groups]
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
            nodes = nodes_of(case, group)
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


def group_status(case: JudgeCase, group: list[int]) -> GroupStatus:
    """How the primary issues name one culprit group: a rank of it (or, for a lost node, its
    node or a range inside it) is named; only its node or a range holding it is; neither."""
    ranks, named, _ = primary_view(case.log_analysis)
    if ranks & set(group):
        return "named"
    unranked = [i for i in case.log_analysis.primary if i.rank is None]
    nodes = nodes_of(case, group)
    node_named = any(_on_node(i, case, nodes) for i in unranked)
    if case.expected.node_names_count:
        inside = any(set(r) <= set(group) for r in named.groups)
        if node_named or inside or nodes & named.nodes:
            return "named"
    elif node_named or (not ranks and bool(nodes & named.nodes)):
        return "located"
    return "located" if any(named.locates(r) for r in group) else ""


def nodes_of(case: JudgeCase, group: list[int]) -> set[int]:
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
