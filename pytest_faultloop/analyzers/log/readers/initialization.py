"""Process-group initialization (c10d's store and barrier, gloo's connectivity, Lightning's
and NCCL's bootstrap): who arrived, and the step a hung initialization stopped at."""

from __future__ import annotations

import re
from typing import ClassVar

from pytest_faultloop.analyzers.log.line_facts import Kind
from pytest_faultloop.analyzers.log.line_wrappers import PeeledLine
from pytest_faultloop.analyzers.log.membership import Membership
from pytest_faultloop.analyzers.log.readers.context import (
    ScanContext,
    marked_rank,
    number_field,
    rank_field,
)
from pytest_faultloop.analyzers.log.scan_events import Event
from pytest_faultloop.analyzers.log.signatures import Signature, line_fact
from pytest_faultloop.analyzers.log.stack_dumps import TORCH_FILE

STORE_FRAME_LINES = 6
"""How far after a traceback's last frame (and its source lines) its exception line comes."""
_WORKER_STORE_FRAME = re.compile(r"torch[/\\]distributed[/\\]rendezvous\.py")
"""A worker's rendezvous (init_process_group), where only rank 0 hosts the store."""


class InitializationReader:
    """The cycle's membership (``Cycle.membership``) and initialization steps; no state of
    its own."""

    HANDLERS: ClassVar[tuple[str, ...]] = (
        "init_step",
        "barrier_wait",
        "barrier_timeout",
        "group_formed",
        "rank_claim",
        "duplicate_rank",
        "store_server_in_use",
        "gloo_connectivity",
        "gloo_not_connected",
    )

    def __init__(self, ctx: ScanContext) -> None:
        self.ctx = ctx

    def on_init_step(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """A rendezvous or store connection step: the log's last word if initialization hung."""
        self.ctx.init_step(line_no, line, match, signature)  # this rank is there

    def on_barrier_wait(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """A rank at the process group's store barrier (waiting, or its key added): a member
        that arrived, and an initialization step the log may end on (no rank to blame: this
        one is there)."""
        world, joined = number_field(match, "world"), number_field(match, "joined")
        self._members(line_no, world, joined).note(world, joined, rank_field(match))
        self.ctx.init_step(line_no, line, match, signature)

    def on_barrier_timeout(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """A rank (or the master store) gave up waiting for the group's members: a timeout of
        that rank, with the store's count of those who came."""
        groups = match.groupdict()
        rank = number_field(match, "rank") if groups.get("rank") is not None else marked_rank(line)
        world, joined = number_field(match, "world"), number_field(match, "joined")
        self._members(line_no, world, joined).note(world, joined, rank)
        fact = line_fact(signature, match, Kind.TIMEOUT)
        fact.node = line.host
        self.ctx.cycle.add(Event(line_no, fact, line.text, rank))

    def on_group_formed(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        self._members(line_no, None).complete = True

    def on_rank_claim(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """A process's banner naming the rank it will join as, before it joins."""
        rank, world = int(match["rank"]), int(match["world"])
        self._members(line_no, world, claimed=rank).claim(rank, world)
        self.ctx.note_world(world)
        self.ctx.init_step(line_no, line, match, signature)

    def on_duplicate_rank(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """NCCL's bootstrap root saw a rank check in twice, or rank counts that disagree."""
        fact = line_fact(signature, match, Kind.PROGRESS)
        world = number_field(match, "world")
        members = self._members(line_no, world)
        members.duplicate = fact.detail
        members.note(world, None, None)
        self.ctx.init_step(line_no, line, match, signature)

    def _members(
        self,
        line_no: int,
        world: int | None,
        joined: int | None = None,
        claimed: int | None = None,
    ) -> Membership:
        """The membership a line at ``line_no`` adds to: a new one where another run's
        initialization starts (a requeue, a second run in one log)."""
        if self.ctx.cycle.membership.starts_over(world, joined, claimed):
            self.ctx.cycle.membership = Membership()
        self.ctx.cycle.membership.last_line = line_no
        return self.ctx.cycle.membership

    def on_store_server_in_use(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> bool:
        """The rendezvous store's server could not bind its port. A worker's init hosts it
        only on global rank 0 (``torch/distributed/rendezvous.py``: ``start_daemon = rank ==
        0`` in every version), so a traceback through that file is rank 0's; torchrun's agent
        hosts it itself (``torch/distributed/elastic``): no worker rank. The bare ``Address
        already in use`` is the store's only behind a ``torch.distributed`` frame. socket.cpp's
        own log line of the failure, outside an exception, is a store step the log may end on:
        torchrun's c10d rendezvous backend retries as a client where it only guessed it hosts
        the store."""
        frame = self.ctx.cycle.traceback_line
        last_frame = frame.text if frame and line_no - frame.line <= STORE_FRAME_LINES else ""
        raised = match["raised"] is not None or TORCH_FILE.search(last_frame) is not None
        if match["listen"] is None and not raised:
            return False
        rank = self.ctx.line_rank(line_no, line)
        if rank is None and _WORKER_STORE_FRAME.search(last_frame):
            rank = 0
        fact = line_fact(signature, match, Kind.EXCEPTION)
        fact.node = line.host
        event = Event(line_no, fact, line.text, rank)
        if raised:
            self.ctx.cycle.add(event)
        else:  # the exception follows, or the agent joins as a client: a failure only at the end
            self.ctx.cycle.init_step = event
        return True

    def on_gloo_connectivity(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """A gloo context connected at initialization: the peers it expects give the world;
        the world's context (a sub-group's is smaller, and numbers its own ranks) gives the
        rank of the process whose line it is, and that it got there."""
        rank, world = int(match["rank"]), int(match["peers"]) + 1
        # a context smaller than the processes the log shows is a sub-group's
        if world < max(self.ctx.world_size or 0, len(self.ctx.tee_locals)):
            return
        self.ctx.note_world(world)
        self.ctx.cycle.connectivity.add(rank)
        if line.local_rank is not None and line.rank is None:
            stated = self.ctx.stated_ranks.setdefault(line.source, {})
            if rank in stated.values() and stated.get(line.local_rank) != rank:
                stated.clear()  # two processes claim one rank: these contexts are sub-groups
                return
            stated.setdefault(line.local_rank, rank)

    def on_gloo_not_connected(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """The peers a gloo context has no connection to: named once the log is read
        (``Cycle.name_unconnected``)."""
        fact = line_fact(signature, match, Kind.NAMED)
        self.ctx.cycle.unconnected.append(Event(line_no, fact, line.text, int(match["rank"])))
