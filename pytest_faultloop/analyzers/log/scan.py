"""One streaming pass over a log: the failure facts of its last restart cycle, in bounded memory.

Blocks of whole lines are searched for a few keywords at C speed; only the rare matching lines
are decoded and classified (the signature catalogue ``catalogue/``, ``torchrun_reports``,
``run_facts``). Memory is bounded by the block size plus one event per (rank, kind) and one
table record per launcher. What each tool's report and context lines mean is its reader's
(``readers``); the scanner numbers the lines, hands each to the readers in a fixed order, and
reads the lines no reader takes as the catalogue's facts.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from pytest_faultloop.analyzers.log.harness_filter import blank_harness_lines
from pytest_faultloop.analyzers.log.keyword_filter import worth_reading
from pytest_faultloop.analyzers.log.line_facts import Kind
from pytest_faultloop.analyzers.log.line_memo import by_line
from pytest_faultloop.analyzers.log.line_reading import (
    RANK_PREFIX,
    LineReading,
    read,
    read_line,
)
from pytest_faultloop.analyzers.log.line_wrappers import PeeledLine, peel_line
from pytest_faultloop.analyzers.log.nul_holes import binary_reason, without_holes
from pytest_faultloop.analyzers.log.reader import (
    blocks_of_lines,
    read_chunks,
    rejoin_hard_wraps,
)
from pytest_faultloop.analyzers.log.readers.context import (
    LabelsBesideRanks,
    ScanContext,
    number_field,
    rank_field,
)
from pytest_faultloop.analyzers.log.readers.dumps import StackDumpReader
from pytest_faultloop.analyzers.log.readers.elastic import ElasticReader
from pytest_faultloop.analyzers.log.readers.exceptions import (
    UNRAISABLE_LINES,
    WHAT_LINES,
    ExceptionReader,
)
from pytest_faultloop.analyzers.log.readers.horovod import HorovodReader
from pytest_faultloop.analyzers.log.readers.initialization import InitializationReader
from pytest_faultloop.analyzers.log.readers.mpi import MpiReader
from pytest_faultloop.analyzers.log.readers.nccl import NcclReader
from pytest_faultloop.analyzers.log.readers.ray import RayReader
from pytest_faultloop.analyzers.log.readers.registry import check_handlers, handler_table
from pytest_faultloop.analyzers.log.readers.schedulers import SchedulerReader
from pytest_faultloop.analyzers.log.readers.stragglers import StragglerReader
from pytest_faultloop.analyzers.log.scan_events import Event, ScanResult
from pytest_faultloop.analyzers.log.signatures import (
    Signature,
    catalogue,
    line_fact,
    match_line,
    tagged,
)
from pytest_faultloop.analyzers.log.torch_messages import error_line

check_handlers(catalogue())

_SRUN_LABEL = re.compile(rb"^(\d+): ", re.MULTILINE)
_TEE_PREFIX = re.compile(rb"\[(?!rank\d)[A-Za-z_]+(\d+)\]:")
_NCCL_INFO = b"] NCCL INFO "
_NCCL_PROCESS = re.compile(rb"([^\s:\[\]]+):(\d+):\d+ \[\d+\]$")
"""NCCL's ``host:pid:tid [cudaDev] NCCL INFO`` (debug.cc): a process whose NCCL started (the
prefix before the literal: a search that starts with a character class is slow on MBs)."""
_LABELLED_RANK = re.compile(rb"^(\d+): \[rank(\d+)\]:", re.MULTILINE)
"""srun's label and torchrun's rank prefix on one line (``5: [rank5]:``)."""
_LABEL_BEHIND_WRAPPERS = re.compile(rb"\d: ")
"""A block without line-start labels may still have them behind wrappers (peeled per line)."""
LABEL_SAMPLE_LINES = 200
"""Lines of a block peeled to see whether its labels sit behind wrappers, before all are."""
_SLICE_BYTES = 64 << 10
STEPS_CANCELLED = tagged("step-cancelled")
"""slurmstepd's ``*** STEP ... CANCELLED AT ... ***`` with no reason: scancel's, or srun's
own teardown of the step after a task failed."""
SHELL_CRASHES = tagged("shell-crash")
"""A shell's report of a process it started ending on a signal (``Killed``, ``Aborted``)."""
GROUP_RESTARTS = tagged("group-restart")
"""torchrun's agent announces it restarts its worker group: its next start opens a cycle."""
RANK_SCAN_BLOCKS = 4
"""Rank prefixes are collected from the first blocks (start-up names every rank) and from
every classified line; searching every block for them would halve the throughput."""


