"""Culprit versus victim: from the per-rank timelines of a log's last restart cycle to the
primary issues. The algorithm (docs/analyzers/builtin.md, "How the log analyzer reasons"):

1. Timelines: every line a catalogue entry reads is an event of one rank (its marker, the
   rank the message or report names) or of the job; only the last restart cycle counts.
2. Each rank's failure is its first origin (its own failure), else its first consequence
   (a timeout, a lost peer, a launcher's SIGTERM), else a launcher's report of its end.
3. The culprit is the earliest origin no other rank's failure explains: a rank's own GPU
   error, crash or exception, or a rank its peers name (desync report, monitoredBarrier,
   stall inspector); other ranks' own failures from before the first consequence are
   independent culprits too (``hard_failure``).
4. Else an end from outside before the first consequence: a signal, the scheduler, the
   launcher's signal (a pod's status, printed apart from the log stream, wherever it
   stands), but not one right after an NCCL init some rank never finished (the end of a
   hung job: step 5); else a launcher's report of a rank ended by a signal, its Root Cause
   first (``signal_or_job``).
5. Else an initialization that never finished (the log ends in it, or a rank timed out in
   it): a launch whose members conflict (more processes than the world, a rank claimed
   twice) cannot form its group; else the members absent while the others wait; else the
   ranks that never completed the latest NCCL communicator's init (the world's, counted
   per commId) while every other rank did, where only the job's end from outside (a time
   limit, a stopping signal) came after (``membership``).
   Else a collective hang: where every victim lost a peer, the rank they name as the one
   they lost (MPICH's ``Communication error with rank N``), as a launcher's rank-less report
   says it ended; else the members absent where every other member waits (not where the
   victims are only stack dumps a user took: py-spy's, gdb's), else the dumped processes not
   waiting in torch.distributed where more dumped ones wait (``stack_dumps``), else those
   behind in the watchdog counters, else a stuck watchdog, else the ranks that lost a
   connection while all others timed out alive (a broken link), else, where every rank
   lost a peer, the launcher's Root Cause; absent ranks whose launcher died unreported with
   them are a lost node (``hang``).
6. Else exit codes, then job events (``exit_code``); else the first error-level line
   (``fallback``): a line its logger marked error-level, or a traceback the log ends inside
   (cut before its exception line); a log with one never reads as "no failure"; else a log
   that ends on a rendezvous or store connection step hung there (``stalled_init``).
7. Confidence is the deciding rule's, lowered when direct evidence names only other ranks
   (ranks peers name, ranks behind in the watchdog counters, launchers' signal reports).
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_faultloop.analyzers.log.attribution_rules import RULES, behind, signal_or_job
from pytest_faultloop.analyzers.log.cycle_view import JOB_KINDS, CycleView, Finding
from pytest_faultloop.analyzers.log.line_facts import Kind
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
    conflicting: bool = False
    """Another rule's evidence named other ranks (the confidence is lowered)."""

    @property
    def confidence(self) -> float:
        return CONFIDENCE[self.rule] * (CONFLICT_FACTOR if self.conflicting else 1.0)


CONFLICT_FACTOR = 0.6
"""Confidence kept when another rule's evidence names other ranks than the answer."""
CONFIDENCE = {
    "hard_failure": 0.9,
    "signal_or_job": 0.8,
    "membership": 0.7,
    "hang": 0.7,
    "exit_code": 0.5,
    "fallback": 0.3,
    "stalled_init": 0.3,
    "none": 0.8,
}
"""How far each rule's answer is trusted: a rank's own hard error is direct evidence; a silent
rank is an inference; an error line no rule knows, or a log's last word, is a guess. "none": no
failure found."""


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
        cut = "traceback" in primary[0].event.fact.extra
        source = "a traceback the log ends inside" if cut else "an error line"
        explanation = f"no known failure pattern; best guess from {source}: {explanation}"
    conflict = _conflict(cycle, primary, rule)
    if conflict:
        explanation += f"; conflicting evidence: {conflict}"
    found = Attribution(primary, secondary, explanation, _evidence(primary, secondary), rule)
    found.conflicting = bool(conflict)
    return found


def _conflict(cycle: CycleView, primary: list[Finding], decided: str) -> str:
    """What direct evidence says when it names only other ranks than the answer: the ranks
    peers name as faulty, the ranks behind in the watchdog counters, the launcher's reports of
    ranks ended by a signal (silence in a pasted fragment is no evidence against an origin)."""
    answer = {f.rank for f in primary if f.rank is not None}
    if not answer:
        return ""
    named = {r for e in cycle.events if e.kind is Kind.NAMED for r in e.fact.named}
    evidence = {
        "its peers name": named,
        "the watchdog counters put behind": set(behind(cycle)),
        "the launcher reports ended by a signal": (
            {f.rank for f in signal_or_job(cycle) if f.rank is not None}
            if decided != "signal_or_job"
            else set()
        ),
    }
    for what, ranks in evidence.items():
        if ranks and not ranks & answer:
            return f"{what} rank {rank_ranges(sorted(ranks))}"
    return ""


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
