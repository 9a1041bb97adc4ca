"""The attribution rules, in the order they are tried (``RULES``); each gives the primary
findings of a cycle, or none when the rule does not apply. ``attribution`` explains the order."""

from __future__ import annotations

from collections.abc import Callable

from pytest_faultloop.analyzers.log.cycle_view import (
    JOB_KINDS,
    OWN_KINDS,
    CycleView,
    Finding,
    nature_of,
)
from pytest_faultloop.analyzers.log.line_facts import Kind, LineFact
from pytest_faultloop.analyzers.log.membership import CANNOT_FORM
from pytest_faultloop.analyzers.log.scan_events import Event
from pytest_faultloop.analyzers.log.signatures import tagged
from pytest_faultloop.analyzers.log.stack_dumps import (
    DUMPER,
    STACK,
    WAITS_IN_TORCH,
    snapshot,
)
from pytest_faultloop.analyzers.rank_ranges import rank_ranges
from pytest_faultloop.models.faults import Nature

MAX_PRIMARY_RANKS = 8
"""More silent ranks than this are reported as one primary issue, not one per rank."""
BARRIER_TIMEOUTS = tagged("init-timeout")
"""Entries whose timeout is an initialization's: its members never all arrived."""
MEMBERSHIP_STEPS = tagged("membership-step")
"""Initialization steps that say who arrived (a log ending on one stopped there)."""
STORE_CLIENTS = tagged("store-client")
STORE_SERVERS = tagged("store-server")
"""A client that cannot reach the rendezvous store, and its server's failure to listen."""
ABORT_LINES = 20
"""How far after an exception its process's MPI_Abort report may come (Open MPI's box begins
with a rule line; ranks' output may interleave)."""
NODE_LOST = "went silent with its launcher (died without a word or a report: node lost)"
"""What ranks that died silently with their launcher did (the ``node_lost`` cause reads it)."""


def hard_failure(cycle: CycleView) -> list[Finding]:
    """The earliest own hard failure; other ranks' own failures (GPU error, crash, exception)
    from before any rank failed as a victim are independent: culprits too. Failures after the
    scheduler ended the job (time limit, preemption) are its consequences."""
    candidates: list[Finding] = []
    for event in cycle.events:
        role = cycle.role(event)
        if role == "hard" and not event.report and _own_failure(cycle, event):
            rank = event.rank if event.rank is not None else _owner(cycle, event)
            candidates.append(cycle.finding(event, rank))
        elif event.kind is Kind.NAMED:
            candidates.extend(_named(cycle, event))
    ended = next((e.line for e in cycle.events if e.kind is Kind.SCHEDULER), None)
    if ended is not None:  # the scheduler's end explains the failures after it
        candidates = [f for f in candidates if f.event.line < ended]
    explained = {id(f) for f in candidates if _explained_by_a_peer(f, candidates)}
    candidates.sort(key=lambda f: id(f) in explained)  # stable: log order otherwise
    if odd := _odd_one_out(cycle, candidates):
        return odd
    if candidates and (shared := _shared_peer(cycle, candidates[0])):
        return [shared]
    lead = candidates[:1]
    taken = {f.rank for f in lead}
    for found in candidates[1:]:
        own = found.event.kind in OWN_KINDS
        independent = own and (cycle.before_victims(found.event) or _never_a_victim(cycle, found))
        named_too = _named_with(lead[0], found)
        if (independent or named_too) and found.rank is not None and found.rank not in taken:
            lead.append(found)
            taken.add(found.rank)
    return lead


def _never_a_victim(cycle: CycleView, found: Finding) -> bool:
    """A rank that died of its own (a crash) without a word of a peer's failure first: its
    end is its own wherever the log prints it (a report of it comes when the reporter looks:
    Ray's raylet and controller), unlike a victim's crash in its own teardown."""
    return found.event.kind is Kind.CRASH and not any(
        e.rank == found.rank and not e.report and cycle.role(e) == "victim" for e in cycle.events
    )