class LogScanner:
    """Feeds blocks of lines through the readers and keeps the last cycle's facts."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.line_base = 0
        self.cycles = 1
        self.blocks_read = 0
        self.file_rank: int | None = None
        """The rank the path of the file being read names, where files were joined under
        ``tail``/``head`` headers (``_FILE_HEADER``): its lines' rank where they mark none."""
        self.ctx = ScanContext(self._new_cycle)
        self.elastic = ElasticReader(self.ctx)
        self.mpi = MpiReader(self.ctx)
        self.horovod = HorovodReader(self.ctx)
        self.nccl = NcclReader(self.ctx)
        self.initialization = InitializationReader(self.ctx)
        self.dumps = StackDumpReader(self.ctx)
        self.exceptions = ExceptionReader(self.ctx)
        self.ray = RayReader(self.ctx)
        self.schedulers = SchedulerReader(self.ctx)
        self.stragglers = StragglerReader(self.ctx)
        self.handlers = handler_table(
            (
                self.elastic,
                self.mpi,
                self.horovod,
                self.nccl,
                self.initialization,
                self.dumps,
                self.exceptions,
                self.ray,
                self.schedulers,
                self.stragglers,
            )
        )
        """The readers' handlers by the name a catalogue entry gives (``handler = ...``)."""

    def scan(self) -> ScanResult:
        has_text = False
        last_text = (0, b"")  # the last block with text, and the lines before it
        with open(self.path, "rb") as stream:
            not_text = binary_reason(stream)
            stream.seek(0)
            blocks = blocks_of_lines(without_holes(read_chunks(stream)))
            for raw in () if not_text else rejoin_hard_wraps(blocks):
                text = raw.decode("latin-1")  # ASCII keywords: any byte decodes
                block = blank_harness_lines(raw, text)
                if block is not raw:
                    text = block.decode("latin-1")
                if not block.isspace():
                    has_text = True
                    last_text = (self.line_base, block)
                self._block(block, text)
        ctx = self.ctx
        self.exceptions.flush_terminate()
        self.ray.flush_actor_death()
        self.horovod.end()
        self.dumps.end_snapshots()
        self.nccl.end_ports()
        self.mpi.end()
        self.elastic.end()
        ctx.cycle.name_unconnected()
        for event in ctx.cycle.events.values():
            if event.rank is None and event.local is not None:
                source, local = event.local
                event.rank = self.elastic.global_rank(local, source, guess=event.device)
        ctx.cycle.resolve_processes()
        last_line = last_text[0] + last_text[1].rstrip().count(b"\n") + 1 if has_text else 0
        ctx.cycle.traceback_cut = self.exceptions.in_traceback(last_line)
        ctx.cycle.nccl_inits.end(last_line)
        return ScanResult(
            ctx.cycle,
            self.cycles,
            ctx.ranks_seen or ctx.labels_seen,
            ctx.world_size,
            has_text,
            not_text,
            last_line,
            self.elastic.covered(),
        )

    def _block(self, block: bytes, text: str) -> None:
        if self.blocks_read < RANK_SCAN_BLOCKS:
            self._collect_ranks(block)
        self.blocks_read += 1
        if self._must_read(self.line_base + 1) or worth_reading(text):
            line_no = self.line_base + 1
            for start, end in _slices(block):
                if self._must_read(line_no) or worth_reading(text[start:end]):
                    self._slice(block[start:end], line_no)
                line_no += block.count(b"\n", start, end)
        self.line_base += block.count(b"\n")

    def _collect_ranks(self, chunk: bytes) -> None:
        self.ctx.ranks_seen.update(int(r) for r in set(RANK_PREFIX.findall(chunk)))
        self.ctx.tee_locals.update(int(r) for r in set(_TEE_PREFIX.findall(chunk)))
        self.ctx.cycle.nccl_inits.processes.update(_nccl_processes(chunk))
        for label, rank in _LABELLED_RANK.findall(chunk):
            self.ctx.labels_by_prefix.note(int(label), int(rank))
        if self.ctx.ranks_seen:
            return
        labels = {int(r) for r in _SRUN_LABEL.findall(chunk)}
        if not labels and _LABEL_BEHIND_WRAPPERS.search(chunk):
            lines = chunk.decode("utf-8", "replace").splitlines()
            if _labels(lines[:LABEL_SAMPLE_LINES]):  # srun --label marks every line
                labels = _labels(lines)
        self.ctx.labels_seen.update(labels)

    def _slice(self, chunk: bytes, line_no: int) -> None:
        for offset, raw in enumerate(chunk.split(b"\n")[:-1]):
            # _must_read only reads the scan's state: asked only of lines without a keyword
            reading = _reading(raw)
            if reading is None:
                if not self._must_read(line_no + offset):
                    continue
                reading = read_line(raw)
            line = reading.line
            if reading.marked or self.file_rank is not None:  # else neither has work
                line = self._in_file(reading)
                self._note_ranks(reading, line)
            self._line(line_no + offset, line, reading)

    def _in_file(self, reading: LineReading) -> PeeledLine:
        """Files joined by ``tail``/``head`` (a header before each file's lines): a header
        whose path names a rank (``rank2.log``, DeepSpeed's ``{prefix}_rank{N}.log``) gives
        that rank to the lines after it that mark none, to the next header; a path without
        the word names no rank (a launcher's log, torchrun's ``{local_rank}/stdout.log``).
        The line, with that rank."""
        line = reading.line
        if reading.header:
            self.file_rank = reading.header_rank
            if self.file_rank is not None:
                self.ctx.ranks_seen.add(self.file_rank)
        elif line.rank is None and self.file_rank is not None:
            return replace(line, rank=self.file_rank)  # a copy: peeled lines are shared
        return line

    def _note_ranks(self, reading: LineReading, line: PeeledLine) -> None:
        if reading.prefix_ranks:
            self.ctx.ranks_seen.update(reading.prefix_ranks)
        if line.local_rank is not None:
            self.ctx.tee_locals.add(line.local_rank)
        if line.labels:
            if not self.ctx.ranks_seen:
                self.ctx.labels_seen.add(line.labels[0])
            if line.rank is not None:
                self.ctx.labels_by_prefix.note(line.labels[0], line.rank)

    def _line(self, line_no: int, line: PeeledLine, reading: LineReading) -> None:
        marked = line.rank if line.rank is not None else reading.message_rank
        nccl, horovod, tables = self.nccl, self.horovod, self.elastic.tables
        nccl.follow(line_no, line, reading)
        if nccl.last_error is not None and line_no == nccl.last_error[0] + 1:
            nccl.last_error_text(line_no, line, marked)
        mpi = self.mpi
        if mpi.wrapped_report is not None and mpi.end_wrapped_report(line_no, line.content):
            return
        dumps = self.dumps
        if dumps.snapshots.watching(line_no) and dumps.snapshot_line(line_no, line):
            return
        # Horovod's "rank: [tensor, ...]" entries
        if (horovod.stall_list or reading.horovod) and horovod.entry(line_no, line):
            return
        if horovod.stalls.entries and marked is not None:
            horovod.outlived(marked, line)
        # with no table open, only a table's rank field opens one (a table pasted headless)
        if (tables.any_open or reading.table_rank) and tables.feed(
            self.ctx.cycle, line.source, line_no, line.text, line.content
        ):
            return
        if reading.table_start:
            tables.start(line.source)
        elif reading.cycle_start:
            self.elastic.worker_group_start(line_no, line)
        elif not (reading.quiet and self._idle):
            self._facts(line_no, line, marked, reading)

    @property
    def _idle(self) -> bool:
        """No traceback, report or ignored exception open: a quiet line (``LineReading``)
        changes nothing in ``_facts``."""
        exceptions = self.exceptions
        return (
            exceptions.traceback_at is None
            and exceptions.unraisable is None
            and exceptions.terminate is None
            and self.ray.actor_death is None
            and self.mpi.nonzero_exit is None
        )

    def _facts(
        self, line_no: int, line: PeeledLine, marked: int | None, reading: LineReading
    ) -> None:
        content = line.content
        ctx, exceptions = self.ctx, self.exceptions
        rank = ctx.rank_of(line_no, line, marked)
        self._run_facts(line_no, line, reading)
        found, part = exceptions.traceback_part(line_no, line, reading.found)
        if exceptions.unraisable is not None and exceptions.ignored(line_no, found, part):
            return
        held = exceptions.terminate
        if held is not None and line_no - held.line > WHAT_LINES:
            exceptions.flush_terminate()
        if self.ray.actor_death is not None and not self.ray.actor_death.holds(line_no):
            self.ray.flush_actor_death()
        if self.mpi.nonzero_exit is not None and not self.mpi.nonzero_exit.holds(line_no):
            self.mpi.end_nonzero_exit(None)
        while found is not None and (handler := found[0].handler) is not None:
            signature, match = found
            # a handler returns False for a line that is not its report's (``Exit code:``
            # outside mpirun's report): the entries after it read the line
            if self.handlers[handler](line_no, line, match, signature) is not False:
                return
            found = match_line(content, after=signature)
        report = False
        process = line.pid
        if found is not None:
            signature, match = found
            fact = line_fact(signature, match)
            if process is None and signature.rank == "own":
                process = fact.pid  # the message names its own process (Ray's task error)
            report = signature.role == "report"
            field = rank_field(match)
            if _in_subgroup(signature, field, rank):
                fact.named = ()  # group ranks: no global rank to blame
            rank = _named_rank(signature, field, rank)
            device = _device_index(signature, match) if rank is None else None
            local = _local_index(signature, match, line.local_rank)
        else:
            device, local = None, line.local_rank
            error = error_line(content, line.error_level)
            if error is None:
                return
            fact = error
            if rank is None and fact.named:
                rank = fact.named[0]
        if fact.signature in GROUP_RESTARTS:
            self.elastic.restart_announced = True
        if fact.signature in STEPS_CANCELLED and self.ctx.cycle.task_failed:
            return  # srun cancels the step after a task failed: the teardown, not a cause
        killed = fact.signature in SHELL_CRASHES and "(SIGKILL)" in fact.detail
        if killed and self.ctx.cycle.killing_all and rank is None:
            fact.role = "consequence"  # the launcher killed its own main process
        if fact.kind in (Kind.SCHEDULER, Kind.JOB_SIGNAL):
            self.ctx.cycle.step_terminating = True
        fact.node = fact.node or line.host  # a collector's host prefix: where the line came from
        event = Event(line_no, fact, line.text, rank, report=report, process=process)
        if rank is None and local is not None:
            event.local = (line.source, local)
        elif device is not None:
            event.local, event.device = (line.source, device), True
        if "traceback" in fact.extra:
            self.ctx.cycle.traceback_line = event
        if not self.ray.death_cause(event):
            self.ctx.cycle.add(event)
            for other in ctx.also_owned(line_no, rank):
                self.ctx.cycle.add(replace(event, rank=other, fact=replace(fact)))

    def _must_read(self, line_no: int) -> bool:
        """Lines read whatever their words: a traceback's, those after ``Exception ignored
        in:`` until its exception line, and the entries of Horovod's stall list (tensor names
        are the user's: ``5: [allreduce.fc3.weight]`` holds no keyword), and the lines after
        them, for the stalled ranks' own word (``StalledRanks``)."""
        unraisable = self.exceptions.unraisable
        ignoring = unraisable is not None and line_no - unraisable <= UNRAISABLE_LINES
        stalls = self.horovod.stall_list or self.horovod.stalls.watching(line_no)
        wrapped, last_error = self.mpi.wrapped_report, self.nccl.last_error
        held = wrapped is not None and line_no == wrapped[0] + 1
        held = held or (last_error is not None and line_no == last_error[0] + 1)
        dumps = self.dumps.snapshots.watching(line_no)
        return ignoring or stalls or held or dumps or self.exceptions.in_traceback(line_no)

    def _run_facts(self, line_no: int, line: PeeledLine, reading: LineReading) -> None:
        """What a line says of the run as a whole: world size, layout, done, checkpoints."""
        if reading.layout:
            self.elastic.read_layout(line.content)
        stated = reading.stated
        if stated is None:
            return
        self.ctx.note_world(stated.world_size)
        if (comm := stated.nccl_init_rank) is not None:
            rank, size = comm
            self.ctx.ranks_seen.add(rank)
            if line.label is not None:
                self.ctx.labels_by_comm.setdefault(size, LabelsBesideRanks()).note(line.label, rank)
            if line.pid is not None:
                self.ctx.cycle.processes.comm(line.pid, line.host, rank, size)
        if (step := stated.nccl_init_step) is not None:
            member = (line.host, line.pid) if line.pid is not None else None
            self.ctx.cycle.nccl_inits.note(line_no, line.text, step, member)
        if stated.process_rank is not None:
            self.ctx.cycle.processes.say(*stated.process_rank, line.host)
        if stated.training_done:
            self.ctx.cycle.training_done_line = line_no
        elif stated.fit_done:
            self.ctx.cycle.fit_done_line = line_no
        tool_done = line_no in (self.ctx.cycle.training_done_line, self.ctx.cycle.fit_done_line)
        ended_ok = tool_done or stated.process_ok
        if ended_ok:
            self.ctx.cycle.ended_ok_line = line_no
        if ended_ok or stated.work_done:
            self.ctx.cycle.work_done_line = line_no
        if stated.checkpoint_saved:
            self.ctx.cycle.checkpoint_saved = True

    def _new_cycle(self, line_no: int) -> None:
        """A new cycle starts at the line: what the readers hold of the one before ends in it."""
        self.mpi.end_nonzero_exit(None)  # a held report belongs to the cycle that printed it
        self.ray.flush_actor_death()
        self.horovod.end()
        self.dumps.end_snapshots()
        self.nccl.end_ports()
        self.mpi.end_rank_blocks()
        later = self.ctx.cycle.split(line_no)
        if self.ctx.cycle.events:
            self.cycles += 1
        self.ctx.cycle = later
        self.elastic.cycle_started()
        self.ctx.stated_ranks.clear()  # a new worker group states its ranks again
        self.dumps.dumps.clear()
        self.stragglers.stragglers = None
        self.exceptions.cycle_started()


