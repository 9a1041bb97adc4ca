"""The events of a log's last restart cycle as the attribution rules see them: the first
failure of every rank, each event's role (hard failure, signal, victim, weak), the world."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pytest_faultloop.analyzers.log.line_facts import VICTIM_KINDS, Kind
from pytest_faultloop.analyzers.log.membership import CommunicatorInit, NcclInits
from pytest_faultloop.analyzers.log.scan_events import Event, ScanResult
from pytest_faultloop.analyzers.log.signatures import tagged
from pytest_faultloop.models.faults import Nature

LAST_ERROR_LINES = 5
"""How far after "remote process exited or there was a network error" NCCL's own detail of
the error (``Last error:`` and its line) may come."""
NCCL_CHECK = "NCCL error in:"
"""PyTorch's wrapper of a failed NCCL call (C10D_NCCL_CHECK in NCCLUtils.hpp, 1.13-2.13): its
message ends with NCCL's ``Last error:`` detail, the real cause."""
CRASH_SIGNALS = frozenset({"SIGKILL", "SIGSEGV", "SIGABRT", "SIGBUS", "SIGILL", "SIGFPE"})
HARD_KINDS = frozenset({Kind.GPU_ERROR, Kind.CRASH, Kind.EXCEPTION, Kind.NETWORK})
OWN_KINDS = frozenset({Kind.GPU_ERROR, Kind.CRASH, Kind.EXCEPTION})
"""Failures of a process itself: never a consequence of a peer's."""
JOB_KINDS = frozenset({Kind.SCHEDULER, Kind.JOB_SIGNAL})
WATCHDOG_TEARDOWNS = tagged("watchdog-teardown")
"""PyTorch's ``Some NCCL operations have failed or timed out``: after a failure or a timeout."""
_TIME_LIMIT = re.compile(r"(?i)time ?limit|walltime|run ?limit|cpu ?limit|deadline")
"""A scheduler's end for running too long (Slurm's TIME LIMIT, PBS's walltime, LSF's
RUNLIMIT): what a hung job runs into."""
TEARDOWN_LINES = 500
"""How far after the work's end survivors' words that the store's host left are its teardown
(every rank's goodbye, NCCL's destroy lines); further on, the run went on after that line."""
STATUS = "status"
"""The catalogue's ``extra`` key of a pod's status line (kubectl describe's Reason and Message,
its Events): printed apart from the log stream, it may stand after the lines it explains."""
STORE_GONE = "store"
"""The catalogue's ``extra`` key of a rank's word that the store's host is gone (the heartbeat
monitor's failed poll): what every survivor prints when that host exits first, after a
successful run too."""
KEEP_ALIVE_FAILURES = 2
"""One agent's keep-alive failures that say its rendezvous host is gone (one is a race at
shutdown; the agent retries at every keep-alive interval, 5 s by default)."""
EVIDENCE_KINDS = frozenset({Kind.NAMED, Kind.PROGRESS, Kind.ERROR_LINE})
"""What a rank says of others (ranks it names, its watchdog counters) or an unknown error:
evidence the rules weigh, never the rank's own end."""


@dataclass
class Finding:
    """A rank (or the job, ``None``) and what happened to it, with the event that shows it."""

    rank: int | None
    nature: Nature
    summary: str
    event: Event
    node: str | None = None


def nature_of(event: Event) -> Nature:
    kind = event.kind
    if kind is Kind.SIGNAL:
        return Nature.CRASH if event.fact.signal_name in CRASH_SIGNALS else Nature.SIGNAL
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


