"""Ray's and Ray Train's lines: an actor's death (ActorDiedError, its fields and death cause)
and which worker process holds which rank."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from pytest_faultloop.analyzers.log.line_facts import Kind
from pytest_faultloop.analyzers.log.line_wrappers import PeeledLine
from pytest_faultloop.analyzers.log.readers.context import ScanContext, marked_rank, number_field
from pytest_faultloop.analyzers.log.scan_events import Event
from pytest_faultloop.analyzers.log.signatures import Signature, line_fact, tagged

RAY_DEATH_LINES = 12
"""How far after Ray's ``The actor died unexpectedly`` (or after the death cause read last) its
fields and the death cause may come (python/ray/exceptions.py prints class, id, pid, name,
namespace and ip, one a line, then the cause)."""
RAY_DEATH_CAUSES = tagged("death-cause")
"""The death causes an ActorDiedError ends with (gcs_actor_manager.cc): each says what the
death it holds was; a later one details the one before (the node died: it was preempted)."""


@dataclass(slots=True)
class ActorDeath:
    """Ray's ActorDiedError, held from its first line over the dead actor's fields to the death
    cause it ends with: the pid names the worker (its rank), the cause what happened to it."""

    event: Event
    pid: int | None = None
    ip: str | None = None

    def holds(self, line_no: int) -> bool:
        return line_no - self.event.line <= RAY_DEATH_LINES


class RayReader:
    """The ActorDiedError held until its fields and death cause are read."""

    HANDLERS: ClassVar[tuple[str, ...]] = ("actor_died", "actor_field", "worker_pid")

    def __init__(self, ctx: ScanContext) -> None:
        self.ctx = ctx
        self.actor_death: ActorDeath | None = None
        """Ray's ActorDiedError, held until its fields and death cause are read."""

    def on_actor_died(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """Ray's ActorDiedError (the driver's report of a dead actor): held for the fields and
        the death cause that follow it."""
        self.flush_actor_death()
        fact = line_fact(signature, match, Kind.CRASH)
        fact.node = line.host
        event = Event(line_no, fact, line.text, marked_rank(line), report=True)
        self.actor_death = ActorDeath(event)

    def on_actor_field(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> bool:
        """The dead actor's ``pid:`` or ``ip:`` (the same words elsewhere are not its)."""
        held = self.actor_death
        if held is None or not held.holds(line_no):
            return False
        held.pid = number_field(match, "pid") or held.pid
        held.ip = match["ip"] or held.ip
        return True

    def death_cause(self, event: Event) -> bool:
        """A held ActorDiedError's death cause takes its place (True): it says what happened to
        the dead actor; the report's extra (the exception it was) stays with it."""
        held = self.actor_death
        cause = event.fact.signature in RAY_DEATH_CAUSES
        if held is None or not cause or not held.holds(event.line):
            return False
        event.fact.extra = {**held.event.fact.extra, **event.fact.extra}
        event.rank = held.event.rank if event.rank is None else event.rank
        held.event = event
        return True

    def flush_actor_death(self) -> None:
        """Record a held ActorDiedError (or the cause that took its place) as the dead actor's:
        its pid resolves to the worker's rank, its ip is the node. A preemption ends the
        node, not a rank: it keeps only the node."""
        held, self.actor_death = self.actor_death, None
        if held is None:
            return
        event = held.event
        event.fact.node = event.fact.node or held.ip
        if event.rank is None and event.kind not in (Kind.SCHEDULER, Kind.JOB_SIGNAL):
            event.process = held.pid
        self.ctx.cycle.add(event)

    def on_worker_pid(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """Ray Train's start-up: which worker process (pid) holds which global rank (the
        worker list's ``(node_id=.., ip=.., pid=..)`` is peeled as a collector's prefix)."""
        pid = number_field(match, "pid") or line.pid
        rank = int(match["rank"])
        if pid is not None and not self.ctx.cycle.processes.states(pid, line.host, rank):
            if self.ctx.cycle.processes.stated_rank(rank):
                self.ctx.new_cycle(line_no)  # a new worker group: Ray Train restarted it
            self.ctx.cycle.processes.state(pid, line.host, rank)
        self.ctx.ranks_seen.add(rank)
        self.ctx.note_world(number_field(match, "world"))