def _explained_by_a_peer(found: Finding, candidates: list[Finding]) -> bool:
    """A network error where another rank's GPU fault or crash is in the cycle, whatever the
    order they were printed in: a dead peer's connections fail on its partners (InfiniBand's
    retry-exceeded completion error, a reset socket), while no network failure makes a GPU
    fault or a segfault. A store client that cannot connect where the store's server failed
    to listen: it waits for a server that never started (``_store_never_listened``)."""
    if _store_never_listened(found, candidates):
        return True
    return found.event.kind is Kind.NETWORK and any(
        other.event.kind in (Kind.GPU_ERROR, Kind.CRASH)
        and other.rank is not None
        and other.rank != found.rank
        and not _same_process(found.event, other.event)
        for other in candidates
    )


def _store_never_listened(found: Finding, candidates: list[Finding]) -> bool:
    """A client's connect failure to the rendezvous store (refused, timed out) where a
    store's server in the cycle failed to listen (its port in use), whatever order the nodes'
    logs were joined in: the clients aim at the one endpoint the job was given."""
    return found.event.fact.signature in STORE_CLIENTS and any(
        other.event.fact.signature in STORE_SERVERS for other in candidates
    )


def _same_process(one: Event, other: Event) -> bool:
    """Two lines of one process, as their hosts and pids tell (NCCL's ``host:pid:tid``)."""
    return one.process is not None and (one.fact.node, one.process) == (
        other.fact.node,
        other.process,
    )


def _odd_one_out(cycle: CycleView, candidates: list[Finding]) -> list[Finding]:
    """Where ranks' own failures each blame one peer (a collective mismatch every rank
    raises, naming the first peer whose collective differs from its own), the peer most of
    them blame: its own failure, else theirs. Two ranks that blame each other tie: no answer."""
    blamers: dict[int, set[int]] = {}
    for found in candidates:
        if found.event.kind in OWN_KINDS and found.rank is not None:
            for peer in set(found.event.fact.named) - {found.rank}:
                blamers.setdefault(peer, set()).add(found.rank)
    counts = sorted((len(by) for by in blamers.values()), reverse=True)
    # one report is one rank's view: the rank it blames may be the one out of step itself
    if not counts or counts[0] < 2 or (len(counts) > 1 and counts[1] == counts[0]):
        return []
    culprit = max(blamers, key=lambda rank: len(blamers[rank]))
    own = next((f for f in candidates if f.rank == culprit), None)
    if own is not None:
        return [own]
    blamed = next(f for f in candidates if f.rank in blamers[culprit])
    by = rank_ranges(sorted(blamers[culprit]))
    return [cycle.finding(blamed.event, culprit, f"blamed by rank {by}: {blamed.summary}")]


def _shared_peer(cycle: CycleView, lead: Finding) -> Finding | None:
    """Several ranks that each lost their link to the same remote peer (NCCL's ``Got
    completion from peer ADDR``): the peer, or the path to it, is what they share, not any
    one of them; named by its address."""
    peer = _peer_host(lead.event)
    if not peer:
        return None
    ranks = sorted(
        rank
        for rank, event in cycle.first.items()
        if event.kind is Kind.NETWORK and _peer_host(event) == peer
    )
    if len(ranks) < 2:
        return None
    summary = f"ranks {rank_ranges(ranks)} lost their link to peer {peer}: {lead.event.fact.detail}"
    return Finding(None, Nature.NETWORK, summary, lead.event, peer)


def _peer_host(event: Event) -> str:
    """The remote address a network error names (``10.0.0.1<50210>``: without the port)."""
    return event.fact.extra.get("peer", "").split("<")[0]


def _named_with(lead: Finding, found: Finding) -> bool:
    """Both ranks named by one report: the same line (``Ranks 1, 3 failed to pass
    monitoredBarrier``), or lines of the same reporting rank (one per rank it waited for)."""
    if lead.event.kind is not Kind.NAMED or found.event.kind is not Kind.NAMED:
        return False
    reporter = lead.event.rank
    return found.event is lead.event or (reporter is not None and found.event.rank == reporter)


def _own_failure(cycle: CycleView, event: Event) -> bool:
    """The rank's first failure on its timeline; an unranked line unless a later one names
    the cause it only reports."""
    if event.rank is None:
        return not cycle.explained_later(event)
    return cycle.first.get(event.rank) is event