def _named_rank(signature: Signature, field: int | None, rank: int | None) -> int | None:
    """The rank an entry's message names (its rank ``field``) where the line's marker names
    none: a report's (``process 3 terminated``); a message's own rank (``message``) only where
    no launcher's prefix gives the global one."""
    if signature.rank == "field" and field is not None:
        return field
    if signature.rank == "message" and rank is None:
        return field
    return rank


def _in_subgroup(signature: Signature, field: int | None, rank: int | None) -> bool:
    """A message numbering ranks in its own group (``message``), on a line whose launcher's
    prefix gives another global rank: its numbers are a sub-group's, not the world's."""
    return signature.rank == "message" and None not in (rank, field) and rank != field


def _device_index(signature: Signature, match: re.Match[str]) -> int | None:
    """The device an entry's message names (``GPU 5``): the local rank on a node with one
    process per GPU. It is mapped to a global rank once the log is read, since the failure
    tables that map it come after the message."""
    groups = match.groupdict()
    device = groups.get("device") or groups.get("device2")
    return int(device) if signature.rank == "device" and device is not None else None


def _local_index(signature: Signature, match: re.Match[str], marked: int | None) -> int | None:
    """The local rank an entry's message names (``local``: Lightning's ``[rank: 2]``, a
    launcher's numbering within its node), else the one the line's wrappers mark."""
    local = number_field(match, "local") if signature.rank == "local" else None
    return local if local is not None else marked


