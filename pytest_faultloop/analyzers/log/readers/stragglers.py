"""nvidia-resiliency-ext's straggler detector: the ranks it names are the cause only once it
stops training."""

from __future__ import annotations

import re
from typing import ClassVar

from pytest_faultloop.analyzers.log.line_facts import Kind
from pytest_faultloop.analyzers.log.line_wrappers import PeeledLine
from pytest_faultloop.analyzers.log.readers.context import ScanContext
from pytest_faultloop.analyzers.log.scan_events import Event
from pytest_faultloop.analyzers.log.signatures import Signature, line_fact


class StragglerReader:
    """The detector's latest report, held for the stop that may follow."""

    HANDLERS: ClassVar[tuple[str, ...]] = ("stragglers", "straggler_stop")

    def __init__(self, ctx: ScanContext) -> None:
        self.ctx = ctx
        self.stragglers: Event | None = None
        """nvidia-resiliency-ext's straggler report, held until the detector stops training:
        only then are the ranks it names the cause."""

    def on_stragglers(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """The straggler detector's report (rank 0 prints it for all ranks, so it is no rank's
        own line): the ranks it names, held for the stop that may follow."""
        fact = line_fact(signature, match, Kind.NAMED)
        fact.node = line.host
        self.stragglers = Event(line_no, fact, line.text, None)

    def on_straggler_stop(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """The detector stops training (every rank says so): the stragglers it named last are
        the cause; without the stop they were a warning."""
        held, self.stragglers = self.stragglers, None
        if held is not None:
            self.ctx.cycle.add(held)