def _owner(cycle: CycleView, event: Event) -> int | None:
    """The rank of an unprefixed error, from a later line about the same failure: the same
    error naming its rank (PyTorch prints ``CUDA error: X`` bare, then ``[Rank N] ... CUDA
    error: X`` from its watchdog), or the launcher's report of one rank ending the same way
    (``Fatal Python error`` then ``exitcode: -6 local_rank: 3``; an OOM kill, then srun's
    ``task 0: Out Of Memory``); a Ray task error that wraps the one of the worker that
    raised it (the driver's ``RayTaskError(ValueError)``, then the worker's, its pid named);
    the process's own MPI_Abort right after the exception, naming its rank (Open MPI's
    ``MPI_ABORT was invoked on rank 5``, MPICH's ``Abort(1) on node 5 (rank 5 in comm 0)``).
    Of the launcher's reports, the root cause's comes first: torchrun lists the other
    failures above it, so the first report in the log is not the first failure."""
    reports: list[Event] = []
    for later in cycle.events:
        if later.line <= event.line or later.rank is None:
            continue
        same_error = later.kind is event.kind and (
            later.fact.detail == event.fact.detail or _same_task_error(event, later)
        )
        aborted = "abort" in later.fact.extra and later.line - event.line <= ABORT_LINES
        if (same_error or (aborted and later.kind is event.kind)) and not reports:
            return later.rank
        if later.report and _ends_alike(later, event):
            reports.append(later)
    reports.sort(key=lambda e: not e.root_cause)
    return reports[0].rank if reports else None


def _ends_alike(report: Event, event: Event) -> bool:
    """A launcher's report of a rank's end fits the error: the same nature, or an exit code
    (Python exits with 1 on any uncaught error, a CUDA error's RuntimeError too)."""
    raised = event.kind in (Kind.EXCEPTION, Kind.GPU_ERROR)
    return nature_of(report) is nature_of(event) or (report.kind is Kind.EXIT and raised)


def _same_task_error(outer: Event, inner: Event) -> bool:
    task_error = outer.fact.extra.get("task_error")
    return task_error is not None and inner.fact.extra.get("task_error") == task_error


def _named(cycle: CycleView, event: Event) -> list[Finding]:
    findings = []
    for rank in event.fact.named:
        own = cycle.first.get(rank)
        if rank == event.rank or (own is not None and cycle.role(own) == "hard"):
            continue
        by = f"rank {event.rank}" if event.rank is not None else "a peer"
        findings.append(cycle.finding(event, rank, f"named by {by}: {event.fact.detail}"))
    return findings


