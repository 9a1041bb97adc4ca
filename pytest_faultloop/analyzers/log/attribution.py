"""Culprit versus victim: from the facts of a log's last restart cycle to primary issues.

The rules, in order:

1. A rank's own hard failure (GPU error, crash, Python exception) or a rank named faulty by
   another rank (monitoredBarrier, "check rank N") explains everything else: the earliest wins.
2. Otherwise a signal, a job-level event (Slurm cancellation, launcher signal) or torchrun's
   report of a rank ended by a signal, when it came before the first collective failure;
   torchrun's "Root Cause (first observed failure)" orders the reports. Ranks the launcher
   SIGTERMed after another failure are victims.
3. Otherwise every failure is a collective timeout or a lost peer: the culprit is the rank
   that did not fail (silent), or the rank behind in the NCCL watchdog counters.
4. Otherwise exit codes, then job-level events.
5. Otherwise (fallback) the first error-level line that no rule above explains, with its rank
   when the line gives one: a log that shows an error never reads as "no failure".

Each answer says which rule reached it and how much that rule is trusted (``CONFIDENCE``).
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_faultloop.analyzers.log.attribution_rules import RULES
from pytest_faultloop.analyzers.log.cycle_view import JOB_KINDS, CycleView, Finding
from pytest_faultloop.analyzers.log.scan_events import Event, ScanResult
from pytest_faultloop.analyzers.rank_ranges import rank_ranges

MAX_SECONDARY = 16


@dataclass
class Attribution:
    primary: list[Finding]
    secondary: list[Finding]
    explanation: str
    evidence: list[Event]
    rule: str = "none"
    """Which rule reached the answer (a key of ``CONFIDENCE``)."""

    @property
    def confidence(self) -> float:
        return CONFIDENCE[self.rule]


CONFIDENCE = {
    "hard_failure": 0.9,
    "signal_or_job": 0.8,
    "hang": 0.7,
    "exit_code": 0.5,
    "fallback": 0.3,
    "none": 0.8,
}
"""How far each rule's answer is trusted: a rank's own hard error is direct evidence; a silent
rank is an inference; an error line no rule knows is a guess. "none": no failure found."""


def attribute(scan: ScanResult) -> Attribution:
    cycle = CycleView(scan)
    for rule, find in RULES:  # noqa: B007 - the rule that found it is reported below
        primary = find(cycle)
        if primary:
            break
    else:
        return Attribution([], [], "no failure found in the log", [])
    secondary = _secondary(cycle, primary)
    explanation = _explain(primary, secondary)
    if rule == "fallback":
        explanation = f"no known failure pattern; best guess from an error line: {explanation}"
    return Attribution(primary, secondary, explanation, _evidence(primary, secondary), rule)


def _secondary(cycle: CycleView, primary: list[Finding]) -> list[Finding]:
    taken = {f.rank for f in primary if f.rank is not None}
    primary_events = {id(f.event) for f in primary}
    findings = []
    for rank, event in sorted(cycle.first.items(), key=lambda item: item[1].line):
        if rank in taken:
            continue
        role = "victim" if cycle.role(event) == "victim" else "failed later"
        findings.append(cycle.finding(event, rank, f"{event.fact.detail} ({role})"))
    jobs = [
        e
        for e in cycle.events
        if e.rank is None and e.kind in JOB_KINDS and id(e) not in primary_events
    ]
    findings.extend(cycle.finding(e, None) for e in jobs[:4])
    if len(findings) > MAX_SECONDARY:
        rest = findings[MAX_SECONDARY - 1 :]
        ranks = sorted(f.rank for f in rest if f.rank is not None)
        summary = f"{len(rest)} more: ranks {rank_ranges(ranks)} failed after the primary issue"
        findings = [
            *findings[: MAX_SECONDARY - 1],
            Finding(None, rest[0].nature, summary, rest[0].event),
        ]
    return findings


def _explain(primary: list[Finding], secondary: list[Finding]) -> str:
    lead = primary[0]
    ranks = [f.rank for f in primary if f.rank is not None]
    who = f"rank {rank_ranges(ranks)}" if ranks else "the job"
    victims = sum(1 for f in secondary if f.rank is not None)
    tail = f"; {victims} other rank(s) failed after it" if victims else ""
    return f"{who} failed first ({lead.nature.value}): {lead.summary}{tail}"


def _evidence(primary: list[Finding], secondary: list[Finding]) -> list[Event]:
    """The primary issue's lines first, then its victims' in log order."""
    lead = list({id(f.event): f.event for f in primary}.values())
    rest = {id(f.event): f.event for f in secondary[:8] if f.event not in lead}
    return lead + sorted(rest.values(), key=lambda e: e.line)
