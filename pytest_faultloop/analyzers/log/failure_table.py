"""torchrun's failure table (``Failures:`` ... ``Root Cause (first observed failure)``),
read field by field: each record becomes one event of the current cycle."""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_faultloop.analyzers.log import torchrun_reports as torchrun
from pytest_faultloop.analyzers.log.exit_codes import exit_signal
from pytest_faultloop.analyzers.log.line_facts import Kind, LineFact
from pytest_faultloop.analyzers.log.line_wrappers import Source
from pytest_faultloop.analyzers.log.scan_events import Cycle, Event
from pytest_faultloop.analyzers.log.signatures import classify


@dataclass
class _Record:
    """One failure record of torchrun's table, filled field by field."""

    line: int
    root_cause: bool
    text: str = ""
    rank: int | None = None
    local: int | None = None
    host: str | None = None
    exitcode: int | None = None
    pid: int | None = None
    signal_name: str | None = None
    traceback: str = ""


@dataclass
class _Table:
    root_cause_next: bool = False
    record: _Record | None = None
    record_fact: LineFact | None = None
    """The exception found in the record's traceback lines."""
    listed: dict[int, int] = field(default_factory=dict)
    """Each record's local rank -> its global rank."""
    lists_stopped: bool = False
    """A record is a worker the agent stopped (SIGTERM): the table lists those too."""


