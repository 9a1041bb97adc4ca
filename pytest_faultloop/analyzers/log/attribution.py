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

from pytest_faultloop.analyzers.log.formats import Kind
from pytest_faultloop.analyzers.log.scan import Event, ScanResult
from pytest_faultloop.analyzers.rank_ranges import rank_ranges
from pytest_faultloop.faults import Nature

CRASH_SIGNALS = frozenset(
    {"SIGKILL", "SIGSEGV", "SIGABRT", "SIGBUS", "SIGILL", "SIGFPE"}
)
HARD_KINDS = frozenset({Kind.GPU_ERROR, Kind.CRASH, Kind.EXCEPTION, Kind.NETWORK})
VICTIM_KINDS = frozenset({Kind.TIMEOUT, Kind.PEER_LOST, Kind.WATCHDOG_STUCK})
JOB_KINDS = frozenset({Kind.SCHEDULER, Kind.JOB_SIGNAL})
MAX_PRIMARY_RANKS = 8
"""More silent ranks than this are reported as one primary issue, not one per rank."""
MAX_SECONDARY = 16


@dataclass
class Finding:
    rank: int | None
    nature: Nature
    summary: str
    event: Event
    node: str | None = None


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


def nature_of(event: Event) -> Nature:
    kind = event.kind
    if kind is Kind.SIGNAL:
        return (
            Nature.CRASH if event.fact.signal_name in CRASH_SIGNALS else Nature.SIGNAL
        )
    return _KIND_NATURE[kind]


_KIND_NATURE = {
    Kind.GPU_ERROR: Nature.GPU_ERROR,
    Kind.CRASH: Nature.CRASH,
    Kind.EXCEPTION: Nature.EXCEPTION,
    Kind.EXIT: Nature.EXCEPTION,
    Kind.TIMEOUT: Nature.HANG,
    Kind.WATCHDOG_STUCK: Nature.HANG,
    Kind.NAMED: Nature.HANG,
    Kind.PROGRESS: Nature.HANG,
    Kind.PEER_LOST: Nature.NETWORK,
    Kind.NETWORK: Nature.NETWORK,
    Kind.SCHEDULER: Nature.SCHEDULER,
    Kind.JOB_SIGNAL: Nature.SIGNAL,
    Kind.ERROR_LINE: Nature.EXCEPTION,
}


class _Cycle:
    """The events of one cycle, indexed the ways the rules need them."""

    def __init__(self, scan: ScanResult) -> None:
        self.events = scan.cycle.ordered()
        self.launcher_pids = scan.cycle.launcher_term_pids
        self.first: dict[int, Event] = {}
        for event in self.events:
            if event.rank is None or self.role(event) is None:
                continue
            known = self.first.get(event.rank)
            if known is None or _survived(known, event):
                self.first[event.rank] = event
        self.speaking = {
            e.rank for e in self.events if e.rank is not None and not e.report
        }
        victims = [e for e in self.events if self.role(e) == "victim" and not e.report]
        self.first_victim = victims[0] if victims else None
        self.nodes = {
            e.rank: e.fact.node
            for e in self.events
            if e.rank is not None and e.fact.node
        }
        ranks = set(scan.ranks_seen) | {
            e.rank for e in self.events if e.rank is not None
        }
        size = max(scan.world_size or 0, max(ranks, default=-1) + 1)
        self.world = set(range(size))

    def role(self, event: Event) -> str | None:
        kind = event.kind
        if kind is Kind.SIGNAL:
            sigterm = event.fact.signal_name == "SIGTERM"
            stopped = event.fact.by_launcher or (
                sigterm and event.fact.pid in self.launcher_pids
            )
            return "victim" if stopped else "signal"
        if kind in HARD_KINDS:
            return "hard"
        if kind in VICTIM_KINDS:
            return "victim"
        if kind is Kind.EXIT:
            return "weak"
        return None

    def before_victims(self, event: Event) -> bool:
        return self.first_victim is None or event.line < self.first_victim.line

    def finding(
        self, event: Event, rank: int | None, summary: str | None = None
    ) -> Finding:
        node = self.nodes.get(rank) if rank is not None else event.fact.node
        return Finding(
            rank, nature_of(event), summary or event.fact.detail, event, node
        )