def _nccl_processes(chunk: bytes) -> set[tuple[str, int]]:
    """The (host, pid) of every NCCL process whose ``NCCL INFO`` lines the chunk holds: each
    such line's prefix, found from the literal back to the line's start."""
    found = set()
    at = chunk.find(_NCCL_INFO)
    while at != -1:
        start = chunk.rfind(b"\n", 0, at) + 1
        match = _NCCL_PROCESS.search(chunk, start, at + 1)
        if match is not None:
            found.add((match[1].decode("latin-1"), int(match[2])))
        end = chunk.find(b"\n", at)
        at = chunk.find(_NCCL_INFO, end) if end != -1 else -1
    return found


@by_line
def _reading(raw: bytes) -> LineReading | None:
    """The line's reading where it holds a keyword, else None (decided once per distinct
    line, as its reading is)."""
    return read(raw) if worth_reading(raw.decode("latin-1")) else None


def _labels(lines: list[str]) -> set[int]:
    return {label for line in lines if (label := peel_line(line).label) is not None}


def _slices(block: bytes) -> list[tuple[int, int]]:
    """Cut a block of whole lines into pieces of about _SLICE_BYTES, each of whole lines."""
    bounds, start = [], 0
    while start < len(block):
        end = block.find(b"\n", min(start + _SLICE_BYTES, len(block) - 1)) + 1 or len(block)
        bounds.append((start, end))
        start = end
    return bounds


def scan_log(path: Path) -> ScanResult:
    return LogScanner(path).scan()
