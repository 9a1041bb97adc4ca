"""One streaming pass over a log: the failure facts of its last restart cycle, in bounded memory.

Blocks of whole lines are searched for a few keywords at C speed; only the rare matching lines
are decoded and classified (the signature catalogue ``signatures.toml``, ``torchrun_reports``,
``run_facts``). Memory is bounded by the block size plus one event per (rank, kind) and one
table record per launcher.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from pytest_faultloop.analyzers.log import launcher_reports as launchers
from pytest_faultloop.analyzers.log import torchrun_reports as torchrun
from pytest_faultloop.analyzers.log.exit_codes import exit_signal
from pytest_faultloop.analyzers.log.failure_table import FailureTables
from pytest_faultloop.analyzers.log.fast_search import FastPattern
from pytest_faultloop.analyzers.log.harness_filter import blank_harness_lines
from pytest_faultloop.analyzers.log.line_facts import Kind, LineFact
from pytest_faultloop.analyzers.log.line_memo import by_line
from pytest_faultloop.analyzers.log.line_reading import (
    RANK_PREFIX,
    Found,
    LineReading,
    read,
    read_line,
)
from pytest_faultloop.analyzers.log.line_wrappers import (
    PeeledLine,
    Source,
    peel_line,
    without_colour,
)
from pytest_faultloop.analyzers.log.membership import Membership
from pytest_faultloop.analyzers.log.nccl_traces import NcclTraces
from pytest_faultloop.analyzers.log.nul_holes import binary_reason, without_holes
from pytest_faultloop.analyzers.log.reader import (
    blocks_of_lines,
    read_chunks,
    rejoin_hard_wraps,
)
from pytest_faultloop.analyzers.log.scan_events import (
    Cycle,
    Event,
    ScanResult,
)
from pytest_faultloop.analyzers.log.signatures import (
    Signature,
    catalogue,
    classify,
    line_fact,
    match_follower,
    match_line,
    tagged,
    tagged_entry,
)
from pytest_faultloop.analyzers.log.stack_dumps import (
    TORCH_FILE,
    Snapshots,
    StackDump,
    dump_event,
)
from pytest_faultloop.analyzers.log.stall_lists import (
    STALL_WARNINGS,
    StalledRanks,
    inspector_line,
    stall_entry,
)
from pytest_faultloop.analyzers.log.torch_messages import error_line, message_rank

_STRUCTURE = (
    r"====|----|Failures:|Root Cause|(?:time|host|rank|exitcode|error_file|traceback)\s*:\s"
    r"|Starting worker group|Starting elastic|after training is done|[Cc]heckpoint"
    r"|successfully finished|done training in|Training completed\. Do not|Trainer\.fit` stopped"
    r"|[Ww]orld.size|WORLD_SIZE|nranks|world_sizes|mpirun|mpiexec|horovodrun|[Hh]orovod"
    r"|node[_-]rank|(?-u:\b)(?i-u:pid)(?-u:\b)"
    r"|(?i-u:training (?:is )?(?:complete|finished|done)|(?:finished|done|completed) training)"
    r"|==> |exits successfully"
)
"""What the structural readers need: torchrun's failure table, restart cycles, run facts (a
process's pid beside its rank), Horovod's stall entries, tail's and head's file headers. In
Rust's regex syntax, with ASCII word boundaries and case: a Unicode ``\b`` drops the fast
engine at the first non-ASCII byte (tqdm's bars, box drawing: 0.3 MB/s)."""
_LEVELS = (
    r"Error|error|Exception|exception|ERROR|FATAL|CRITICAL|\[E |(?m:(?:^|[\s\[\]:])[EF]\d{3,4} \d)"
)
"""Error-level lines for the fallback (the level itself is read from the line's wrappers)."""
_JSON_ESCAPES = {'"': '\\"', "<": "\\u003c", ">": "\\u003e", "&": "\\u0026"}
"""How a Docker json-file record writes these characters of the log line (Go's encoder)."""


def _as_json(keyword: str) -> str:
    return "".join(_JSON_ESCAPES.get(char, char) for char in keyword)


_KEYWORDS = FastPattern(
    "|".join(
        sorted(
            {re.escape(form) for s in catalogue() for k in s.keywords for form in (k, _as_json(k))}
        )
    )
    + f"|{_STRUCTURE}|{_LEVELS}"
)
"""Lines worth classifying: every catalogue entry's keywords, the structural readers' and the
error levels', wherever a line's wrappers put them (nothing is anchored to a line's start)."""
_WRAPPED_SIGNAL = re.compile(r"\s*(?:signal|=\s+KILLED BY SIGNAL:) (?P<num>\d+)\b")
"""The signal on the line after a held report: PRRTE's ``signal 9 (Killed).``, Intel MPI's
``=   KILLED BY SIGNAL: 9 (Killed)``."""
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
WHAT_LINES = 3
"""How far after ``terminate called after throwing`` its ``what():`` line may come."""
NONZERO_EXIT_LINES = 6
"""How far after mpirun's non-zero-exit header its ``Process name:`` and ``Exit code:`` end."""
OWNED_LINES = 400
"""How far after ``Process N terminated with the following error:`` its traceback may end."""
EXCEPTION_WINDOW = 3
"""How far after a traceback's latest line (header, frame, source or caret line) the next may
come. The window's lines are read whatever their words: an exception's type need not end in
``Error`` (``BrokenProcessPool``, ``TimeoutExpired``, ``StopIteration``)."""
TAIL_LINES = 10
"""How far past its last frame a traceback's tail may run: the frame's source lines (3.13
prints a multi-line segment), caret lines, ``[Previous line repeated N more times]``."""
LAUNCHER_STOP = ("SIGTERM", "SIGKILL")
"""How horovodrun stops the remaining workers after a failure (safe_shell_exec.py
terminate_executor_shell_and_children: SIGTERM, SIGKILL after 5 s)."""
_REPEATED = re.compile(r"\[Previous line repeated \d+ more times?\]")
"""CPython's line for a recursion's repeated frames (indented two spaces, like a frame)."""
TRACEBACK_LINES = tagged("traceback-line")
"""The entries of a traceback's header and frames, after which the exception line comes."""
TRACEBACK_FRAME = tagged_entry("traceback-frame").id
"""The entry whose window of lines is read for a traceback's exception line."""
_LAUNCH_LOCAL_RANK = re.compile(r"\s--local[_-]rank[= ](?P<local>\d+)\b")
"""torch.distributed.launch's argument to each worker (without ``--use-env``)."""
STEPS_CANCELLED = tagged("step-cancelled")
"""slurmstepd's ``*** STEP ... CANCELLED AT ... ***`` with no reason: scancel's, or srun's
own teardown of the step after a task failed."""
SHELL_CRASHES = tagged("shell-crash")
"""A shell's report of a process it started ending on a signal (``Killed``, ``Aborted``)."""
GENERIC_EXCEPTIONS = tagged("generic-exception")
"""Exception lines read by their form alone, not by what they say."""
UNRAISABLE_LINES = 200
"""How far after ``Exception ignored in:`` the traceback it introduces may end."""
STORE_FRAME_LINES = 6
"""How far after a traceback's last frame (and its source lines) its exception line comes."""
RAY_DEATH_LINES = 12
"""How far after Ray's ``The actor died unexpectedly`` (or after the death cause read last) its
fields and the death cause may come (python/ray/exceptions.py prints class, id, pid, name,
namespace and ip, one a line, then the cause)."""
CONTAINER_STATE_LINES = 8
"""How far after kubectl describe's ``State: Terminated`` its ``Exit Code:`` may come (after
the state's Reason and Message)."""
RAY_DEATH_CAUSES = tagged("death-cause")
"""The death causes an ActorDiedError ends with (gcs_actor_manager.cc): each says what the
death it holds was; a later one details the one before (the node died: it was preempted)."""
GROUP_RESTARTS = tagged("group-restart")
"""torchrun's agent announces it restarts its worker group: its next start opens a cycle."""
PREEMPTION = tagged_entry("preemption")
"""The entry a preemption's fact names, whichever handler's line said it."""
_WORKER_STORE_FRAME = re.compile(r"torch[/\\]distributed[/\\]rendezvous\.py")
"""A worker's rendezvous (init_process_group), where only rank 0 hosts the store."""
RANK_SCAN_BLOCKS = 4
"""Rank prefixes are collected from the first blocks (start-up names every rank) and from
every classified line; searching every block for them would halve the throughput."""


@dataclass(slots=True)
class NonzeroExitReport:
    """mpirun's report of one process by name, held from its header until its ``Exit code:``
    line: ``The first process to do so was: Process name: [[job,1],vpid]``; or, with
    ``lost``, until its ``Process name:`` (``A critical communication path was lost to:``)."""

    line: int
    header: PeeledLine
    rank: int | None = None
    """The vpid its ``Process name:`` gives: the rank."""
    lost: bool = False
    """mpirun lost its connection to the process (no exit code follows)."""
    unnamed: Event | None = None
    """What the header line stands for where no rank's name follows it (horovodrun's
    RuntimeError, whose elastic driver names ``host[slot]``): the job's exception."""

    def holds(self, line_no: int) -> bool:
        return line_no - self.line <= NONZERO_EXIT_LINES


@dataclass(slots=True)
class LabelsBesideRanks:
    """srun labels seen beside a rank another marker on the same line names."""

    agreeing: set[int] = field(default_factory=set)
    """Labels equal to the rank beside them."""
    differ: bool = False
    """A label beside another rank."""

    def note(self, label: int, rank: int) -> None:
        if label == rank:
            self.agreeing.add(label)
        else:
            self.differ = True


Process = tuple[Source, int | None, int | None]
"""A process as its line's prefixes tell: launcher, rank prefix, torchrun ``--tee`` local rank."""


@dataclass(slots=True)
class ActorDeath:
    """Ray's ActorDiedError, held from its first line over the dead actor's fields to the death
    cause it ends with: the pid names the worker (its rank), the cause what happened to it."""

    event: Event
    pid: int | None = None
    ip: str | None = None

    def holds(self, line_no: int) -> bool:
        return line_no - self.event.line <= RAY_DEATH_LINES


class LogScanner:
    """Feeds blocks of lines through the classifiers and keeps the last cycle's facts."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.line_base = 0
        self.cycles = 1
        self.cycle = Cycle(first_line=1)
        self.ranks_seen: set[int] = set()
        self.labels_seen: set[int] = set()
        """srun labels: the ranks, when no launcher prefix names them otherwise."""
        self.file_rank: int | None = None
        """The rank the path of the file being read names, where files were joined under
        ``tail``/``head`` headers (``_FILE_HEADER``): its lines' rank where they mark none."""
        self.labels_by_prefix = LabelsBesideRanks()
        """srun labels beside a launcher's rank prefix (``5: [rank5]:``; under torchrun a
        label is the node's task and differs)."""
        self.labels_by_comm: dict[int, LabelsBesideRanks] = {}
        """srun labels beside the rank NCCL's communicator init line gives, by the
        communicator's size (``5: host:pid:tid [1] NCCL INFO ... rank 5 nranks 8``)."""
        self.blocks_read = 0
        self.world_size: int | None = None
        self.tables = FailureTables()
        self.agent_failures: dict[int, tuple[Event, Source]] = {}
        """torchrun's ``failed (exitcode) local_rank`` lines by pid: kept unless its failure
        table reports the same process (with the global rank)."""
        self.rank_maps: dict[Source, list[dict[int, int]]] = {}
        """torchrun's local -> global rank maps (rendezvous results), by launcher."""
        self.local_ranks: dict[Source, list[int]] = {}
        self.group_world: int | None = None
        """How many nodes torchrun's rendezvous results say the job has."""
        self.tee_locals: set[int] = set()
        """The local ranks torchrun's ``--tee`` prefixes name (``[default3]:``)."""
        self.stated_ranks: dict[Source, dict[int, int]] = {}
        """Global ranks processes state beside torchrun's ``--tee`` local prefix (gloo's
        connectivity line of the world's context), by launcher and local rank."""
        self.node_layout: tuple[int | None, int | None] = (None, None)
        """``--node_rank`` and ``--nproc_per_node`` of a launch command in the log."""
        self.error_owner: tuple[int, int] | None = None
        """(rank, line) of a launcher's ``Process N terminated with the following error:``:
        the traceback after it, printed without a rank, is that process's."""
        self.terminate: Event | None = None
        """An uncaught C++ exception (``terminate called after throwing``), held until its
        ``what():`` line says what it was."""
        self.actor_death: ActorDeath | None = None
        """Ray's ActorDiedError, held until its fields and death cause are read."""
        self.wrapped_report: tuple[int, PeeledLine, re.Match[str]] | None = None
        """A launcher report whose help text breaks before the signal (PRRTE's ``exited on`` /
        ``signal 9 (Killed).``), held for its next line."""
        self.nonzero_exit: NonzeroExitReport | None = None
        self.container_end: int | None = None
        """The line of kubectl describe's ``State: Terminated``, until its ``Exit Code:``."""
        self.unraisable: int | None = None
        """The line of CPython's ``Exception ignored in:`` until its exception line: the
        exception was printed and ignored, the process went on."""
        self.traceback_at: int | None = None
        """The latest line of a traceback still open (header, frame, source or caret line):
        the lines after it are read for its exception line."""
        self.frame_at = 0
        """The traceback's latest header or frame line (its tail runs TAIL_LINES past it)."""
        self.dumps: dict[Process, StackDump] = {}
        """The latest faulthandler dump of each process."""
        self.snapshots = Snapshots()
        """py-spy's and gdb's dumps, held until the log shows whether the run went on."""
        self.stragglers: Event | None = None
        """nvidia-resiliency-ext's straggler report, held until the detector stops training:
        only then are the ranks it names the cause."""
        self.nccl_traces = NcclTraces()
        """NCCL's WARNs no entry reads, held for the error-return trace that confirms them."""
        self.last_error: tuple[int, int | None] | None = None
        """(line, rank) of PyTorch's ``Last error:``: the next line is NCCL's last WARN text."""
        self.ports_down: dict[tuple[str | None, int | None], Event] = {}
        """InfiniBand ports NCCL's processes saw go down, until one says it is active again."""
        self.stall_list = False
        """Inside Horovod's ``Stalled ranks:`` list (one ``rank: [tensors]`` line per rank; an
        entry naming Horovod tensors is read as one even when its header was not pasted)."""
        self.stalls = StalledRanks()
        """The ranks Horovod's stall lists named, held until the log shows the stall passed."""
        self.rank_blocks: set[int] = set()
        """The lines of Intel MPI's per-rank blocks in this cycle."""
        self.agent_start: int | None = None
        """The first ``Starting elastic_operator`` since the last worker group started: the
        cycle a new agent opens starts there, once its rendezvous shows it is one."""
        self.new_agents: set[Source] = set()
        """Launchers whose agent started since their last worker group did."""
        self.agent_places: dict[Source, torchrun.AgentPlace] = {}
        """Each launcher's rendezvous result, read since its last worker group started."""
        self.cycle_agents: list[torchrun.AgentPlace] = []
        """The places of the agents whose worker groups run in this cycle."""
        self.restart_announced = False
        """An agent said it restarts its worker group: its next start is a new cycle."""

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
        self._flush_terminate()
        self._flush_actor_death()
        self._end_stalls()
        self._end_snapshots()
        self._end_ports()
        if self.wrapped_report is not None:
            self._end_wrapped_report(0, "")
        self._end_rank_blocks()
        self._end_nonzero_exit(None)
        if self.agent_start is not None:  # an agent that never started its workers
            self._new_cycle(self.agent_start)
        self.tables.close_all(self.cycle)
        for pid, (event, source) in self.agent_failures.items():
            if pid not in self.tables.pids:
                event.rank = self._global_rank(event.rank, source)
                self.cycle.add(event)
        self.cycle.name_unconnected()
        for event in self.cycle.events.values():
            if event.rank is None and event.local is not None:
                source, local = event.local
                event.rank = self._global_rank(local, source, guess=event.device)
        self.cycle.resolve_processes()
        last_line = last_text[0] + last_text[1].rstrip().count(b"\n") + 1 if has_text else 0
        self.cycle.traceback_cut = self._in_traceback(last_line)
        self.cycle.nccl_inits.end(last_line)
        return ScanResult(
            self.cycle,
            self.cycles,
            self.ranks_seen or self.labels_seen,
            self.world_size,
            has_text,
            not_text,
            last_line,
            self._covered(),
        )

    def _covered(self) -> set[int] | None:
        """The ranks the log can show, where it holds fewer nodes' rendezvous results than
        the job has nodes (one node's log: the other nodes' ranks are not silent, only
        absent); None where nothing says the log is partial."""
        groups = {tuple(sorted(m.values())) for maps in self.rank_maps.values() for m in maps}
        if not self.group_world or not groups or len(groups) >= self.group_world:
            return None
        return {rank for group in groups for rank in group}

    def _block(self, block: bytes, text: str) -> None:
        if self.blocks_read < RANK_SCAN_BLOCKS:
            self._collect_ranks(block)
        self.blocks_read += 1
        if self._must_read(self.line_base + 1) or _worth_reading(text):
            line_no = self.line_base + 1
            for start, end in _slices(block):
                if self._must_read(line_no) or _worth_reading(text[start:end]):
                    self._slice(block[start:end], line_no)
                line_no += block.count(b"\n", start, end)
        self.line_base += block.count(b"\n")

    def _collect_ranks(self, chunk: bytes) -> None:
        self.ranks_seen.update(int(r) for r in set(RANK_PREFIX.findall(chunk)))
        self.tee_locals.update(int(r) for r in set(_TEE_PREFIX.findall(chunk)))
        self.cycle.nccl_inits.processes.update(_nccl_processes(chunk))
        for label, rank in _LABELLED_RANK.findall(chunk):
            self.labels_by_prefix.note(int(label), int(rank))
        if self.ranks_seen:
            return
        labels = {int(r) for r in _SRUN_LABEL.findall(chunk)}
        if not labels and _LABEL_BEHIND_WRAPPERS.search(chunk):
            lines = chunk.decode("utf-8", "replace").splitlines()
            if _labels(lines[:LABEL_SAMPLE_LINES]):  # srun --label marks every line
                labels = _labels(lines)
        self.labels_seen.update(labels)

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
                self.ranks_seen.add(self.file_rank)
        elif line.rank is None and self.file_rank is not None:
            return replace(line, rank=self.file_rank)  # a copy: peeled lines are shared
        return line

    def _note_ranks(self, reading: LineReading, line: PeeledLine) -> None:
        if reading.prefix_ranks:
            self.ranks_seen.update(reading.prefix_ranks)
        if line.local_rank is not None:
            self.tee_locals.add(line.local_rank)
        if line.labels:
            if not self.ranks_seen:
                self.labels_seen.add(line.labels[0])
            if line.rank is not None:
                self.labels_by_prefix.note(line.labels[0], line.rank)

    @property
    def labels_are_ranks(self) -> bool:
        """srun's task labels are the ranks where nothing else names ranks, or where lines
        that carry both a label and a rank (a launcher's rank prefix, or NCCL's init line in
        the largest communicator seen: the world's, where sub-groups number their own ranks)
        have the two equal, for a label besides 0 (label 0 is rank 0 under torchrun too), and
        never differ (srun started one task per rank; under torchrun a label is the node's
        task). Read as the scan goes: a line before the evidence keeps what was known then."""
        evidence = [self.labels_by_prefix]
        if self.labels_by_comm:
            evidence.append(self.labels_by_comm[max(self.labels_by_comm)])
        agree = any(e.agreeing - {0} for e in evidence)
        return not self.ranks_seen or (agree and not any(e.differ for e in evidence))

    def _line(self, line_no: int, line: PeeledLine, reading: LineReading) -> None:
        marked = line.rank if line.rank is not None else reading.message_rank
        self._follow_nccl(line_no, line, reading)
        if self.last_error is not None and line_no == self.last_error[0] + 1:
            rank = self._rank_of(line_no, line, marked)
            rank = rank if rank is not None else self.last_error[1]
            if rank is not None:
                self.cycle.last_errors[line.content.strip()] = rank
            self.last_error = None
        if self.wrapped_report is not None and self._end_wrapped_report(line_no, line.content):
            return
        if self.snapshots.watching(line_no) and self._snapshot_line(line_no, line):
            return
        if self.stall_list or reading.horovod:  # Horovod's "rank: [tensor, ...]" entries
            entry = stall_entry(line)
            if entry is not None:
                self.stalls.name(line_no, *entry, line.text)
                return
            self.stall_list = False
        if self.stalls.entries and marked is not None:
            self._stall_outlived(marked, line)
        # with no table open, only a table's rank field opens one (a table pasted headless)
        if (self.tables.any_open or reading.table_rank) and self.tables.feed(
            self.cycle, line.source, line_no, line.text, line.content
        ):
            return
        if reading.table_start:
            self.tables.start(line.source)
        elif reading.cycle_start:
            self._worker_group_start(line_no, line)
        elif not (reading.quiet and self._idle):
            self._facts(line_no, line, marked, reading)

    @property
    def _idle(self) -> bool:
        """No traceback, report or ignored exception open: a quiet line (``LineReading``)
        changes nothing in ``_facts``."""
        return (
            self.traceback_at is None
            and self.unraisable is None
            and self.terminate is None
            and self.actor_death is None
            and self.nonzero_exit is None
        )

    def _follow_nccl(self, line_no: int, line: PeeledLine, reading: LineReading) -> None:
        """NCCL's own lines (``host:pid:tid [dev] NCCL INFO``) keep an init the latest thing
        the run did; any other line read says more came after (its processes are read from
        the first blocks whole, ``_nccl_processes``). Its WARNs wait for an error-return trace
        (``NcclTraces``)."""
        self.cycle.nccl_inits.follow(line_no, nccl=reading.nccl_info)
        if reading.nccl_warn and line.pid is not None:
            self.nccl_traces.warn((line.host, line.pid), line_no)

    def _facts(
        self, line_no: int, line: PeeledLine, marked: int | None, reading: LineReading
    ) -> None:
        content = line.content
        rank = self._rank_of(line_no, line, marked)
        self._run_facts(line_no, line, reading)
        found, part = self._traceback_part(line_no, line, reading.found)
        if self.unraisable is not None and self._ignored(line_no, found, part):
            return
        if self.terminate is not None and line_no - self.terminate.line > WHAT_LINES:
            self._flush_terminate()
        if self.actor_death is not None and not self.actor_death.holds(line_no):
            self._flush_actor_death()
        if self.nonzero_exit is not None and not self.nonzero_exit.holds(line_no):
            self._end_nonzero_exit(None)
        while found is not None and found[0].handler is not None:
            signature, match = found
            # a handler returns False for a line that is not its report's (``Exit code:``
            # outside mpirun's report): the entries after it read the line
            handler = getattr(self, f"_on_{signature.handler}")
            if handler(line_no, line, match, signature) is not False:
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
            field = _rank_field(match)
            if _in_subgroup(signature, field, rank):
                fact.named = ()  # group ranks: no global rank to blame
            rank = _named_rank(signature, field, rank)
            device = _device_index(signature, match) if rank is None else None
        else:
            device = None
            error = error_line(content, line.error_level)
            if error is None:
                return
            fact = error
            if rank is None and fact.named:
                rank = fact.named[0]
        if fact.signature in GROUP_RESTARTS:
            self.restart_announced = True
        if fact.signature in STEPS_CANCELLED and self.cycle.task_failed:
            return  # srun cancels the step after a task failed: the teardown, not a cause
        killed = fact.signature in SHELL_CRASHES and "(SIGKILL)" in fact.detail
        if killed and self.cycle.killing_all and rank is None:
            fact.role = "consequence"  # the launcher killed its own main process
        if fact.kind in (Kind.SCHEDULER, Kind.JOB_SIGNAL):
            self.cycle.step_terminating = True
        fact.node = fact.node or line.host  # a collector's host prefix: where the line came from
        event = Event(line_no, fact, line.text, rank, report=report, process=process)
        if rank is None and line.local_rank is not None:
            event.local = (line.source, line.local_rank)
        elif device is not None:
            event.local, event.device = (line.source, device), True
        if "traceback" in fact.extra:
            self.cycle.traceback_line = event
        if not self._death_cause(event):
            self.cycle.add(event)

    def _must_read(self, line_no: int) -> bool:
        """Lines read whatever their words: a traceback's, those after ``Exception ignored
        in:`` until its exception line, and the entries of Horovod's stall list (tensor names
        are the user's: ``5: [allreduce.fc3.weight]`` holds no keyword), and the lines after
        them, for the stalled ranks' own word (``StalledRanks``)."""
        ignoring = self.unraisable is not None and line_no - self.unraisable <= UNRAISABLE_LINES
        stalls = self.stall_list or self.stalls.watching(line_no)
        held = self.wrapped_report is not None and line_no == self.wrapped_report[0] + 1
        held = held or (self.last_error is not None and line_no == self.last_error[0] + 1)
        dumps = self.snapshots.watching(line_no)
        return ignoring or stalls or held or dumps or self._in_traceback(line_no)

    def _in_traceback(self, line_no: int) -> bool:
        at = self.traceback_at
        return (
            at is not None and line_no <= at + EXCEPTION_WINDOW and at - self.frame_at < TAIL_LINES
        )

    def _traceback_part(
        self, line_no: int, line: PeeledLine, found: Found | None
    ) -> tuple[Found | None, bool]:
        """The line's match, and whether it is part of a traceback (its header, frames, their
        source, caret and repeat lines). The first other line after a traceback ends it and,
        where no entry read it, is read as its exception line, whatever the exception's type."""
        if found is not None and found[0].id in TRACEBACK_LINES:
            self.traceback_at = self.frame_at = line_no
            return found, True
        if not self._in_traceback(line_no):
            self.traceback_at = None
            return found, False
        if not line.content or _indented(line) or _REPEATED.match(line.content):
            self.traceback_at = line_no
            return found, True
        self.traceback_at = None
        return found or match_follower(line.content, TRACEBACK_FRAME), False

    def _ignored(self, line_no: int, found: Found | None, part: bool) -> bool:
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

    def _line_rank(self, line_no: int, line: PeeledLine) -> int | None:
        """The rank whose line it is: its marker, else srun's label (where labels are ranks),
        else the process a launcher said the traceback after it belongs to."""
        return self._rank_of(line_no, line, _marked_rank(line))

    def _rank_of(self, line_no: int, line: PeeledLine, marked: int | None) -> int | None:
        """``_line_rank``, given the line's ``_marked_rank``."""
        rank = marked
        if rank is None and line.labels and self.labels_are_ranks:
            rank = line.labels[0]
        if rank is None and self.error_owner and line_no - self.error_owner[1] < OWNED_LINES:
            rank = self.error_owner[0]
        return rank

    def _run_facts(self, line_no: int, line: PeeledLine, reading: LineReading) -> None:
        """What a line says of the run as a whole: world size, layout, done, checkpoints."""
        if reading.layout:
            node, nproc = torchrun.node_layout(line.content)
            if node is not None and nproc is not None:
                self.node_layout = (node, nproc)
        stated = reading.stated
        if stated is None:
            return
        self._note_world(stated.world_size)
        if (comm := stated.nccl_init_rank) is not None:
            rank, size = comm
            self.ranks_seen.add(rank)
            if line.label is not None:
                self.labels_by_comm.setdefault(size, LabelsBesideRanks()).note(line.label, rank)
            if line.pid is not None:
                self.cycle.processes.comm(line.pid, line.host, rank, size)
        if (step := stated.nccl_init_step) is not None:
            member = (line.host, line.pid) if line.pid is not None else None
            self.cycle.nccl_inits.note(line_no, line.text, step, member)
        if stated.process_rank is not None:
            self.cycle.processes.say(*stated.process_rank, line.host)
        if stated.training_done:
            self.cycle.training_done_line = line_no
        elif stated.fit_done:
            self.cycle.fit_done_line = line_no
        tool_done = line_no in (self.cycle.training_done_line, self.cycle.fit_done_line)
        ended_ok = tool_done or stated.process_ok
        if ended_ok:
            self.cycle.ended_ok_line = line_no
        if ended_ok or stated.work_done:
            self.cycle.work_done_line = line_no
        if stated.checkpoint_saved:
            self.cycle.checkpoint_saved = True

    # Handlers of the catalogue's report and context entries (``handler = ...``).

    def _on_closing_signal(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """torchrun stopping a worker after another one failed: that worker is a victim."""
        self.cycle.launcher_term_pids.add(int(match["pid"] or match["pid2"]))

    def _on_step_terminating(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        self.cycle.step_terminating = True

    def _on_child_terminated(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """Lightning's report of a failed child: it SIGKILLs the others and its main process
        next, so a shell's ``Killed`` after it is that teardown."""
        self._on_agent_failure(line_no, line, match, signature)
        self.cycle.killing_all = True

    def _on_agent_failure(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        code, local, pid = int(match["code"]), int(match["local"]), int(match["pid"])
        self._agent_failure(line_no, line.text, line.source, code, local, pid)

    def _on_rank_list(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        ranks = [int(r) for r in re.findall(r"\d+", match["ranks"])]
        self._rank_list(line.source, match["which"], ranks)

    def _on_launcher_report(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """A launcher's word on how a rank ended: mpirun's ``process rank N with PID P on
        node H exited on signal S``, horovodrun's ``Process N exit with status code C``;
        DeepSpeed's ``exits with return code = C`` and MPICH's ``EXIT CODE: C`` name no rank."""
        groups = match.groupdict()
        rank = _rank_field(match)
        code = -int(groups["num"]) if groups.get("num") else int(groups.get("code") or 1)
        pid = int(groups["pid"]) if groups.get("pid") else None
        fact = _exit_fact(code, pid, groups.get("node"))
        stopping = self.cycle.stopping_after
        fact.by_launcher = stopping not in (None, rank) and fact.signal_name in LAUNCHER_STOP
        if groups.get("rank2") is not None:  # horovodrun stops the other workers
            self.cycle.stopping_after = rank
        self._add_report(line_no, fact, line.text, rank)

    def _add_report(self, line_no: int, fact: LineFact, text: str, rank: int | None) -> None:
        """A launcher's report of how a rank ended: the root cause it names."""
        event = Event(line_no, fact, text, rank, report=True)
        event.root_cause = True
        self.cycle.add(event)

    def _on_wrapped_report(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        if self.wrapped_report is not None:
            self._end_wrapped_report(line_no, "")
        self.wrapped_report = (line_no, line, match)

    def _on_rank_block(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """Intel MPI's block for one rank (``RANK 5 PID .. RUNNING AT node1``), its signal on
        the next line, like PRRTE's wrapped report."""
        self._on_wrapped_report(line_no, line, match, signature)
        self.rank_blocks.add(line_no)

    def _end_wrapped_report(self, line_no: int, content: str) -> bool:
        """Complete a held report with the signal its next line gives (True: that line was
        read); a report whose next line is not its signal stands as an exit with no code."""
        assert self.wrapped_report is not None
        held_no, held, match = self.wrapped_report
        self.wrapped_report = None
        rank, pid = int(match["rank"]), int(match["pid"])
        signal = _WRAPPED_SIGNAL.match(content) if line_no == held_no + 1 else None
        fact = _exit_fact(-int(signal["num"]) if signal else 1, pid, match["node"])
        self._add_report(held_no, fact, held.text, rank)
        return signal is not None

    def _end_rank_blocks(self) -> None:
        """Intel MPI prints a block for every rank it ended, the cleanup's too: where one rank
        ended by another signal, the SIGKILLs are the cleanup of the remaining processes."""
        blocks = [e for e in self.cycle.events.values() if e.report and e.line in self.rank_blocks]
        if any(e.fact.signal_name not in (None, "SIGKILL") for e in blocks):
            for event in blocks:
                event.fact.by_launcher = event.fact.signal_name == "SIGKILL"
        self.rank_blocks = set()

    def _on_nonzero_exit(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        self._end_nonzero_exit(None)
        self.nonzero_exit = NonzeroExitReport(line_no, line)

    def _on_runner_exit(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """horovodrun's closing RuntimeError: its summary of the first process to exit
        non-zero, read as mpirun's report (the rank and exit code on its next lines); the
        exception only where no rank is named."""
        self._on_nonzero_exit(line_no, line, match, signature)
        found = match_line(line.content, after=signature)
        if self.nonzero_exit is not None and found is not None:
            fact = line_fact(*found)
            self.nonzero_exit.unnamed = Event(line_no, fact, line.text, _marked_rank(line))

    def _on_nonzero_exit_name(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> bool:
        """The report's ``Process name:`` (the same words name a daemon in other help texts:
        read only a few lines after the report's header)."""
        held = self.nonzero_exit
        if held is None or held.rank is not None or not held.holds(line_no):
            return False
        held.rank = int(match["rank"])
        if held.lost:
            self._end_nonzero_exit(None)
        return True

    def _on_nonzero_exit_code(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> bool:
        """The report's ``Exit code:``, which completes it."""
        held = self.nonzero_exit
        if held is None or held.rank is None or not held.holds(line_no):
            return False
        self._end_nonzero_exit(int(match["code"]))
        return True

    def _end_nonzero_exit(self, code: int | None) -> None:
        """The first process to exit non-zero is the root cause mpirun names (its exit code
        where the report kept it; a code over 128 is a signal). The header's host is
        mpirun's, not the rank's: no node."""
        held, self.nonzero_exit = self.nonzero_exit, None
        if held is not None and held.lost and held.rank is None:
            # the path lost was to a daemon ([[job,0],vpid]), not a rank: its node is gone
            self.cycle.add(Event(held.line, _daemon_lost_fact(), held.header.text, None))
            return
        if held is not None and held.rank is None and held.unnamed is not None:
            self.cycle.add(held.unnamed)
            return
        if held is None or held.rank is None:
            return
        fact = _comm_lost_fact() if held.lost else _exit_fact(1 if code is None else code, None)
        self._add_report(held.line, fact, held.header.text, held.rank)

    def _on_comm_lost(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """mpirun lost the process its next ``Process name:`` line names (its node, or the
        network to it, failed): ``A critical communication path was lost to:``."""
        self._end_nonzero_exit(None)
        self.nonzero_exit = NonzeroExitReport(line_no, line, lost=True)

    def _on_stall_list(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        self.stall_list = True

    def _stall_outlived(self, rank: int, line: PeeledLine) -> None:
        """A rank a stall list named printed again (not the inspector's own lines), or another
        rank's work went on (a line without a keyword, its numbers advanced): the stall
        passed; once every rank named has, the warnings the lists followed were no hang."""
        if rank in self.stalls.entries and inspector_line(line.content):
            return
        if rank in self.stalls.entries:
            passed = self.stalls.spoke(rank)
        else:
            passed = not _worth_reading(line.text) and self.stalls.advanced(rank, line.content)
        if passed:
            for key, event in list(self.cycle.events.items()):
                if event.fact.signature in STALL_WARNINGS:
                    del self.cycle.events[key]

    def _end_stalls(self) -> None:
        """The ranks stall lists named that never spoke again: stalled (the peers' word)."""
        if (stalled := self.stalls.event()) is not None:
            self.cycle.add(stalled)

    def _on_ready_ranks(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """Horovod waits for the ranks that are not ready: those are the stalled ones."""
        ready = [int(r) for r in re.findall(r"\d+", match["ranks"])]
        world = max(self.world_size or 0, max(ready, default=-1) + 1)
        missing = tuple(sorted(set(range(world)) - set(ready)))
        if missing:
            fact = LineFact(
                Kind.NAMED,
                "not ready: its peers wait for its tensors",
                named=missing,
                role="consequence",
                signature=signature.id,
            )
            self.cycle.add(Event(line_no, fact, line.text, None))

    def _on_preempted(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        preempted = LineFact(
            Kind.SCHEDULER, "the job was preempted", role="origin", signature=PREEMPTION.id
        )
        self.cycle.step_terminating = True
        self.cycle.add(Event(line_no, preempted, line.text, None))

    def _on_srun_tasks(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """srun's verdict per task: tasks are ranks where its labels are."""
        what = match["what"].strip()
        kind, sig = launchers.srun_task_verdict(what)
        tasks = launchers.expand_tasks(match["tasks"])
        # after a task failed, srun stops the step: SIGTERM, then SIGKILL after KillWait
        teardown = ("SIGTERM", "SIGKILL") if self.cycle.task_failed else ("SIGTERM",)
        stopped = sig in teardown and self.cycle.step_terminating
        verdict = LineFact(kind, what, node=match["node"], signal_name=sig, by_launcher=stopped)
        self.cycle.step_terminating = True  # srun stops the other tasks after this one
        self.cycle.task_failed = self.cycle.task_failed or not stopped
        if not self.labels_are_ranks:
            self.cycle.add(Event(line_no, verdict, line.text, None, report=True))
            return
        for task in tasks:
            self.cycle.add(Event(line_no, verdict, line.text, task, report=True))

    def _on_error_follows(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        self.error_owner = (self._global_rank(int(match["rank"]), line.source) or 0, line_no)

    def _on_terminate(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        self._flush_terminate()
        rank = _marked_rank(line)
        fact = line_fact(signature, match, Kind.CRASH)
        fact.node = line.host
        self.terminate = Event(line_no, fact, line.text, rank)

    def _on_terminate_what(
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
            self.cycle.add(held)
            return
        fact.node = fact.node or held.fact.node
        self.cycle.add(Event(line_no, fact, line.text, held.rank))

    def _flush_terminate(self) -> None:
        if self.terminate is not None:
            self.cycle.add(self.terminate)
            self.terminate = None

    def _on_actor_died(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """Ray's ActorDiedError (the driver's report of a dead actor): held for the fields and
        the death cause that follow it."""
        self._flush_actor_death()
        fact = line_fact(signature, match, Kind.CRASH)
        fact.node = line.host
        event = Event(line_no, fact, line.text, _marked_rank(line), report=True)
        self.actor_death = ActorDeath(event)

    def _on_actor_field(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> bool:
        """The dead actor's ``pid:`` or ``ip:`` (the same words elsewhere are not its)."""
        held = self.actor_death
        if held is None or not held.holds(line_no):
            return False
        held.pid = _field(match, "pid") or held.pid
        held.ip = match["ip"] or held.ip
        return True

    def _death_cause(self, event: Event) -> bool:
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

    def _flush_actor_death(self) -> None:
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
        self.cycle.add(event)

    def _on_init_step(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """A rendezvous or store connection step: the log's last word if initialization hung."""
        self._init_step(line_no, line, match, signature)  # this rank is there

    def _on_rendezvous_failed(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """torchrun's agent gave up its rendezvous: no worker started, initialization hung
        (the stalled-init rule reads it where the log ends on it)."""
        self._init_step(line_no, line, match, signature)

    def _on_worker_pid(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """Ray Train's start-up: which worker process (pid) holds which global rank (the
        worker list's ``(node_id=.., ip=.., pid=..)`` is peeled as a collector's prefix)."""
        pid = _field(match, "pid") or line.pid
        rank = int(match["rank"])
        if pid is not None and not self.cycle.processes.states(pid, line.host, rank):
            if self.cycle.processes.stated_rank(rank):
                self._new_cycle(line_no)  # a new worker group: Ray Train restarted it
            self.cycle.processes.state(pid, line.host, rank)
        self.ranks_seen.add(rank)
        self._note_world(_field(match, "world"))

    def _note_world(self, size: int | None) -> None:
        """The largest world size a line states (a communicator's or a launcher's)."""
        if size and size > (self.world_size or 0):
            self.world_size = size

    def _on_barrier_wait(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """A rank at the process group's store barrier (waiting, or its key added): a member
        that arrived, and an initialization step the log may end on (no rank to blame: this
        one is there)."""
        world, joined = _field(match, "world"), _field(match, "joined")
        self._members(line_no, world, joined).note(world, joined, _rank_field(match))
        self._init_step(line_no, line, match, signature)

    def _on_barrier_timeout(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """A rank (or the master store) gave up waiting for the group's members: a timeout of
        that rank, with the store's count of those who came."""
        groups = match.groupdict()
        rank = _field(match, "rank") if groups.get("rank") is not None else _marked_rank(line)
        world, joined = _field(match, "world"), _field(match, "joined")
        self._members(line_no, world, joined).note(world, joined, rank)
        fact = line_fact(signature, match, Kind.TIMEOUT)
        fact.node = line.host
        self.cycle.add(Event(line_no, fact, line.text, rank))

    def _on_group_formed(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        self._members(line_no, None).complete = True

    def _on_rank_claim(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """A process's banner naming the rank it will join as, before it joins."""
        rank, world = int(match["rank"]), int(match["world"])
        self._members(line_no, world, claimed=rank).claim(rank, world)
        self._init_step(line_no, line, match, signature)

    def _on_duplicate_rank(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """NCCL's bootstrap root saw a rank check in twice, or rank counts that disagree."""
        fact = line_fact(signature, match, Kind.PROGRESS)
        world = _field(match, "world")
        members = self._members(line_no, world)
        members.duplicate = fact.detail
        members.note(world, None, None)
        self._init_step(line_no, line, match, signature)

    def _members(
        self,
        line_no: int,
        world: int | None,
        joined: int | None = None,
        claimed: int | None = None,
    ) -> Membership:
        """The membership a line at ``line_no`` adds to: a new one where another run's
        initialization starts (a requeue, a second run in one log)."""
        if self.cycle.membership.starts_over(world, joined, claimed):
            self.cycle.membership = Membership()
        self.cycle.membership.last_line = line_no
        return self.cycle.membership

    def _init_step(
        self, line_no: int, line: PeeledLine, match: re.Match[str], entry: Signature
    ) -> None:
        """An initialization step the log may end on; no rank: the one whose line it is got
        there, the one to blame did not."""
        fact = line_fact(entry, match, Kind.PROGRESS)
        fact.node = line.host
        self.cycle.init_step = Event(line_no, fact, line.text, None)

    def _on_store_server_in_use(
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
        frame = self.cycle.traceback_line
        last_frame = frame.text if frame and line_no - frame.line <= STORE_FRAME_LINES else ""
        raised = match["raised"] is not None or TORCH_FILE.search(last_frame) is not None
        if match["listen"] is None and not raised:
            return False
        rank = self._line_rank(line_no, line)
        if rank is None and _WORKER_STORE_FRAME.search(last_frame):
            rank = 0
        fact = line_fact(signature, match, Kind.EXCEPTION)
        fact.node = line.host
        event = Event(line_no, fact, line.text, rank)
        if raised:
            self.cycle.add(event)
        else:  # the exception follows, or the agent joins as a client: a failure only at the end
            self.cycle.init_step = event
        return True

    def _on_exception_ignored(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """An exception printed as caught: CPython's ignored one (``Exception ignored in:
        %R``, then the exception), a retry library's before its retry (tenacity's ``Retrying
        ... as it raised``, then the traceback): what follows, to its exception line, is no
        failure."""
        self.unraisable = line_no

    def _on_gloo_connectivity(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """A gloo context connected at initialization: the peers it expects give the world;
        the world's context (a sub-group's is smaller, and numbers its own ranks) gives the
        rank of the process whose line it is, and that it got there."""
        rank, world = int(match["rank"]), int(match["peers"]) + 1
        # a context smaller than the processes the log shows is a sub-group's
        if world < max(self.world_size or 0, len(self.tee_locals)):
            return
        self._note_world(world)
        self.cycle.connectivity.add(rank)
        if line.local_rank is not None and line.rank is None:
            stated = self.stated_ranks.setdefault(line.source, {})
            if rank in stated.values() and stated.get(line.local_rank) != rank:
                stated.clear()  # two processes claim one rank: these contexts are sub-groups
                return
            stated.setdefault(line.local_rank, rank)

    def _on_gloo_not_connected(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """The peers a gloo context has no connection to: named once the log is read
        (``Cycle.name_unconnected``)."""
        fact = line_fact(signature, match, Kind.NAMED)
        self.cycle.unconnected.append(Event(line_no, fact, line.text, int(match["rank"])))

    def _on_faulthandler_timeout(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """faulthandler's watchdog fired (``dump_traceback_later``): the process hung; the
        stacks after it say whether a thread waits in torch.distributed (``stack_dumps``).
        With ``exit=True`` its exit code 1 follows: the hang's, not an exception's."""
        fact = line_fact(signature, match, Kind.TIMEOUT)
        fact.node = line.host
        event = Event(line_no, fact, line.text, self._line_rank(line_no, line))
        if event.rank is None and line.local_rank is not None:
            event.local = (line.source, line.local_rank)
        self.dumps[_process(line)] = StackDump(dump_event(event, "faulthandler"))
        self.cycle.add(event)

    def _on_faulthandler_thread(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """A thread's header in a dump: the frame line after it is that thread's latest."""
        if (dump := self.dumps.get(_process(line))) is not None:
            dump.thread(line_no)

    def _on_faulthandler_frame(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> bool:
        """A frame of a dump (declined outside one)."""
        dump = self.dumps.get(_process(line))
        if dump is None:
            return False
        dump.frame(line_no, match["file"], "")
        return True

    def _on_pyspy_process(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> bool:
        """py-spy's ``Process {pid}: {cmdline}``: a dump's header where ``Python v{version}``
        follows it; declined (the line is read as any other) until then."""
        self.snapshots.process = (line_no, line, match, signature)
        return False

    def _on_pyspy_python(
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
        event = Event(start, fact, first.text, self._line_rank(start, first), process=fact.pid)
        local = _LAUNCH_LOCAL_RANK.search(process["cmdline"])
        if event.rank is None and local is not None:
            event.local, event.device = (first.source, int(local["local"])), True
        elif event.rank is None and first.local_rank is not None:
            event.local = (first.source, first.local_rank)
        self.snapshots.start(StackDump(dump_event(event, "py-spy"), base=_indent(first)))
        return True

    def _on_gdb_frame(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """gdb's ``bt`` begins (frame #0): a dump of the process it attached to, whose pid
        its ``[Inferior 1 (process N) detached]`` gives at the end."""
        self._gdb_dump(line_no, line, match, signature).frame(
            line_no, "", match["function"], native=True
        )

    def _on_pybt_start(
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
        event = Event(line_no, fact, line.text, self._line_rank(line_no, line))
        dump = StackDump(dump_event(event, "gdb"), base=_indent(line))
        self.snapshots.start(dump)
        return dump

    def _snapshot_line(self, line_no: int, line: PeeledLine) -> bool:
        """A line of the py-spy or gdb dump being read (True: nothing else reads it); the
        first that is none ends the dump. After the dumps, a line without a keyword may show
        the run going on (``Snapshots.went_on``)."""
        snapshots = self.snapshots
        if snapshots.open is None:
            if not _worth_reading(line.text):
                snapshots.went_on(line.content)
            return False
        part = snapshots.open.read(line_no, line.content, _indent(line))
        if part is not True:
            snapshots.close()
        return part is not False

    def _end_snapshots(self) -> None:
        """The py-spy and gdb dumps the run did not go on after: a hang's."""
        cycle = self.cycle
        done = max(filter(None, (cycle.training_done_line, cycle.fit_done_line)), default=None)
        for event in self.snapshots.take(done):
            cycle.add(event)

    def _on_stragglers(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """The straggler detector's report (rank 0 prints it for all ranks, so it is no rank's
        own line): the ranks it names, held for the stop that may follow."""
        fact = line_fact(signature, match, Kind.NAMED)
        fact.node = line.host
        self.stragglers = Event(line_no, fact, line.text, None)

    def _on_straggler_stop(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """The detector stops training (every rank says so): the stragglers it named last are
        the cause; without the stop they were a warning."""
        held, self.stragglers = self.stragglers, None
        if held is not None:
            self.cycle.add(held)

    def _on_container_terminated(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        self.container_end = line_no

    def _on_container_exit_code(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> bool:
        """A terminated container's exit code, as kubectl describe prints the pod's status
        (apart from the log stream): a signal where the code says one, else an exit; 0 is a
        container that completed. No rank: a worker pod's index is a node's."""
        held, self.container_end = self.container_end, None
        if held is None or line_no - held > CONTAINER_STATE_LINES:
            return False
        code = int(match["code"])
        if code:
            fact = _exit_fact(code, None, line.host)
            fact.detail = f"the container ended: {fact.detail} (Kubernetes pod status)"
            fact.role, fact.signature = signature.role, signature.id
            fact.extra = dict(signature.extra)
            self.cycle.add(Event(line_no, fact, line.text, None, report=True))
        return True

    def _on_retrying(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """A tool's INFO that it retries a call (NCCL's ``Call to connect returned Connection
        refused, retrying``): no failure, though its words are a lost peer's; the WARN once the
        retries are spent is one."""

    def _on_nccl_warn(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """An NCCL WARN no entry reads: held, as NCCL warns at one level for errors and for
        advice; it is its process's own failure once NCCL's error-return trace follows it."""
        if line.pid is None:
            return
        fact = line_fact(signature, match, Kind.EXCEPTION)
        fact.role, fact.node = "origin", line.host
        event = Event(line_no, fact, line.text, self._line_rank(line_no, line), process=line.pid)
        if event.rank is None and line.local_rank is not None:
            event.local = (line.source, line.local_rank)
        self.nccl_traces.unread((line.host, line.pid), event, match["file"])

    def _on_last_error(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """PyTorch's ``Last error:`` in an NCCL error's message: the next line repeats the
        process's last NCCL WARN, for the rank that raised it (``Cycle.resolve_processes``)."""
        self.last_error = (line_no, self._line_rank(line_no, line))

    def _on_nccl_trace(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """NCCL's error-return trace (``file:line -> code``): the WARN its process printed just
        before, where no entry read it, was that process's own failure."""
        if line.pid is not None:
            event = self.nccl_traces.traced((line.host, line.pid), line_no, match["file"])
            if event is not None:
                self.cycle.add(event)

    def _on_ib_port_event(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """An InfiniBand port NCCL's process saw go down (``port error``): held until the same
        process sees it active again (``port active``: the link flapped, NCCL went on); one
        that never came back is a network failure on that node (``_end_ports``)."""
        process = (line.host, line.pid)
        if match["event"] == "port active":
            self.ports_down.pop(process, None)
            return
        fact = line_fact(signature, match, Kind.NETWORK)
        fact.role, fact.node = "origin", line.host
        rank = self._line_rank(line_no, line)
        self.ports_down.setdefault(process, Event(line_no, fact, line.text, rank, process=line.pid))

    def _end_ports(self) -> None:
        """The ports that never came back, as the cycle ends: network failures."""
        for event in self.ports_down.values():
            self.cycle.add(event)
        self.ports_down.clear()

    def _on_keep_alive_failed(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """An elastic agent could not reach its rendezvous's store (hosted by another node's
        agent): counted per agent, as one failure is a race at shutdown (several agents may
        each race once) and an agent's repeated ones a lost host."""
        failures = self.cycle.keep_alive_failures
        failures[match["node"]] = failures.get(match["node"], 0) + 1

    def _on_ignore(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """A launcher's or driver's own exception over its workers' errors: torchrun's
        ``ChildFailedError`` (its failure table says more), Ray Train's summaries (the workers'
        snippets, the errors before it). Only an error line: where the paste lost what it
        sums up, the run still failed (the fallback's evidence, never "no failure")."""
        fact = LineFact(Kind.ERROR_LINE, line.content.strip()[:200])
        self.cycle.add(Event(line_no, fact, line.text, self._line_rank(line_no, line)))

    def _on_restart_announced(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """An agent restarts its worker group (new nodes joined the rendezvous)."""
        self.restart_announced = True

    def _on_group_rank(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """The node's place in the agent's rendezvous result, or how many nodes it has."""
        if match["nodes"] is not None:
            self.group_world = int(match["nodes"])
            return
        self.agent_places.setdefault(line.source, torchrun.AgentPlace()).group_rank = int(
            match["group"]
        )

    def _rank_list(self, source: Source, which: str, ranks: list[int]) -> None:
        if which == "global":
            self.agent_places.setdefault(source, torchrun.AgentPlace()).ranks = frozenset(ranks)
        if which == "local":
            self.local_ranks[source] = ranks
        elif source in self.local_ranks:
            mapping = dict(zip(self.local_ranks.pop(source), ranks, strict=False))
            maps = self.rank_maps.setdefault(source, [])
            if mapping not in maps:
                maps.append(mapping)

    def _global_rank(self, local: int | None, source: Source, guess: bool = True) -> int | None:
        """A worker's global rank from its local one: the launcher's own rendezvous result
        (when the log holds one map for it), else its failure tables (the rank they gave the
        local rank), else ``--node_rank`` x ``--nproc_per_node``, else (with ``guess``) the
        local rank itself (right on a single node; taken without ``guess`` only where the
        ``--tee`` prefixes name as many local ranks as the world has, and with it only where
        the ranks the log's prefixes and NCCL's init lines show include it: a node whose
        workers are ranks 4-7 has no rank 0)."""
        if local is None:
            return None
        if (stated := self.stated_ranks.get(source, {}).get(local)) is not None:
            return stated
        maps = self.rank_maps.get(source, [])
        if len(maps) == 1 and local in maps[0]:
            return maps[0][local]
        if (tabled := self.tables.global_rank(source, local)) is not None:
            return tabled
        node, nproc = self.node_layout
        if node is not None and nproc is not None and not maps:
            return node * nproc + local
        if self.world_size and self.tee_locals == set(range(self.world_size)):
            return local  # the log's workers are the whole world: one node
        return local if guess and (local in self.ranks_seen or not self.ranks_seen) else None

    def _agent_failure(
        self, line_no: int, line: str, source: Source, code: int, local: int, pid: int
    ) -> None:
        """torchrun's first failed worker; its local rank is mapped to the global one at the
        end of the scan, unless a failure table names the process (with its global rank)."""
        event = Event(line_no, _exit_fact(code, pid), line, local, report=True)
        event.root_cause = not self.agent_failures
        self.agent_failures.setdefault(pid, (event, source))

    def _worker_group_start(self, line_no: int, line: PeeledLine) -> None:
        """A torchrun agent starts (``Starting elastic_operator``) or starts its worker group.
        A worker group opens a new cycle where no rendezvous result places it, where an agent
        of this cycle held its node's place (a restart, a requeue), or where a running agent
        said it restarts its group (its rendezvous may place it anew); the group of another
        node's agent (a group rank and worker ranks this cycle's agents do not hold: per-node
        logs one after the other, or interleaved) joins the cycle. The cycle starts at the
        agent's own start, where it printed one."""
        if torchrun.AGENT_START in line.content:
            self.agent_start = self.agent_start or line_no
            self.new_agents.add(line.source)
            return
        start, self.agent_start = self.agent_start or line_no, None
        place = self.agent_places.pop(line.source, None)
        restarted = self.restart_announced and line.source not in self.new_agents
        self.new_agents.discard(line.source)
        joins = not restarted and bool(self.cycle_agents)
        if place is not None and joins and not any(map(place.same_node, self.cycle_agents)):
            self.cycle_agents.append(place)
            return
        self._new_cycle(start)
        self.cycle_agents = [place] if place is not None else []

    def _new_cycle(self, line_no: int) -> None:
        self._end_nonzero_exit(None)  # a held report belongs to the cycle that printed it
        self._flush_actor_death()
        self._end_stalls()
        self._end_snapshots()
        self._end_ports()
        self._end_rank_blocks()
        later = self.cycle.split(line_no)
        if self.cycle.events:
            self.cycles += 1
        self.cycle = later
        self.restart_announced = False
        self.cycle_agents = []
        self.tables.clear()
        self.stated_ranks.clear()  # a new worker group states its ranks again
        self.dumps.clear()
        self.stragglers = None
        self.traceback_at = self.unraisable = None


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


def _process(line: PeeledLine) -> Process:
    """Which process a line is, as far as its prefixes tell."""
    return (line.source, line.rank, line.local_rank)


def _indent(line: PeeledLine) -> int:
    """The spaces before the line's message (after its wrappers, with their separator)."""
    before = line.text[: max(line.text.rfind(line.content), 0)]
    return len(before) - len(before.rstrip(" "))


def _marked_rank(line: PeeledLine) -> int | None:
    """The rank the line's wrappers mark (``[rank3]:``), else the one its message names as
    its own (``[Rank 3]``)."""
    return line.rank if line.rank is not None else message_rank(line.content)


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


def _indented(line: PeeledLine) -> bool:
    """A traceback's source or caret line: indented past its frame line's two spaces (after
    whatever wrappers the line carries)."""
    at = line.text.rfind(line.content)
    return at > 0 and line.text[:at].endswith(("   ", "\t"))


def _worth_reading(text: str) -> bool:
    """Does the text hold a keyword? Terminal colour may sit inside one (``grep --color``
    wraps the matched words), so escapes are removed first where there are any."""
    return _KEYWORDS.contains(without_colour(text))


@by_line
def _reading(raw: bytes) -> LineReading | None:
    """The line's reading where it holds a keyword, else None (decided once per distinct
    line, as its reading is)."""
    return read(raw) if _worth_reading(raw.decode("latin-1")) else None


def _labels(lines: list[str]) -> set[int]:
    return {label for line in lines if (label := peel_line(line).label) is not None}


def _daemon_lost_fact() -> LineFact:
    detail = "mpirun lost its communication path to a daemon: node lost"
    return LineFact(Kind.CRASH, detail, role="origin")


def _field(match: re.Match[str], group: str) -> int | None:
    value = match.groupdict().get(group)
    return int(value) if value is not None else None


def _rank_field(match: re.Match[str]) -> int | None:
    """The rank an entry's pattern captured (``rank``, or ``rank2`` in its other wording)."""
    rank = _field(match, "rank")
    return rank if rank is not None else _field(match, "rank2")


def _comm_lost_fact() -> LineFact:
    detail = "mpirun lost its communication path to the process (its node or the network failed)"
    return LineFact(Kind.NETWORK, detail, role="report")


def _exit_fact(code: int, pid: int | None, node: str | None = None) -> LineFact:
    """A launcher's report of a rank's exit code: a signal when the code says one."""
    sig = exit_signal(code)
    if sig:
        return LineFact(
            Kind.SIGNAL, f"{sig} (exit code {code})", signal_name=sig, pid=pid, node=node
        )
    return LineFact(Kind.EXIT, f"exited with code {code}", pid=pid, node=node)


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
