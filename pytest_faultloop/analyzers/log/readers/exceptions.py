"""Exceptions as processes print them: Python's tracebacks (read to their exception line, whatever
its type), exceptions printed and ignored, libstdc++'s uncaught C++ exception with its
``what():``, and a launcher's summary over its workers' errors."""

from __future__ import annotations

import re
from typing import ClassVar

from pytest_faultloop.analyzers.log.line_facts import Kind, LineFact
from pytest_faultloop.analyzers.log.line_reading import Found
from pytest_faultloop.analyzers.log.line_wrappers import PeeledLine
from pytest_faultloop.analyzers.log.readers.context import ScanContext, marked_rank
from pytest_faultloop.analyzers.log.scan_events import Event
from pytest_faultloop.analyzers.log.signatures import (
    Signature,
    classify,
    line_fact,
    match_follower,
    tagged,
    tagged_entry,
)

WHAT_LINES = 3
"""How far after ``terminate called after throwing`` its ``what():`` line may come."""
EXCEPTION_WINDOW = 3
"""How far after a traceback's latest line (header, frame, source or caret line) the next may
come. The window's lines are read whatever their words: an exception's type need not end in
``Error`` (``BrokenProcessPool``, ``TimeoutExpired``, ``StopIteration``)."""
TAIL_LINES = 10
"""How far past its last frame a traceback's tail may run: the frame's source lines (3.13
prints a multi-line segment), caret lines, ``[Previous line repeated N more times]``."""
_REPEATED = re.compile(r"\[Previous line repeated \d+ more times?\]")
"""CPython's line for a recursion's repeated frames (indented two spaces, like a frame)."""
TRACEBACK_LINES = tagged("traceback-line")
"""The entries of a traceback's header and frames, after which the exception line comes."""
TRACEBACK_FRAME = tagged_entry("traceback-frame").id
"""The entry whose window of lines is read for a traceback's exception line."""
GENERIC_EXCEPTIONS = tagged("generic-exception")
"""Exception lines read by their form alone, not by what they say."""
UNRAISABLE_LINES = 200
"""How far after ``Exception ignored in:`` the traceback it introduces may end."""


class ExceptionReader:
    """The traceback, ignored exception and uncaught C++ exception still open."""

    HANDLERS: ClassVar[tuple[str, ...]] = (
        "terminate",
        "terminate_what",
        "exception_ignored",
        "ignore",
    )

    def __init__(self, ctx: ScanContext) -> None:
        self.ctx = ctx
        self.terminate: Event | None = None
        """An uncaught C++ exception (``terminate called after throwing``), held until its
        ``what():`` line says what it was."""
        self.unraisable: int | None = None
        """The line of CPython's ``Exception ignored in:`` until its exception line: the
        exception was printed and ignored, the process went on."""
        self.traceback_at: int | None = None
        """The latest line of a traceback still open (header, frame, source or caret line):
        the lines after it are read for its exception line."""
        self.frame_at = 0
        """The traceback's latest header or frame line (its tail runs TAIL_LINES past it)."""

    def in_traceback(self, line_no: int) -> bool:
        at = self.traceback_at
        return (
            at is not None and line_no <= at + EXCEPTION_WINDOW and at - self.frame_at < TAIL_LINES
        )

    def traceback_part(
        self, line_no: int, line: PeeledLine, found: Found | None
    ) -> tuple[Found | None, bool]:
        """The line's match, and whether it is part of a traceback (its header, frames, their
        source, caret and repeat lines). The first other line after a traceback ends it and,
        where no entry read it, is read as its exception line, whatever the exception's type."""
        if found is not None and found[0].id in TRACEBACK_LINES:
            self.traceback_at = self.frame_at = line_no
            return found, True
        if not self.in_traceback(line_no):
            self.traceback_at = None
            return found, False
        if not line.content or _indented(line) or _REPEATED.match(line.content):
            self.traceback_at = line_no
            return found, True
        self.traceback_at = None
        return found or match_follower(line.content, TRACEBACK_FRAME), False

    def ignored(self, line_no: int, found: Found | None, part: bool) -> bool:
        """A line after ``Exception ignored in:``: its traceback's lines, and its exception
        line where only the line's form says it is one (a CUDA or NCCL error there is still
        read). The first line outside a traceback ends what was ignored."""
        assert self.unraisable is not None
        if line_no - self.unraisable > UNRAISABLE_LINES:
            self.unraisable = None
            return False
        if part:
            return True
        self.unraisable = None
        return found is None or found[0].id in GENERIC_EXCEPTIONS

    def on_terminate(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        self.flush_terminate()
        rank = marked_rank(line)
        fact = line_fact(signature, match, Kind.CRASH)
        fact.node = line.host
        self.terminate = Event(line_no, fact, line.text, rank)

    def on_terminate_what(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """``what():`` of an uncaught exception: the message decides what ended the process
        (a c10d timeout, a lost peer, a CUDA error); the crash stands when it says nothing
        the catalogue knows."""
        held, self.terminate = self.terminate, None
        if held is None or line_no - held.line > WHAT_LINES:
            return
        fact = classify(match["what"])
        if fact is None or fact.kind is Kind.EXIT:
            self.ctx.cycle.add(held)
            return
        fact.node = fact.node or held.fact.node
        self.ctx.cycle.add(Event(line_no, fact, line.text, held.rank))

    def flush_terminate(self) -> None:
        if self.terminate is not None:
            self.ctx.cycle.add(self.terminate)
            self.terminate = None

    def on_exception_ignored(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """An exception printed as caught: CPython's ignored one (``Exception ignored in:
        %R``, then the exception), a retry library's before its retry (tenacity's ``Retrying
        ... as it raised``, then the traceback): what follows, to its exception line, is no
        failure."""
        self.unraisable = line_no

    def on_ignore(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """A launcher's or driver's own exception over its workers' errors: torchrun's
        ``ChildFailedError`` (its failure table says more), Ray Train's summaries (the workers'
        snippets, the errors before it). Only an error line: where the paste lost what it
        sums up, the run still failed (the fallback's evidence, never "no failure")."""
        fact = LineFact(Kind.ERROR_LINE, line.content.strip()[:200])
        self.ctx.cycle.add(Event(line_no, fact, line.text, self.ctx.line_rank(line_no, line)))

    def cycle_started(self) -> None:
        """A new cycle: no traceback or ignored exception is open in it."""
        self.traceback_at = self.unraisable = None


def _indented(line: PeeledLine) -> bool:
    """A traceback's source or caret line: indented past its frame line's two spaces (after
    whatever wrappers the line carries)."""
    at = line.text.rfind(line.content)
    return at > 0 and line.text[:at].endswith(("   ", "\t"))