class CycleView:
    """The events of one cycle, indexed the ways the rules need them."""

    def __init__(self, scan: ScanResult) -> None:
        self.events = scan.cycle.ordered()
        self.launcher_pids = scan.cycle.launcher_term_pids
        self.reported = scan.cycle.reported
        self.launchers_heard = scan.cycle.launchers_heard
        self.stopping_after = scan.cycle.stopping_after
        self.work_done = scan.cycle.work_done_line
        self.ended_ok = scan.cycle.ended_ok_line
        self.first: dict[int, Event] = {}
        for event in self.events:
            if event.rank is None or self.role(event) is None:
                continue
            known = self.first.get(event.rank)
            if known is None or _survived(known, event):
                self.first[event.rank] = event
        self.speaking = {e.rank for e in self.events if e.rank is not None and not e.report}
        victims = [e for e in self.events if self.role(e) == "victim" and not e.report]
        self.first_victim = victims[0] if victims else None
        self.nodes = {
            e.rank: e.fact.node for e in self.events if e.rank is not None and e.fact.node
        }
        ranks = set(scan.ranks_seen) | {e.rank for e in self.events if e.rank is not None}
        size = max(scan.world_size or 0, max(ranks, default=-1) + 1)
        self.world = set(range(size))
        self.shown = self.world if scan.covered is None else self.world & scan.covered
        """The ranks this log can show: a rank outside them is not silent, only absent (the
        log is some nodes' output)."""
        step = scan.cycle.init_step
        self.stalled_init = step if step is not None and step.line >= scan.last_line else None
        """The rendezvous or store connection step the log ends with: nothing came after."""
        self.membership = scan.cycle.membership
        failures = scan.cycle.keep_alive_failures.values()
        self.rendezvous_lost = max(failures, default=0) >= KEEP_ALIVE_FAILURES
        """An agent kept failing to reach its rendezvous: the node hosting it is gone."""
        self.heartbeats_heard = bool(scan.cycle.keep_alive_failures)
        """An agent's keep-alive warnings are in the log: they, not silence, tell a lost node."""
        self.spoke = {
            e.rank
            for e in self.events
            if e.rank is not None and not e.report and e.line > self.membership.last_line
        }
        """Ranks whose own lines come after the last membership line: they got past it."""
        self.unfinished_comm = self._unfinished_comm(scan.cycle.nccl_inits)
        """The latest NCCL communicator's init that world ranks never completed while the
        others did, where only the job's end came after it: (its id, the init, the ranks)."""
        frame = scan.cycle.traceback_line
        self.cut_traceback = frame if scan.cycle.traceback_cut else None
        """A traceback the log ends inside: its exception line was cut from the log."""

    def role(self, event: Event) -> str | None:
        """The event's part in the failure: ``hard`` (an origin: the process's own failure,
        a hang of its own included, which its monitor saw: nvrx's rank monitor), ``signal``
        (ended by a signal from outside), ``victim`` (a consequence of another's failure, or
        stopped by its launcher), ``weak`` (only an exit code); ``None`` for job events and
        context. The catalogue's role decides where the line came from an entry."""
        kind, fact = event.kind, event.fact
        if kind is Kind.SIGNAL:
            sigterm = fact.signal_name == "SIGTERM"
            stopped = fact.by_launcher or (sigterm and fact.pid in self.launcher_pids)
            return "victim" if stopped or fact.role == "consequence" else "signal"
        if kind in JOB_KINDS or kind in EVIDENCE_KINDS or self._teardown(event):
            return None
        if fact.role == "consequence" or (fact.role is None and kind in VICTIM_KINDS):
            return "victim"
        if kind in HARD_KINDS or (fact.role == "origin" and kind in VICTIM_KINDS):
            return "hard"
        if kind is Kind.EXIT:
            return "weak"
        return None

    def _teardown(self, event: Event) -> bool:
        """A rank's word that the store's host is gone, soon after a line said the work ended
        or before a tool's word that the run or its process ended well: the host exited first,
        as it does at the end of a successful run (no failure by itself); long after such a
        line (an epoch's "training complete"), the run went on."""
        if STORE_GONE not in event.fact.extra:
            return False
        done, ended_ok = self.work_done, self.ended_ok
        after_done = done is not None and 0 < event.line - done <= TEARDOWN_LINES
        return after_done or (ended_ok is not None and ended_ok > event.line)

    def _unfinished_comm(self, inits: NcclInits) -> tuple[str, CommunicatorInit, list[int]] | None:
        found = inits.absent(len(self.world))
        if found is None or not set(found[2]) <= self.shown:
            return None
        # only the job's end may follow: the run went on where anything else does (a line of
        # the init was lost), and a log that stops there may be a fragment pasted of a healthy
        # start (a sub-communicator's init, cut while its last ranks completed)
        after = inits.next_line
        if after is not None and any(e.line == after and self._ends_job(e) for e in self.events):
            return found
        return None

    def _ends_job(self, event: Event) -> bool:
        """An end from outside that a hung job gets: a signal that stops it (a launcher's, the
        user's cancel; not a crash's), the scheduler's time limit. A preemption or a lost node
        ends the job whatever it was doing: the cause, not the end of a hang."""
        stopped = event.kind is Kind.SIGNAL and event.fact.signal_name not in CRASH_SIGNALS
        timed_out = event.kind is Kind.SCHEDULER and bool(_TIME_LIMIT.search(event.fact.detail))
        return event.kind is Kind.JOB_SIGNAL or stopped or timed_out

    def waits_at_init(self, event: Event) -> bool:
        """The event came after ranks began waiting for a member that never finished its
        NCCL communicator's init: the hung job's end (a launcher's SIGTERM, a time limit)."""
        unfinished = self.unfinished_comm
        return unfinished is not None and event.line > unfinished[1].last_line

    def explained_later(self, event: Event) -> bool:
        """A later line of the same rank (or of none) names the cause this one only reports
        (NCCL's "Last error:" detail), or a Ray task error's cause is printed after it: for
        events no rank's timeline holds."""
        return any(
            (later.rank == event.rank and _names_its_cause(event, later)) or _wraps(event, later)
            for later in self.events
        )

    def before_victims(self, event: Event) -> bool:
        """The event came before any rank failed as a victim: a pod's status line counts as
        before, wherever it stands (its place in the log is not its time)."""
        first = self.first_victim
        return first is None or event.line < first.line or STATUS in event.fact.extra

    def finding(self, event: Event, rank: int | None, summary: str | None = None) -> Finding:
        node = self.nodes.get(rank) if rank is not None else event.fact.node
        return Finding(rank, nature_of(event), summary or event.fact.detail, event, node)


