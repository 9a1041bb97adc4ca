"""Stack dumps in a log: faulthandler's (a watchdog fired: the process hung), py-spy's and gdb's
(taken on a user's request: a hang's only where the run did not go on); ``stack_dumps``
reads their frames."""

from __future__ import annotations

import re
from typing import ClassVar

from pytest_faultloop.analyzers.log.keyword_filter import worth_reading
from pytest_faultloop.analyzers.log.line_facts import Kind
from pytest_faultloop.analyzers.log.line_wrappers import PeeledLine, Source
from pytest_faultloop.analyzers.log.readers.context import ScanContext
from pytest_faultloop.analyzers.log.scan_events import Event
from pytest_faultloop.analyzers.log.signatures import Signature, line_fact
from pytest_faultloop.analyzers.log.stack_dumps import Snapshots, StackDump, dump_event

_LAUNCH_LOCAL_RANK = re.compile(r"\s--local[_-]rank[= ](?P<local>\d+)\b")
"""torch.distributed.launch's argument to each worker (without ``--use-env``)."""
Process = tuple[Source, int | None, int | None]
"""A process as its line's prefixes tell: launcher, rank prefix, torchrun ``--tee`` local rank."""


class StackDumpReader:
    """The latest faulthandler dump of each process, and the py-spy and gdb dumps held."""

    HANDLERS: ClassVar[tuple[str, ...]] = (
        "faulthandler_timeout",
        "faulthandler_thread",
        "faulthandler_frame",
        "pyspy_process",
        "pyspy_python",
        "gdb_frame",
        "pybt_start",
    )

    def __init__(self, ctx: ScanContext) -> None:
        self.ctx = ctx
        self.dumps: dict[Process, StackDump] = {}
        """The latest faulthandler dump of each process."""
        self.snapshots = Snapshots()
        """py-spy's and gdb's dumps, held until the log shows whether the run went on."""

    def on_faulthandler_timeout(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """faulthandler's watchdog fired (``dump_traceback_later``): the process hung; the
        stacks after it say whether a thread waits in torch.distributed (``stack_dumps``).
        With ``exit=True`` its exit code 1 follows: the hang's, not an exception's."""
        fact = line_fact(signature, match, Kind.TIMEOUT)
        fact.node = line.host
        event = Event(line_no, fact, line.text, self.ctx.line_rank(line_no, line))
        if event.rank is None and line.local_rank is not None:
            event.local = (line.source, line.local_rank)
        self.dumps[_process(line)] = StackDump(dump_event(event, "faulthandler"))
        self.ctx.cycle.add(event)

    def on_faulthandler_thread(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """A thread's header in a dump: the frame line after it is that thread's latest."""
        if (dump := self.dumps.get(_process(line))) is not None:
            dump.thread(line_no)

    def on_faulthandler_frame(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> bool:
        """A frame of a dump (declined outside one)."""
        dump = self.dumps.get(_process(line))
        if dump is None:
            return False
        dump.frame(line_no, match["file"], "")
        return True

    def on_pyspy_process(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> bool:
        """py-spy's ``Process {pid}: {cmdline}``: a dump's header where ``Python v{version}``
        follows it; declined (the line is read as any other) until then."""
        self.snapshots.process = (line_no, line, match, signature)
        return False

    def on_pyspy_python(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> bool:
        """py-spy's ``Python v{version} ({exe})`` right after its ``Process`` line: a dump
        of that process begins. A ``--local_rank`` in the command line is the local rank
        torch.distributed.launch gave it (the global one where nothing maps it: one node)."""
        header, self.snapshots.process = self.snapshots.process, None
        if header is None or header[0] != line_no - 1:
            return False
        start, first, process, entry = header
        fact = line_fact(entry, process, Kind.TIMEOUT)
        fact.node = first.host
        event = Event(start, fact, first.text, self.ctx.line_rank(start, first), process=fact.pid)
        local = _LAUNCH_LOCAL_RANK.search(process["cmdline"])
        if event.rank is None and local is not None:
            event.local, event.device = (first.source, int(local["local"])), True
        elif event.rank is None and first.local_rank is not None:
            event.local = (first.source, first.local_rank)
        self.snapshots.start(StackDump(dump_event(event, "py-spy"), base=_indent(first)))
        return True

    def on_gdb_frame(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """gdb's ``bt`` begins (frame #0): a dump of the process it attached to, whose pid
        its ``[Inferior 1 (process N) detached]`` gives at the end."""
        self._gdb_dump(line_no, line, match, signature).frame(
            line_no, "", match["function"], native=True
        )

    def on_pybt_start(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """libpython's ``py-bt`` without a ``bt`` before it: a gdb dump begins (it stands
        only where a frame of its own form follows: ``File "%s", line %i, in %s``)."""
        self._gdb_dump(line_no, line, match, signature).thread(line_no)

    def _gdb_dump(
        self, line_no: int, line: PeeledLine, match: re.Match[str], entry: Signature
    ) -> StackDump:
        """A gdb dump begins at the line: the dump now read."""
        fact = line_fact(entry, match, Kind.TIMEOUT)
        fact.node = line.host
        event = Event(line_no, fact, line.text, self.ctx.line_rank(line_no, line))
        dump = StackDump(dump_event(event, "gdb"), base=_indent(line))
        self.snapshots.start(dump)
        return dump

    def snapshot_line(self, line_no: int, line: PeeledLine) -> bool:
        """A line of the py-spy or gdb dump being read (True: nothing else reads it); the
        first that is none ends the dump. After the dumps, a line without a keyword may show
        the run going on (``Snapshots.went_on``)."""
        snapshots = self.snapshots
        if snapshots.open is None:
            if not worth_reading(line.text):
                snapshots.went_on(line.content)
            return False
        part = snapshots.open.read(line_no, line.content, _indent(line))
        if part is not True:
            snapshots.close()
        return part is not False

    def end_snapshots(self) -> None:
        """The py-spy and gdb dumps the run did not go on after: a hang's."""
        cycle = self.ctx.cycle
        done = max(filter(None, (cycle.training_done_line, cycle.fit_done_line)), default=None)
        for event in self.snapshots.take(done):
            cycle.add(event)


def _process(line: PeeledLine) -> Process:
    """Which process a line is, as far as its prefixes tell."""
    return (line.source, line.rank, line.local_rank)


def _indent(line: PeeledLine) -> int:
    """The spaces before the line's message (after its wrappers, with their separator)."""
    before = line.text[: max(line.text.rfind(line.content), 0)]
    return len(before) - len(before.rstrip(" "))
