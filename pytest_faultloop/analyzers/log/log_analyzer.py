"""The built-in deterministic log analyzer: ``analyze_log(path) -> LogAnalysis``."""

from __future__ import annotations

from pathlib import Path

from pytest_faultloop.analyzers.cause_policy import (
    DEFAULT_POLICY,
    GPU_HARDWARE,
    NODE_LOST,
    DecisionPolicy,
    cause_of,
)
from pytest_faultloop.analyzers.log.attribution import Attribution, attribute
from pytest_faultloop.analyzers.log.cycle_view import Finding
from pytest_faultloop.analyzers.log.no_logs import no_log_analysis
from pytest_faultloop.analyzers.log.scan import scan_log
from pytest_faultloop.analyzers.log.scan_events import ScanResult
from pytest_faultloop.analyzers.log.text_forms import attribution_text
from pytest_faultloop.models import Decision, Evidence, Issue, LogAnalysis
from pytest_faultloop.models.faults import Nature

ANALYZER = "builtin"
NODE_FAULT = "node_fault"
"""The catalogue's ``extra`` key of a message that says the node it names is at fault."""


def analyze_log(path: Path, policy: DecisionPolicy = DEFAULT_POLICY) -> LogAnalysis:
    """Attribute the failure in a training log (its last restart cycle).

    Never raises on bad input: an unreadable, binary or empty log gives a ``NO LOGS`` analysis.
    """
    path = Path(path)
    try:
        scan = scan_log(path)
    except OSError as exc:
        return no_log_analysis(ANALYZER, f"{path}: cannot read the log: {exc.strerror or exc}")
    if scan.not_text:
        return no_log_analysis(ANALYZER, f"{path}: not a text log: {scan.not_text}")
    if not scan.has_text:
        return no_log_analysis(ANALYZER, f"{path}: the log is empty")
    return _analysis(scan, attribute(scan), policy)


def _analysis(scan: ScanResult, found: Attribution, policy: DecisionPolicy) -> LogAnalysis:
    leads, passed = _past_the_fit(found.primary, scan.cycle.fit_done_line)
    primary = [_issue(f) for f in leads]
    secondary = [_issue(f) for f in passed + found.secondary]
    explanation = found.explanation
    nature = leads[0].nature if leads else Nature.NONE
    done = scan.cycle.training_done_line
    if done is None and passed and not leads:
        done = scan.cycle.fit_done_line  # nothing failed but what training got past
        leads = passed
    after_done = bool(leads) and done is not None
    scheduler_end = leads and leads[0].nature is Nature.SCHEDULER
    if after_done and scheduler_end:
        explanation = (
            f"training completed (line {done}); the job then did not end until the scheduler "
            f"ended it (a hang in teardown): {explanation}"
        )
    elif after_done:
        nature = Nature.NONE
        explanation = (
            f"training completed (line {done}); failures after it are teardown, and those "
            f"before it did not stop training: {explanation}"
        )
        primary, secondary = [], primary + secondary
    if scan.cycles > 1:
        explanation += (
            f" (restart cycle {scan.cycles} of {scan.cycles}, from line {scan.cycle.first_line})"
        )
    cause = cause_of(nature, leads[0].summary if leads else "")
    decision = Decision.CONTINUE if after_done else policy.decide(cause)
    node = leads[0].node if leads else None
    if decision is Decision.RESTART and node and _node_at_fault(cause, leads[0]):
        explanation += f"; restart without node {node}"
    return LogAnalysis(
        analyzer=ANALYZER,
        decision=decision,
        decision_text=decision.text,
        explanation=explanation,
        primary=primary,
        secondary=secondary,
        attribution_text=attribution_text(primary, secondary),
        evidence=[Evidence(line=e.line, text=e.text) for e in found.evidence],
        checkpoint_saved=scan.cycle.checkpoint_saved,
        cause=cause,
        confidence=found.confidence,
        rule=found.rule,
    )


def _node_at_fault(cause: str, lead: Finding) -> bool:
    """The node itself failed: its GPU hardware, its network, a crash that took it whole, or
    what the catalogue marks as the node's fault (``node_fault``: slurmstepd could not kill
    processes stuck in its driver or a filesystem)."""
    infrastructure = cause in (GPU_HARDWARE, NODE_LOST, Nature.NETWORK.value)
    return infrastructure or NODE_FAULT in lead.event.fact.extra


def _past_the_fit(
    primary: list[Finding], fit_done: int | None
) -> tuple[list[Finding], list[Finding]]:
    """The primary findings split at a trainer's word that its fit finished: those after it
    (evaluation, test and saving fail for real), and those before it, which did not stop
    training (a rank that died was restarted)."""
    if fit_done is None:
        return primary, []
    return (
        [f for f in primary if f.event.line > fit_done],
        [f for f in primary if f.event.line < fit_done],
    )


def _issue(finding: Finding) -> Issue:
    return Issue(
        rank=finding.rank,
        node=finding.node,
        nature=finding.nature,
        summary=finding.summary,
    )