def _wraps(outer: Event, inner: Event) -> bool:
    """A Ray task error re-raised where its result was read (``RayTaskError(ActorDiedError)``)
    wraps the exception of that class printed after it: the dead actor's, the killed task's."""
    cause = outer.fact.extra.get("cause")
    return bool(cause) and inner.line > outer.line and inner.fact.extra.get("exception") == cause


def _survived(known: Event, later: Event) -> bool:
    """A logged exception followed by a collective timeout of the same rank did not end it
    (the watchdog's "failed or timed out" teardown names no timeout: it follows the rank's
    own NCCL error, a collective size mismatch);
    a traceback's first line gives way to what the traceback says; a message gives way to
    the cause it names (``_names_its_cause``); another's report of the rank's end gives way to
    the rank's own failure printed after it (Ray Train's ``Worker 6 has failed.``, then why)."""
    if "traceback" in known.fact.extra or _names_its_cause(known, later):
        return True
    if known.report and not later.report and later.kind in OWN_KINDS:
        return later.fact.role != "consequence"
    timed_out = later.kind is Kind.TIMEOUT and later.fact.signature not in WATCHDOG_TEARDOWNS
    return known.kind is Kind.EXCEPTION and timed_out and not later.report


def _names_its_cause(known: Event, later: Event) -> bool:
    """A lost peer, or PyTorch's ``NCCL error in: …`` exception (``unhandled system error``),
    gives way to the network or GPU error the same message names a few lines on (NCCL's
    "Last error:" detail)."""
    names_last_error = known.kind is Kind.PEER_LOST or (
        known.kind is Kind.EXCEPTION and NCCL_CHECK in known.fact.detail
    )
    return (
        names_last_error
        and later.kind in (Kind.NETWORK, Kind.GPU_ERROR)
        and 0 < later.line - known.line <= LAST_ERROR_LINES
    )
