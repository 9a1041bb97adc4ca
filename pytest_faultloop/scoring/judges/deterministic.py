"""The default judge: each dimension scored by its rule (the table in
:mod:`pytest_faultloop.scoring.judges.rules` says how), and notes that say what was right or the
gaps.

The notes name the groups left out (``rank 14 of 12+14 not named among the primary issues``) and
what was named instead (``rank 1 not named (the analyzer named primary rank 3)``).
"""

from __future__ import annotations

from pytest_faultloop.models import (
    Verdict,
)
from pytest_faultloop.scoring.dimensions import DIMENSIONS
from pytest_faultloop.scoring.judges.judge import JudgeCase
from pytest_faultloop.scoring.judges.named import (
    decided,
    headline_issue,
    named_ranks,
    primary_named,
)
from pytest_faultloop.scoring.judges.rules import group_status, nodes_of
from pytest_faultloop.scoring.restart_policy import RestartPolicy


class DeterministicJudge:
    name = "deterministic"

    def __init__(self, policy: RestartPolicy) -> None:
        self.policy = policy

    def judge(self, case: JudgeCase) -> Verdict:
        case = case.resolved(self.policy)
        verdict = Verdict.model_validate(
            {
                **{d.name: d.score(case) for d in DIMENSIONS},
                "notes": "",
                "judge": self.name,
                "expected_decision": case.expected.decision,
            }
        )
        return verdict.model_copy(update={"notes": notes(case, verdict)})


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
    nodes = "/".join(map(str, sorted(nodes_of(case, group))))
    return f"node {nodes} (ranks {group[0]}-{group[-1]})"


def _missed(case: JudgeCase) -> str:
    """``rank 14 of 12+14 not named``: the culprit groups the primary issues leave out."""
    groups = case.expected.groups
    if len(groups) < 2:
        return ""
    missed = [g for g in groups if group_status(case, g) != "named"]
    if not missed:
        return ""
    if case.expected.node_names_count:
        hit = "+".join(str(min(nodes_of(case, g))) for g in groups)
        what = " and ".join(f"node {min(nodes_of(case, g))}" for g in missed)
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