class FailureTables:
    """The open failure tables, by the launcher that prints them (its host and srun label)."""

    def __init__(self) -> None:
        self._open: dict[Source, _Table] = {}
        self.pids: set[int] = set()
        """The processes a table reported (with their global rank)."""
        self.locals: dict[Source, dict[int, set[int]]] = {}
        """By launcher: each local rank its tables reported -> the global ranks they gave it."""

    @property
    def any_open(self) -> bool:
        return bool(self._open)

    def start(self, source: Source) -> None:
        self._open[source] = _Table()

    def clear(self) -> None:
        """A new restart cycle: tables still open are dropped, and the local ranks they
        mapped (a re-rendezvous may place the workers anew)."""
        self._open.clear()
        self.locals.clear()

    def global_rank(self, source: Source, local: int) -> int | None:
        """The global rank the launcher's tables gave this local rank, where they gave one."""
        ranks = self.locals.get(source, {}).get(local, set())
        if len(ranks) == 1:
            return next(iter(ranks))
        return None if ranks else self._base(source, local)

    def _base(self, source: Source, local: int) -> int | None:
        """A local rank the tables do not list, from the ones they do: torchrun numbers an
        agent's workers from a base, global = base + local (``_assign_worker_ranks`` in
        elastic/agent/server/api.py), where the tables agree on one base."""
        bases = {g - known for known, ranks in self.locals.get(source, {}).items() for g in ranks}
        return local + next(iter(bases)) if len(bases) == 1 else None

    def close_all(self, cycle: Cycle) -> None:
        """The end of the log: the last record of every open table becomes an event."""
        for source in list(self._open):
            self._end_record(cycle, source)

    def feed(self, cycle: Cycle, source: Source, line_no: int, line: str, content: str) -> bool:
        """Consume a line of the source's open table; False when none is open or the line is
        not part of it."""
        table = self._open.get(source)
        if table is None:
            return self._headless(cycle, source, line_no, line, content)
        if content.startswith(("====", "----")):
            self._end_record(cycle, source)
            if content.startswith("===="):
                del self._open[source]
                self._closed(cycle, table, line_no, line)
            return True
        if torchrun.ROOT_CAUSE in content:
            self._end_record(cycle, source)
            table.root_cause_next = True
            return True
        field_ = torchrun.table_field(content)
        record = table.record
        if field_ is None:
            if record is None or not record.traceback:
                return False
            if fact := classify(content.strip()):
                table.record_fact = fact
            return True
        key, value = field_
        if key == "time":
            self._end_record(cycle, source)
            table.record = _Record(line_no, table.root_cause_next, text=line)
            table.root_cause_next = False
        elif record is None:
            return False
        elif key == "host":
            record.host = value
        elif key == "rank" and (ranks := torchrun.table_rank(value)):
            record.rank, record.local = ranks
        elif key == "exitcode" and (exit_ := torchrun.table_exit(value)):
            record.exitcode, record.pid = exit_
            self.pids.add(record.pid)
        elif key == "traceback":
            record.line, record.text = line_no, line
            record.traceback = value or "-"
            record.signal_name = torchrun.table_signal(value)
            table.record_fact = None if record.signal_name else classify(value)
        return True

    def _headless(
        self, cycle: Cycle, source: Source, line_no: int, line: str, content: str
    ) -> bool:
        """A table pasted without its heading and time: its ``rank : N (local_rank: M)`` field,
        which nothing else prints, opens it at that record."""
        field_ = torchrun.table_field(content)
        ranks = torchrun.table_rank(field_[1]) if field_ and field_[0] == "rank" else None
        if ranks is None:
            return False
        self.start(source)
        table = self._open[source]
        table.record = _Record(line_no, root_cause=False, text=line)
        table.record.rank, table.record.local = ranks
        return True

    def _closed(self, cycle: Cycle, table: _Table, line_no: int, line: str) -> None:
        """What a whole table says beyond its records: whose launcher printed it (its node's
        block of ranks, ``base + local``: that launcher outlived them), and which one worker
        it leaves out.

        The one worker of an agent that its failure table leaves out ended with status 0
        before the failure: torchrun's table (PyTorch 2.x) lists every worker whose exit code
        is not 0, the ones its agent stopped after the first failure included (SIGTERM, -15),
        so a worker missing from a table that lists all its node-mates, one of them stopped by
        the agent, had already exited 0: a rank that left training early, where its peers had
        not. Older agents list only the workers that had failed when they looked (a hung one
        they stopped is missing too): a table without a stopped worker says nothing, and
        neither does a node of two workers, one listed (the other may have ended well before
        the last one failed)."""
        workers = 1 + max(
            (local for locals_ in self.locals.values() for local in locals_), default=0
        )
        bases = {rank - local for local, rank in table.listed.items()}
        if len(bases) != 1:
            return
        (base,) = bases
        cycle.launchers_heard.update(range(base, base + workers))
        absent = set(range(workers)) - table.listed.keys()
        if not table.lists_stopped or workers < 3 or len(absent) != 1:
            return
        (local,) = absent
        fact = LineFact(
            Kind.EXIT,
            "exited with code 0 before its peers failed (the one worker its launcher's "
            "failure report leaves out)",
        )
        cycle.add(Event(line_no, fact, line, base + local, report=True))

    def _end_record(self, cycle: Cycle, source: Source) -> None:
        table = self._open.get(source)
        if table is None or table.record is None:
            return
        record, fact = table.record, table.record_fact
        table.record, table.record_fact = None, None
        if record.local is not None and record.rank is not None:
            self.locals.setdefault(source, {}).setdefault(record.local, set()).add(record.rank)
            table.listed[record.local] = record.rank
        sig = record.signal_name or (exit_signal(record.exitcode) if record.exitcode else None)
        table.lists_stopped = table.lists_stopped or sig == "SIGTERM"
        if sig:
            fact = LineFact(Kind.SIGNAL, f"{sig} (exit code {record.exitcode})", signal_name=sig)
        elif fact is None or fact.kind is Kind.PROGRESS:
            fact = LineFact(Kind.EXIT, f"exited with code {record.exitcode}")
        fact.node, fact.pid = record.host, record.pid
        if record.pid is not None and record.rank is not None:
            # the table says which process each failed rank was: NCCL's and the driver's lines
            # name that process by its pid
            cycle.processes.table(record.pid, record.host, record.rank)
        event = Event(record.line, fact, record.text, record.rank, report=True)
        event.root_cause = record.root_cause
        cycle.add(event)