def _survived(known: Event, later: Event) -> bool:
    """A logged exception followed by a collective timeout of the same rank did not end it;
    a traceback's first line gives way to what the traceback says."""
    if "traceback" in known.fact.extra:
        return True
    return (
        known.kind is Kind.EXCEPTION and later.kind is Kind.TIMEOUT and not later.report
    )


def attribute(scan: ScanResult) -> Attribution:
    cycle = _Cycle(scan)
    for rule, find in (("hard_failure", _hard_failure), ("signal_or_job", _signal_or_job),
                       ("hang", _hang), ("exit_code", _weak), ("fallback", _fallback)):
        primary = find(cycle)
        if primary:
            break
    else:
        return Attribution([], [], "no failure found in the log", [])
    secondary = _secondary(cycle, primary)
    explanation = _explain(primary, secondary)
    if rule == "fallback":
        explanation = f"no known failure pattern; best guess from an error line: {explanation}"
    return Attribution(
        primary, secondary, explanation, _evidence(primary, secondary), rule
    )


def _hard_failure(cycle: _Cycle) -> list[Finding]:
    candidates: list[Finding] = []
    for event in cycle.events:
        role = cycle.role(event)
        if (
            role == "hard"
            and not event.report
            and (event.rank is None or cycle.first.get(event.rank) is event)
        ):
            rank = event.rank if event.rank is not None else _owner(cycle, event)
            candidates.append(cycle.finding(event, rank))
        elif event.kind is Kind.NAMED:
            candidates.extend(_named(cycle, event))
    return candidates[:1]


def _owner(cycle: _Cycle, event: Event) -> int | None:
    """The rank of an unprefixed error, from a later line about the same failure: the same
    error naming its rank (PyTorch prints ``CUDA error: X`` bare, then ``[Rank N] ... CUDA
    error: X`` from its watchdog), or the launcher's report of one rank ending the same way
    (``Fatal Python error`` then ``exitcode: -6 local_rank: 3``; an OOM kill, then srun's
    ``task 0: Out Of Memory``)."""
    for later in cycle.events:
        if later.line <= event.line or later.rank is None:
            continue
        same_error = later.kind is event.kind and later.fact.detail == event.fact.detail
        reported = later.report and nature_of(later) is nature_of(event)
        if same_error or reported:
            return later.rank
    return None


def _named(cycle: _Cycle, event: Event) -> list[Finding]:
    findings = []
    for rank in event.fact.named:
        own = cycle.first.get(rank)
        if rank == event.rank or (own is not None and cycle.role(own) == "hard"):
            continue
        by = f"rank {event.rank}" if event.rank is not None else "a peer"
        findings.append(
            cycle.finding(event, rank, f"named by {by}: {event.fact.detail}")
        )
    return findings


def _signal_or_job(cycle: _Cycle) -> list[Finding]:
    in_stream = [
        cycle.finding(e, e.rank)
        for e in cycle.events
        if not e.report
        and cycle.before_victims(e)
        and (
            (e.rank is None and e.kind in JOB_KINDS)
            or (cycle.role(e) == "signal" and cycle.first.get(e.rank) is e)
        )
    ]
    if in_stream:
        return in_stream[:1]
    reports = [
        e
        for rank, e in cycle.first.items()
        if e.report
        and cycle.role(e) in ("signal", "hard")
        and not _hung_then_killed(cycle, e)
    ]
    reports.sort(key=lambda e: (not e.root_cause, e.line))
    return [cycle.finding(e, e.rank) for e in reports[:1]]


def _hung_then_killed(cycle: _Cycle, report: Event) -> bool:
    """A silent rank reported killed after its peers timed out waiting for it: it hung."""
    return (
        not report.root_cause
        and report.rank not in cycle.speaking
        and cycle.first_victim is not None
        and cycle.first_victim.kind is Kind.TIMEOUT
    )


def _hang(cycle: _Cycle) -> list[Finding]:
    first_victim = cycle.first_victim
    if first_victim is None:
        return []
    failed = {
        r for r, e in cycle.first.items() if cycle.role(e) == "victim" and not e.report
    }
    silent = sorted(cycle.world - cycle.speaking - failed)
    died = _went_away(cycle, silent, failed, first_victim)
    context = _victims_context(cycle, failed, first_victim)
    if silent and len(silent) < len(cycle.world):
        verb = "went silent (died without a word)" if died else "was silent (hung)"
        return _ranks_finding(
            cycle, silent, first_victim, f"{verb} while {context}", died
        )
    behind = _behind(cycle)
    if behind:
        summary = f"behind in the NCCL watchdog counters while {context}"
        return _ranks_finding(cycle, behind, first_victim, summary, died)
    stuck = sorted(r for r, e in cycle.first.items() if e.kind is Kind.WATCHDOG_STUCK)
    if stuck:
        return _ranks_finding(
            cycle,
            stuck,
            cycle.first[stuck[0]],
            "watchdog stuck: its GPU work hangs",
            False,
        )
    summary = f"{context}; the log does not tell which rank held them up"
    return [
        Finding(None, Nature.NETWORK if died else Nature.HANG, summary, first_victim)
    ]


