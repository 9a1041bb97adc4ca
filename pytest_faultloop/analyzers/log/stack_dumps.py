"""Stack dumps of a hung job's processes, one reading for three formats: CPython faulthandler's
(its watchdog's ``dump_traceback_later``: ``Timeout (0:30:00)!``, then each thread's frames),
py-spy's (``py-spy dump --pid N``: benfred/py-spy src/dump.rs) and gdb's (``bt``, then CPython's
``py-bt``: Tools/gdb/libpython.py).

A process one of whose threads waits in torch.distributed (its most recent Python frame there,
or a native frame in ProcessGroupNCCL's wait) is a member waiting for its peers; a dumped process
with no thread there, where more dumped processes wait, is the one they wait for (the ``hang``
rule). faulthandler dumps a process because it hung; py-spy and gdb dump whatever process a user
points them at, a healthy one too: their dumps (``Snapshots``) are held, and stand for a hang
only where the run did not go on after them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pytest_faultloop.analyzers.log.line_forms import Progress
from pytest_faultloop.analyzers.log.line_wrappers import PeeledLine
from pytest_faultloop.analyzers.log.scan_events import Event
from pytest_faultloop.analyzers.log.signatures import Signature

STACK = "stack"
"""The ``extra`` key of a dump's event: whether a thread waits in torch.distributed."""
WAITS_IN_TORCH = "a thread waits in torch.distributed"
NOT_IN_TORCH = "no thread in torch.distributed"
DUMPER = "dumper"
"""The ``extra`` key of the tool that dumped the stack (``faulthandler``, ``py-spy``, ``gdb``)."""
SNAPSHOT_TOOLS = frozenset({"py-spy", "gdb"})
"""Tools that dump a process on a user's request, hung or not."""
MAIN_THREAD = "MainThread"
"""threading's name of the main thread, as py-spy prints it (``Thread N (idle): "MainThread"``)."""
OUTLIVED_LINES = 2000
"""How far after the dumps the lines are read for the run's progress (its own prints)."""
TORCH_FILE = re.compile(r"torch[/\\]distributed[/\\]")
_NCCL_WAIT = re.compile(r"\bWorkNCCL::(?:wait|synchronizeStream)\b")
"""ProcessGroupNCCL.cpp: a collective's ``work.wait()`` blocks the caller here."""
_PYSPY_THREAD = re.compile(
    r'^Thread (?:\d+|0[xX][0-9a-fA-F]+)(?: \((?:idle|active\+gil|active|gil)\))?(?:: "(?P<name>.*)")?$'
)
"""dump.rs write_trace: ``Thread {} ({}): "{}"`` (the native thread id, or the pthread id in hex
``{:#X}``; stack_trace.rs status_str: idle, active+gil, active; the name where known)."""
_PYSPY_FRAME = re.compile(r"^(?P<function>.+?) \((?P<file>[^()]*?)(?::\d+)?\)$")
"""dump.rs write_trace: ``    {} ({}:{})``, or ``    {} ({})`` where the line is unknown."""
_PYSPY_PARENT = re.compile(r"^Parent Process \d+: ")
"""dump.rs write_traces (``--subprocesses``): the parent's pid and command line."""
_GDB_FRAME = re.compile(r"^#\d+\s+(?P<function>\S.*)$")
_PYBT_FRAME = re.compile(r'^File "(?P<file>[^"]*)", line \d+, in (?P<function>.*)$')
"""libpython.py PyFramePtr.print_traceback: ``  File "%s", line %i, in %s``."""
_PYBT_START = "Traceback (most recent call first):"
_PYBT_NOTES = ("<", "(", "Waiting for the GIL", "Garbage-collecting")
"""py-bt's lines for frames without a file: a built-in's (``<built-in method wait of Work object
at remote 0x…>``), ``(unable to read python frame information)``, the GIL or the collector."""
_DETACHED = re.compile(r"^\[Inferior \d+ \(process (?P<pid>\d+)\) detached\]$")
"""gdb's word that it let the process go: the end of a ``gdb -p PID -batch`` dump."""