def signal_or_job(cycle: CycleView) -> list[Finding]:
    """The first signal or job event before any victim; else the launchers' reports of ranks
    that ended by a signal or a hard failure without a word of their own: the root cause, and
    every other rank among them that crashed (each died on its own)."""
    in_stream = [
        cycle.finding(e, e.rank)
        for e in cycle.events
        if not e.report
        and cycle.before_victims(e)
        and not cycle.waits_at_init(e)
        and (
            (e.rank is None and e.kind in JOB_KINDS)
            or (cycle.role(e) == "signal" and (e.rank is None or cycle.first.get(e.rank) is e))
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
        and not (cycle.role(e) == "signal" and cycle.waits_at_init(e))
    ]
    reports.sort(key=lambda e: (not e.root_cause, e.line))
    # a rank reported dead by a crash without a word of a peer's failure died on its own
    lead = reports[:1] + [e for e in reports[1:] if nature_of(e) is Nature.CRASH]
    return [cycle.finding(e, e.rank) for e in lead]


def _hung_then_killed(cycle: CycleView, report: Event) -> bool:
    """A silent rank reported killed after its peers timed out waiting for it: it hung."""
    return (
        not report.root_cause
        and report.rank not in cycle.speaking
        and cycle.first_victim is not None
        and cycle.first_victim.kind is Kind.TIMEOUT
    )


def membership(cycle: CycleView) -> list[Finding]:
    """An initialization that never finished: the process group's (``_joined``), else the
    latest NCCL communicator's that some of the world's ranks never completed while every
    other rank did and nothing but the job's end came after (``_unfinished_comm``)."""
    return _joined(cycle) or _unfinished_comm(cycle)


def _joined(cycle: CycleView) -> list[Finding]:
    """An initialization that never finished (the log ends on a membership line, or a rank
    timed out at the barrier): a launch whose members conflict cannot form its group at all
    (no rank is to blame); else the members absent while every other one waits for them,
    ending as a launcher reports them."""
    members = cycle.membership
    if not members.seen or members.complete:
        return []
    barrier_timeouts = [
        e for e in cycle.events if e.kind is Kind.TIMEOUT and e.fact.signature in BARRIER_TIMEOUTS
    ]
    step = cycle.stalled_init
    if barrier_timeouts:
        event = barrier_timeouts[0]
    elif step is not None and step.fact.signature in MEMBERSHIP_STEPS:
        event = step  # the log ends on a membership line: the start stopped there
    else:
        return []
    # only a start that got stuck shows a conflict: an old warning of a group that formed
    # later, or two runs' claims, do not
    conflict = members.conflict()
    if conflict:
        summary = f"{CANNOT_FORM}: {conflict} (duplicate ranks, or another job on its store)"
        return [Finding(None, Nature.HANG, summary, event)]
    absent = members.absent(spoke=cycle.spoke)
    if not absent and members.joined is not None and members.world:
        # the store's count says how many are missing: the log's silent ranks are more
        missing = members.world - members.joined
        summary = (
            f"{missing} rank(s) never joined the process group ({members.joined} of "
            f"{members.world} arrived); the log does not tell which"
        )
        return [Finding(None, Nature.HANG, summary, event)] if missing > 0 else []
    if not absent:
        return []
    summary = (
        f"never joined the process group ({members.joined} of {members.world} ranks arrived "
        "and wait for it at initialization)"
    )
    found = _ranks_finding(cycle, absent, event, summary, False)
    return [_reported_exit(cycle, f) for f in found]


def _unfinished_comm(cycle: CycleView) -> list[Finding]:
    """The ranks that never printed NCCL's ``Init COMPLETE`` where every other rank of the
    communicator did and waits for them (NCCL's init needs every rank), ending as a launcher
    reports them; the wait starts at the latest init line."""
    if cycle.unfinished_comm is None:
        return []
    comm, init, absent = cycle.unfinished_comm
    summary = (
        f"never finished NCCL communicator init ({len(init.completed)} of {init.nranks} ranks "
        f"printed Init COMPLETE for {comm} and wait for it)"
    )
    event = Event(init.last_line, LineFact(Kind.PROGRESS, summary), init.last_text, None)
    found = _ranks_finding(cycle, absent, event, summary, False)
    return [_reported_exit(cycle, f) for f in found]


def hang(cycle: CycleView) -> list[Finding]:
    first_victim = cycle.first_victim
    if first_victim is None:
        return []
    failed = {r for r, e in cycle.first.items() if cycle.role(e) == "victim" and not e.report}
    silent = sorted(cycle.shown - cycle.speaking - failed) if not _dumps_only(cycle) else []
    if cycle.stopping_after in silent:  # the others ran until the launcher stopped them
        silent = [cycle.stopping_after]
    silent = _ended_on_their_own(cycle, silent)
    died = _went_away(cycle, silent, failed, first_victim)
    context = _victims_context(cycle, failed, first_victim)
    peers = _lost_peers(cycle, failed)
    if died and peers:
        summary = f"went away: its peers lost their connection to it while {context}"
        found = _ranks_finding(cycle, peers, first_victim, summary, died)
        return [_unranked_report(cycle, f) for f in found]
    if silent and len(silent) < len(cycle.world):
        verb = "went silent (died without a word)" if died else "was silent (hung)"
        if died and _launcher_gone(cycle, silent):
            verb = NODE_LOST
        found = _ranks_finding(cycle, silent, first_victim, f"{verb} while {context}", died)
        return [_silent_end(cycle, f) for f in found] if died else found
    if elsewhere := _stuck_elsewhere(cycle):
        return _stuck_findings(cycle, elsewhere, failed, first_victim)
    late = behind(cycle)
    if late:
        # a rank behind may have printed a timeout too (another's dump signal): not "other"
        context = _victims_context(cycle, failed - set(late), first_victim)
        summary = f"behind in the NCCL watchdog counters while {context}"
        return _ranks_finding(cycle, late, first_victim, summary, died)
    stuck = sorted(r for r, e in cycle.first.items() if e.kind is Kind.WATCHDOG_STUCK)
    if stuck:
        return _ranks_finding(
            cycle,
            stuck,
            cycle.first[stuck[0]],
            "watchdog stuck: its GPU work hangs",
            False,
        )
    if cut := _cut_off(cycle, failed, first_victim):
        return [_broken_link(cycle, cycle.first[r]) for r in cut]
    # in a log of some of the nodes, the first failure it shows answers a peer elsewhere
    whole_world = cycle.shown == cycle.world
    if died and whole_world and (first := _launchers_first(cycle, context)):
        return first
    summary = f"{context}; the log does not tell which rank held them up"
    return [Finding(None, Nature.NETWORK if died else Nature.HANG, summary, first_victim)]


def _dumps_only(cycle: CycleView) -> bool:
    """Are py-spy's or gdb's dumps the only victims? A user dumps the processes they pick: a
    rank not dumped is not silent, only not looked at."""
    victims = [e for e in cycle.events if cycle.role(e) == "victim" and not e.report]
    return bool(victims) and all(map(snapshot, victims))


def _stuck_elsewhere(cycle: CycleView) -> list[Event]:
    """The stack dumps (``stack_dumps``: faulthandler's, py-spy's, gdb's) of processes with no
    thread waiting in torch.distributed, where more dumped processes wait there: those wait for
    them in a collective. A rank's dump where it is its first failure; a dump whose pid no line
    ties to a rank stands for its process."""
    dumps = [e for e in cycle.first.values() if STACK in e.fact.extra]
    dumps += [e for e in cycle.events if e.rank is None and STACK in e.fact.extra]
    waiting = sum(1 for e in dumps if e.fact.extra[STACK] == WAITS_IN_TORCH)
    elsewhere = [e for e in dumps if e.fact.extra[STACK] != WAITS_IN_TORCH]
    return elsewhere if elsewhere and len(elsewhere) < waiting else []


def _stuck_findings(
    cycle: CycleView, elsewhere: list[Event], failed: set[int], first_victim: Event
) -> list[Finding]:
    """The processes stuck outside torch.distributed: by rank, else by the pid their dump
    names (no rank is guessed for a process no line ties to one)."""
    ranks = sorted(e.rank for e in elsewhere if e.rank is not None)
    others = _victims_context(cycle, failed - set(ranks), first_victim)
    dumper = elsewhere[0].fact.extra[DUMPER]
    summary = (
        f"hung outside torch.distributed (its {dumper} dump: no thread in a collective) "
        f"while {others}"
    )
    found = _ranks_finding(cycle, ranks, cycle.first[ranks[0]], summary, False) if ranks else []
    for event in elsewhere:
        if event.rank is None:
            process = f"process {event.process} " if event.process is not None else ""
            found.append(Finding(None, Nature.HANG, process + summary, event, event.fact.node))
    return found


def _launchers_first(cycle: CycleView, context: str) -> list[Finding]:
    """Where every victim lost a peer, the rank the launcher saw fail first (torchrun's Root
    Cause), as that rank's own lines tell what happened to it."""
    for root in cycle.events:
        if root.root_cause and root.rank is not None:
            own = cycle.first.get(root.rank)
            event = own if own is not None and not own.report else root
            summary = f"{event.fact.detail}, the launcher's first observed failure, while {context}"
            return [
                Finding(root.rank, nature_of(event), summary, event, cycle.nodes.get(root.rank))
            ]
    return []


def _cut_off(cycle: CycleView, failed: set[int], first_victim: Event) -> list[int]:
    """Ranks that lost a peer's connection first, where every other rank timed out later: the
    peer was alive (it waited and timed out), so no process died; the connection broke."""
    if first_victim.kind is not Kind.PEER_LOST or failed != cycle.world:
        return []
    lost = sorted(r for r in failed if cycle.first[r].kind is Kind.PEER_LOST)
    timed_out = {r for r in failed if cycle.first[r].kind is Kind.TIMEOUT}
    whole = timed_out and timed_out | set(lost) == failed
    return lost if whole and len(lost) <= MAX_PRIMARY_RANKS else []


def _broken_link(cycle: CycleView, lost: Event) -> Finding:
    summary = (
        "lost its connection to a peer while every other rank waited on, alive, until its "
        f"collectives timed out: the network between them ({lost.fact.detail})"
    )
    rank = lost.rank
    node = cycle.nodes.get(rank) if rank is not None else None
    return Finding(rank, Nature.NETWORK, summary, lost, node)


def _reported_exit(cycle: CycleView, found: Finding) -> Finding:
    """A silent rank that died, as its launcher reports its end: an exit code is an error
    exit (its exception went unlogged), not a crash (mpirun's ``Process name: [[j,1],0] /
    Exit code: 1`` while Horovod's other ranks were shut down)."""
    report = cycle.first.get(found.rank) if found.rank is not None else None
    if report is None or not report.report or cycle.role(report) != "weak":
        return found
    summary = f"{report.fact.detail} (the launcher's report), {found.summary}"
    return Finding(found.rank, nature_of(report), summary, report, found.node)


def _silent_end(cycle: CycleView, found: Finding) -> Finding:
    """A silent rank that died, as a launcher's report tells its end: its own report, else
    the signal a report naming no rank gives (DeepSpeed's launcher prints the failed
    process's return code beside the last command it built, not the failed one's)."""
    reported = _reported_exit(cycle, found)
    return reported if reported is not found else _unranked_report(cycle, found)


def _lost_peers(cycle: CycleView, failed: set[int]) -> list[int]:
    """The ranks lost peers name as the one they lost (MPICH's ``Communication error with
    rank 5``), but for ranks that failed as victims themselves (alive: a broken link)."""
    named = {
        r
        for e in cycle.events
        if e.kind is Kind.PEER_LOST and not e.report and cycle.role(e) == "victim"
        for r in e.fact.named
    }
    return sorted(named - failed)


def _unranked_report(cycle: CycleView, found: Finding) -> Finding:
    """A rank that went away, as the launcher's report naming no rank tells its end (MPICH's
    BAD TERMINATION block gives a pid, then ``EXIT STRING: Killed (signal 9)``)."""
    reports = [e for e in cycle.events if e.report and e.rank is None and cycle.role(e) == "signal"]
    if not reports:
        return found
    report = reports[0]
    summary = f"{report.fact.detail} (the launcher's report), {found.summary}"
    return Finding(found.rank, nature_of(report), summary, report, found.node)


def _ended_on_their_own(cycle: CycleView, silent: list[int]) -> list[int]:
    """Of the silent ranks, those a launcher's report says ended on their own (an exit, a
    crash), where others were quiet until their launcher stopped them: those were alive and
    only said nothing (a quiet victim), the ones that ended first are the culprits."""
    ends = {r: e for r in silent if (e := cycle.first.get(r)) is not None and e.report}
    stopped = {r for r, e in ends.items() if cycle.role(e) == "victim"}
    own = [r for r, e in ends.items() if r not in stopped]
    return own if stopped and own else silent


def _went_away(cycle: CycleView, silent: list[int], failed: set[int], first_victim: Event) -> bool:
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


def _launcher_gone(cycle: CycleView, silent: list[int]) -> bool:
    """Ranks that died silently and that no launcher reported, where launchers report their
    ranks' ends (the others' are in the log), or where an agent kept failing to reach its
    rendezvous (hosted by another node's agent): their launcher died with them, as on a lost
    node. Not where their own node's launcher printed a failure table of its workers."""
    reported = cycle.reported
    if reported & set(silent) or cycle.launchers_heard & set(silent):
        return False  # reported, or its launcher reported its node-mates after it
    if reported or cycle.rendezvous_lost:
        return True
    return not cycle.heartbeats_heard and _node_block(len(cycle.world), silent)


def _node_block(world: int, silent: list[int]) -> bool:
    """Are the ranks that died silently one node's, as launchers number them: several, in
    one run of consecutive ranks that starts at a multiple of its length, which divides the
    world (Lightning's and torchrun's ranks are node_rank x per-node + local rank)? Every
    other rank lost its connection to them at once."""
    count = len(silent)
    return (
        1 < count < world
        and world % count == 0
        and silent[0] % count == 0
        and silent == list(range(silent[0], silent[0] + count))
    )


def _victims_context(cycle: CycleView, failed: set[int], first: Event) -> str:
    dumped = sum(1 for r in failed if snapshot(cycle.first[r]))
    lost = sum(1 for r in failed if cycle.first[r].kind is Kind.PEER_LOST)
    timed_out = len(failed) - lost - dumped
    parts = [f"{timed_out} other rank(s) timed out waiting in collectives"] if timed_out else []
    parts += [f"{dumped} other rank(s) were dumped (py-spy, gdb)"] if dumped else []
    parts += [f"{lost} lost their connection to a peer"] if lost else []
    waiting = " and ".join(parts) or "ranks the log does not name timed out or lost a peer"
    return f"{waiting} (first: {first.fact.detail})"


def _ranks_finding(
    cycle: CycleView, ranks: list[int], event: Event, summary: str, died: bool
) -> list[Finding]:
    nature = Nature.CRASH if died else Nature.HANG
    if len(ranks) > MAX_PRIMARY_RANKS:
        return [Finding(None, nature, f"ranks {rank_ranges(ranks)} {summary}", event)]
    return [Finding(r, nature, summary, event, cycle.nodes.get(r)) for r in ranks]


def behind(cycle: CycleView) -> list[int]:
    """Ranks whose watchdog saw fewer enqueued collectives than their group's leaders."""
    by_pg: dict[str, dict[int, int]] = {}
    for event in cycle.events:
        if (
            event.kind is Kind.PROGRESS
            and event.rank is not None
            and event.fact.enqueued is not None
        ):
            by_pg.setdefault(event.fact.pg or "", {})[event.rank] = event.fact.enqueued
    late_ranks: set[int] = set()
    for counters in by_pg.values():
        if len(counters) > 1 and len(set(counters.values())) > 1:
            lowest = min(counters.values())
            late_ranks |= {r for r, enqueued in counters.items() if enqueued == lowest}
    return sorted(late_ranks)


def exit_code(cycle: CycleView) -> list[Finding]:
    """Only exit codes (or job events after the collective failures) are left."""
    weak = [e for r, e in cycle.first.items() if cycle.role(e) == "weak"]
    weak.sort(key=lambda e: (not e.root_cause, e.line))
    if weak:
        return [cycle.finding(weak[0], weak[0].rank)]
    jobs = [e for e in cycle.events if e.rank is None and e.kind in JOB_KINDS]
    if jobs:
        return [cycle.finding(jobs[0], None)]
    unranked = [
        e
        for e in cycle.events
        if e.rank is None and e.report and cycle.role(e) in ("signal", "hard", "weak")
    ]
    # a report that names the signal says more than one that gives only an exit code
    unranked.sort(key=lambda e: cycle.role(e) == "weak")
    return [cycle.finding(unranked[0], None)] if unranked else []


def fallback(cycle: CycleView) -> list[Finding]:
    """An error-level line no rule placed: a line its logger marked error-level, or a
    traceback the log ends inside (cut before its exception line); a ranked one first.
    Never "no failure" with one in the log."""
    evidence = [e for e in cycle.events if e.kind is Kind.ERROR_LINE]
    if cycle.cut_traceback is not None:
        evidence = sorted([*evidence, cycle.cut_traceback], key=lambda e: e.line)
    ranked = [e for e in evidence if e.rank is not None]
    lead = next(iter(ranked or evidence), None)
    return [cycle.finding(lead, lead.rank)] if lead is not None else []


def stalled_init(cycle: CycleView) -> list[Finding]:
    """A log whose last line is a rendezvous or store connection step stopped there: the
    ranks hang in initialization (its rank only where the line carries one)."""
    step = cycle.stalled_init
    return [cycle.finding(step, step.rank)] if step is not None else []


Rule = Callable[[CycleView], list[Finding]]
RULES: tuple[tuple[str, Rule], ...] = (
    ("hard_failure", hard_failure),
    ("signal_or_job", signal_or_job),
    ("membership", membership),
    ("hang", hang),
    ("exit_code", exit_code),
    ("fallback", fallback),
    ("stalled_init", stalled_init),
)
"""(name, rule) in order: the first rule with findings decides."""