def _went_away(
    cycle: _Cycle, silent: list[int], failed: set[int], first_victim: Event
) -> bool:
    """Did the silent ranks die (crash) rather than hang?

    A silent rank the launcher had to stop after its peers failed was still running: it hung.
    So did the peer of a rank whose collective timed out: a dead process closes its sockets,
    its peers see the connection drop at once and never wait out the timeout. Lost peers after
    a timeout are the cascade of ranks giving up. Only when every victim lost a peer did the
    silent ranks go away.
    """
    for rank in silent:
        ending = cycle.first.get(rank)
        if ending is not None and ending.report and cycle.role(ending) == "victim":
            return False
    victims = [cycle.first[r] for r in failed] or [first_victim]
    return all(e.kind is Kind.PEER_LOST for e in victims)


def _victims_context(cycle: _Cycle, failed: set[int], first: Event) -> str:
    timed_out = sum(1 for r in failed if cycle.first[r].kind is not Kind.PEER_LOST)
    lost = len(failed) - timed_out
    parts = (
        [f"{timed_out} other rank(s) timed out waiting in collectives"]
        if timed_out
        else []
    )
    parts += [f"{lost} lost their connection to a peer"] if lost else []
    return f"{' and '.join(parts)} (first: {first.fact.detail})"


def _ranks_finding(
    cycle: _Cycle, ranks: list[int], event: Event, summary: str, died: bool
) -> list[Finding]:
    nature = Nature.CRASH if died else Nature.HANG
    if len(ranks) > MAX_PRIMARY_RANKS:
        return [Finding(None, nature, f"ranks {rank_ranges(ranks)} {summary}", event)]
    return [Finding(r, nature, summary, event, cycle.nodes.get(r)) for r in ranks]


def _behind(cycle: _Cycle) -> list[int]:
    """Ranks whose watchdog saw fewer enqueued collectives than their group's leaders."""
    by_pg: dict[str, dict[int, int]] = {}
    for event in cycle.events:
        if (
            event.kind is Kind.PROGRESS
            and event.rank is not None
            and event.fact.enqueued is not None
        ):
            by_pg.setdefault(event.fact.pg or "", {})[event.rank] = event.fact.enqueued
    behind: set[int] = set()
    for counters in by_pg.values():
        if len(counters) > 1 and len(set(counters.values())) > 1:
            lowest = min(counters.values())
            behind |= {r for r, enqueued in counters.items() if enqueued == lowest}
    return sorted(behind)


def _weak(cycle: _Cycle) -> list[Finding]:
    """Only exit codes (or job events after the collective failures) are left."""
    weak = [e for r, e in cycle.first.items() if cycle.role(e) == "weak"]
    weak.sort(key=lambda e: (not e.root_cause, e.line))
    if weak:
        return [cycle.finding(weak[0], weak[0].rank)]
    jobs = [e for e in cycle.events if e.rank is None and e.kind in JOB_KINDS]
    if jobs:
        return [cycle.finding(jobs[0], None)]
    unranked = [e for e in cycle.events
                if e.rank is None and e.report and cycle.role(e) in ("signal", "hard", "weak")]
    return [cycle.finding(unranked[0], None)] if unranked else []


def _fallback(cycle: _Cycle) -> list[Finding]:
    errors = [e for e in cycle.events if e.kind is Kind.ERROR_LINE]
    ranked = [e for e in errors if e.rank is not None]
    lead = (ranked or errors or [None])[0]
    return [cycle.finding(lead, lead.rank)] if lead is not None else []


def _secondary(cycle: _Cycle, primary: list[Finding]) -> list[Finding]:
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
        findings = findings[: MAX_SECONDARY - 1] + [
            Finding(None, rest[0].nature, summary, rest[0].event)
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
