"""NCCL's own lines: its WARNs (held for the error-return trace that confirms them), PyTorch's
``Last error:`` detail, InfiniBand ports that went down, connection retries."""

from __future__ import annotations

import re
from typing import ClassVar

from pytest_faultloop.analyzers.log.line_facts import Kind
from pytest_faultloop.analyzers.log.line_reading import LineReading
from pytest_faultloop.analyzers.log.line_wrappers import PeeledLine
from pytest_faultloop.analyzers.log.nccl_traces import NcclTraces
from pytest_faultloop.analyzers.log.readers.context import ScanContext
from pytest_faultloop.analyzers.log.scan_events import Event
from pytest_faultloop.analyzers.log.signatures import Signature, line_fact


class NcclReader:
    """NCCL's WARNs, last errors and port events, by process (host, pid)."""

    HANDLERS: ClassVar[tuple[str, ...]] = (
        "nccl_warn",
        "last_error",
        "nccl_trace",
        "ib_port_event",
        "retrying",
    )

    def __init__(self, ctx: ScanContext) -> None:
        self.ctx = ctx
        self.nccl_traces = NcclTraces()
        """NCCL's WARNs no entry reads, held for the error-return trace that confirms them."""
        self.last_error: tuple[int, int | None] | None = None
        """(line, rank) of PyTorch's ``Last error:``: the next line is NCCL's last WARN text."""
        self.ports_down: dict[tuple[str | None, int | None], Event] = {}
        """InfiniBand ports NCCL's processes saw go down, until one says it is active again."""

    def follow(self, line_no: int, line: PeeledLine, reading: LineReading) -> None:
        """NCCL's own lines (``host:pid:tid [dev] NCCL INFO``) keep an init the latest thing
        the run did; any other line read says more came after (its processes are read from
        the first blocks whole, ``scan._nccl_processes``). Its WARNs wait for an error-return trace
        (``NcclTraces``)."""
        self.ctx.cycle.nccl_inits.follow(line_no, nccl=reading.nccl_info)
        if reading.nccl_warn and line.pid is not None:
            self.nccl_traces.warn((line.host, line.pid), line_no)

    def last_error_text(self, line_no: int, line: PeeledLine, marked: int | None) -> None:
        """The line after ``Last error:``: NCCL's last WARN text, for the rank that printed it
        (the line's own, else the one ``Last error:`` was printed for)."""
        assert self.last_error is not None
        rank = self.ctx.rank_of(line_no, line, marked)
        rank = rank if rank is not None else self.last_error[1]
        if rank is not None:
            self.ctx.cycle.last_errors[line.content.strip()] = rank
        self.last_error = None

    def on_nccl_warn(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """An NCCL WARN no entry reads: held, as NCCL warns at one level for errors and for
        advice; it is its process's own failure once NCCL's error-return trace follows it."""
        if line.pid is None:
            return
        fact = line_fact(signature, match, Kind.EXCEPTION)
        fact.role, fact.node = "origin", line.host
        event = Event(line_no, fact, line.text, self.ctx.line_rank(line_no, line), process=line.pid)
        if event.rank is None and line.local_rank is not None:
            event.local = (line.source, line.local_rank)
        self.nccl_traces.unread((line.host, line.pid), event, match["file"])

    def on_last_error(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """PyTorch's ``Last error:`` in an NCCL error's message: the next line repeats the
        process's last NCCL WARN, for the rank that raised it (``Cycle.resolve_processes``)."""
        self.last_error = (line_no, self.ctx.line_rank(line_no, line))

    def on_nccl_trace(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """NCCL's error-return trace (``file:line -> code``): the WARN its process printed just
        before, where no entry read it, was that process's own failure."""
        if line.pid is not None:
            event = self.nccl_traces.traced((line.host, line.pid), line_no, match["file"])
            if event is not None:
                self.ctx.cycle.add(event)

    def on_ib_port_event(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """An InfiniBand port NCCL's process saw go down (``port error``): held until the same
        process sees it active again (``port active``: the link flapped, NCCL went on); one
        that never came back is a network failure on that node (``end_ports``)."""
        process = (line.host, line.pid)
        if match["event"] == "port active":
            self.ports_down.pop(process, None)
            return
        fact = line_fact(signature, match, Kind.NETWORK)
        fact.role, fact.node = "origin", line.host
        rank = self.ctx.line_rank(line_no, line)
        self.ports_down.setdefault(process, Event(line_no, fact, line.text, rank, process=line.pid))

    def end_ports(self) -> None:
        """The ports that never came back, as the cycle ends: network failures."""
        for event in self.ports_down.values():
            self.ctx.cycle.add(event)
        self.ports_down.clear()

    def on_retrying(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """A tool's INFO that it retries a call (NCCL's ``Call to connect returned Connection
        refused, retrying``): no failure, though its words are a lost peer's; the WARN once the
        retries are spent is one."""