@dataclass(slots=True)
class StackDump:
    """One process's dump, read thread by thread into its event's ``STACK``."""

    event: Event
    top_next: bool = False
    """The next Python frame is a thread's most recent one (its header came last)."""
    counting: bool = True
    """The current thread's frames count (where threads are named, only the main thread's)."""
    frames: int = 0
    base: int = 0
    """The indent of the dump's first line (a wrapper's separator: a timestamp's)."""
    end: int = 0
    """The dump's last line read so far."""

    def thread(self, line_no: int, name: str | None = None) -> None:
        """A thread's header. Where the dump names its threads (py-spy), the main thread's
        frames alone count: a helper thread may wait in torch.distributed (a store client, an
        async checkpoint) while the main one is stuck in its data loader."""
        self.top_next = True
        self.counting = name is None or name == MAIN_THREAD
        self.end = line_no

    def frame(self, line_no: int, file: str, function: str, native: bool = False) -> None:
        """A frame: a Python one waits in torch.distributed where it is its thread's most
        recent one and its file is there; a native one (gdb's ``bt``) where it is
        ProcessGroupNCCL's wait, whatever frames (a CUDA sync, a clock read) are above it."""
        self.frames += 1
        self.end = line_no
        if native:
            if self.counting and _NCCL_WAIT.search(function):
                self.event.fact.extra[STACK] = WAITS_IN_TORCH
            return
        if self.top_next and self.counting and TORCH_FILE.search(file):
            self.event.fact.extra[STACK] = WAITS_IN_TORCH
        self.top_next = False

    def read(self, line_no: int, content: str, indent: int) -> bool | None:
        """A line of a py-spy or gdb dump (``indent``: its spaces before the message): True
        where it is one, None where it is the dump's last (gdb detached: the pid it names is
        the process's), False where it is no line of the dump (the dump ended before it)."""
        if not content:
            return True
        depth = indent - self.base  # a wrapper's separator (a timestamp's) indents every line
        if self.event.fact.extra[DUMPER] == "py-spy":
            return self._pyspy_line(line_no, content, depth)
        if (detached := _DETACHED.match(content)) is not None:
            self.event.process = int(detached["pid"])
            return None
        return self._gdb_line(line_no, content, depth)

    def _pyspy_line(self, line_no: int, content: str, depth: int) -> bool:
        if (thread := _PYSPY_THREAD.match(content)) is not None and not depth:
            self.thread(line_no, thread["name"])
        elif depth == 4 and (frame := _PYSPY_FRAME.match(content)) is not None:
            file = frame["file"]
            self.frame(line_no, file, frame["function"], native=not file.endswith(".py"))
        elif depth > 4:
            self.end = line_no  # its arguments and locals (``--locals``)
        else:
            return not depth and _PYSPY_PARENT.match(content) is not None
        return True

    def _gdb_line(self, line_no: int, content: str, depth: int) -> bool:
        if content == _PYBT_START and not depth:
            self.thread(line_no)
        elif not depth and (native := _GDB_FRAME.match(content)) is not None:
            self.frame(line_no, "", native["function"], native=True)
        elif depth == 2 and (frame := _PYBT_FRAME.match(content)) is not None:
            self.frame(line_no, frame["file"], frame["function"])
        elif depth > 2 or (depth == 2 and content.startswith(_PYBT_NOTES)):
            self.end = line_no  # py-bt's source lines, its frames without a file
        else:
            return False
        return True


def dump_event(event: Event, dumper: str) -> Event:
    """``event`` as a dump's: its tool, no thread waiting in torch.distributed until one does."""
    event.fact.extra[STACK] = NOT_IN_TORCH
    event.fact.extra[DUMPER] = dumper
    return event


def snapshot(event: Event) -> bool:
    """Is the event a dump a user asked for (py-spy's, gdb's), not one the hang triggered?"""
    return event.fact.extra.get(DUMPER) in SNAPSHOT_TOOLS


@dataclass
class Snapshots:
    """py-spy's and gdb's dumps, held until the log shows whether the run went on after them:
    its own progress lines after the last dump (the same line, other numbers: ``step 1248``,
    then ``step 1249``) withdraw them all; a hang's log ends in them or in its failures. Lines
    between dumps are the user's session (``[New LWP 41272]``, ``[New LWP 41273]`` as gdb
    attaches): the dumps of one session are of one state of the job."""

    open: StackDump | None = None
    """The dump being read (every line is read until one is no line of it)."""
    process: tuple[int, PeeledLine, re.Match[str], Signature] | None = None
    """py-spy's ``Process {pid}: {cmdline}`` (its line number, line, match and entry): a dump's
    header where ``Python v{version} ({exe})`` follows it."""
    held: list[Event] = field(default_factory=list)
    read_until: int = 0
    outlived: bool = False
    """The run went on after the last dump."""
    after_dumps: Progress = field(default_factory=Progress)
    """The run's own lines (no keyword) since the last dump: whether they advanced."""

    def start(self, dump: StackDump) -> None:
        self.close()
        self.open = dump
        self.outlived = False

    def close(self) -> None:
        """The open dump ended: held where it read a frame (else it was no dump)."""
        dump, self.open = self.open, None
        if dump is not None and dump.frames:
            self.held.append(dump.event)
            self.read_until = dump.end + OUTLIVED_LINES
            self.after_dumps = Progress()

    def watching(self, line_no: int) -> bool:
        """Are lines read whatever their words (a dump's, or the run's after the dumps)?"""
        return self.open is not None or (bool(self.held) and line_no <= self.read_until)

    def went_on(self, content: str) -> None:
        """A line without a keyword after the dumps: where it repeats the previous one's form
        with other numbers, the run went on, and the dumps were of a running job."""
        if self.after_dumps.advanced(content):
            self.outlived = True

    def take(self, done: int | None) -> list[Event]:
        """The dumps that stand: none where training finished after them (line ``done``)."""
        self.close()
        held, self.held = ([] if self.outlived else self.held), []
        self.outlived = False
        return [e for e in held if done is None or e.line > done]
