"""Horovod's stall inspector: its lists of the ranks its peers wait for, and its ready ranks
(``stall_lists`` says when a listed rank is stalled)."""

from __future__ import annotations

import re
from typing import ClassVar

from pytest_faultloop.analyzers.log.keyword_filter import worth_reading
from pytest_faultloop.analyzers.log.line_facts import Kind, LineFact
from pytest_faultloop.analyzers.log.line_wrappers import PeeledLine
from pytest_faultloop.analyzers.log.readers.context import ScanContext
from pytest_faultloop.analyzers.log.scan_events import Event
from pytest_faultloop.analyzers.log.signatures import Signature
from pytest_faultloop.analyzers.log.stall_lists import (
    STALL_WARNINGS,
    StalledRanks,
    inspector_line,
    stall_entry,
)


class HorovodReader:
    """The stall lists being read and the ranks they named."""

    HANDLERS: ClassVar[tuple[str, ...]] = ("stall_list", "ready_ranks")

    def __init__(self, ctx: ScanContext) -> None:
        self.ctx = ctx
        self.stall_list = False
        """Inside Horovod's ``Stalled ranks:`` list (one ``rank: [tensors]`` line per rank; an
        entry naming Horovod tensors is read as one even when its header was not pasted)."""
        self.stalls = StalledRanks()
        """The ranks Horovod's stall lists named, held until the log shows the stall passed."""

    def on_stall_list(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        self.stall_list = True

    def entry(self, line_no: int, line: PeeledLine) -> bool:
        """A line of a stall list, or one of Horovod's: True where it is a list's entry
        (``rank: [tensor, ...]``: nothing else reads it); any other line ends the list."""
        entry = stall_entry(line)
        if entry is not None:
            self.stalls.name(line_no, *entry, line.text)
            return True
        self.stall_list = False
        return False

    def outlived(self, rank: int, line: PeeledLine) -> None:
        """A rank a stall list named printed again (not the inspector's own lines), or another
        rank's work went on (a line without a keyword, its numbers advanced): the stall
        passed; once every rank named has, the warnings the lists followed were no hang."""
        if rank in self.stalls.entries and inspector_line(line.content):
            return
        if rank in self.stalls.entries:
            passed = self.stalls.spoke(rank)
        else:
            passed = not worth_reading(line.text) and self.stalls.advanced(rank, line.content)
        if passed:
            for key, event in list(self.ctx.cycle.events.items()):
                if event.fact.signature in STALL_WARNINGS:
                    del self.ctx.cycle.events[key]

    def end(self) -> None:
        """The ranks stall lists named that never spoke again: stalled (the peers' word)."""
        if (stalled := self.stalls.event()) is not None:
            self.ctx.cycle.add(stalled)

    def on_ready_ranks(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """Horovod waits for the ranks that are not ready: those are the stalled ones."""
        ready = [int(r) for r in re.findall(r"\d+", match["ranks"])]
        world = max(self.ctx.world_size or 0, max(ready, default=-1) + 1)
        missing = tuple(sorted(set(range(world)) - set(ready)))
        if missing:
            fact = LineFact(
                Kind.NAMED,
                "not ready: its peers wait for its tensors",
                named=missing,
                role="consequence",
                signature=signature.id,
            )
            self.ctx.cycle.add(Event(line_no, fact, line.text, None))
