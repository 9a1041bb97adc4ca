"""MPI launchers' reports of how ranks ended (Open MPI and PRRTE's mpirun, Intel MPI, MPICH,
horovodrun; DeepSpeed's and Kubeflow's launchers report alike): held over the lines that
complete them (a wrapped signal, a ``Process name:`` and ``Exit code:``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from pytest_faultloop.analyzers.log.exit_codes import exit_fact
from pytest_faultloop.analyzers.log.line_facts import Kind, LineFact
from pytest_faultloop.analyzers.log.line_wrappers import PeeledLine
from pytest_faultloop.analyzers.log.readers.context import ScanContext, marked_rank, rank_field
from pytest_faultloop.analyzers.log.scan_events import Event
from pytest_faultloop.analyzers.log.signatures import Signature, line_fact, match_line

NONZERO_EXIT_LINES = 6
"""How far after mpirun's non-zero-exit header its ``Process name:`` and ``Exit code:`` end."""
LAUNCHER_STOP = ("SIGTERM", "SIGKILL")
"""How horovodrun stops the remaining workers after a failure (safe_shell_exec.py
terminate_executor_shell_and_children: SIGTERM, SIGKILL after 5 s)."""
_WRAPPED_SIGNAL = re.compile(r"\s*(?:signal|=\s+KILLED BY SIGNAL:) (?P<num>\d+)\b")
"""The signal on the line after a held report: PRRTE's ``signal 9 (Killed).``, Intel MPI's
``=   KILLED BY SIGNAL: 9 (Killed)``."""


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


class MpiReader:
    """The launcher reports held until complete, and Intel MPI's per-rank blocks."""

    HANDLERS: ClassVar[tuple[str, ...]] = (
        "launcher_report",
        "wrapped_report",
        "rank_block",
        "nonzero_exit",
        "runner_exit",
        "nonzero_exit_name",
        "nonzero_exit_code",
        "comm_lost",
    )

    def __init__(self, ctx: ScanContext) -> None:
        self.ctx = ctx
        self.wrapped_report: tuple[int, PeeledLine, re.Match[str]] | None = None
        """A launcher report whose help text breaks before the signal (PRRTE's ``exited on`` /
        ``signal 9 (Killed).``), held for its next line."""
        self.nonzero_exit: NonzeroExitReport | None = None
        self.rank_blocks: set[int] = set()
        """The lines of Intel MPI's per-rank blocks in this cycle."""

    def on_launcher_report(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """A launcher's word on how a rank ended: mpirun's ``process rank N with PID P on
        node H exited on signal S``, horovodrun's ``Process N exit with status code C``;
        DeepSpeed's ``exits with return code = C`` and MPICH's ``EXIT CODE: C`` name no rank."""
        groups = match.groupdict()
        rank = rank_field(match)
        code = -int(groups["num"]) if groups.get("num") else int(groups.get("code") or 1)
        pid = int(groups["pid"]) if groups.get("pid") else None
        fact = exit_fact(code, pid, groups.get("node"))
        stopping = self.ctx.cycle.stopping_after
        fact.by_launcher = stopping not in (None, rank) and fact.signal_name in LAUNCHER_STOP
        if groups.get("rank2") is not None:  # horovodrun stops the other workers
            self.ctx.cycle.stopping_after = rank
        self._add_report(line_no, fact, line.text, rank)

    def _add_report(self, line_no: int, fact: LineFact, text: str, rank: int | None) -> None:
        """A launcher's report of how a rank ended: the root cause it names."""
        event = Event(line_no, fact, text, rank, report=True)
        event.root_cause = True
        self.ctx.cycle.add(event)

    def on_wrapped_report(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        if self.wrapped_report is not None:
            self.end_wrapped_report(line_no, "")
        self.wrapped_report = (line_no, line, match)

    def on_rank_block(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """Intel MPI's block for one rank (``RANK 5 PID .. RUNNING AT node1``), its signal on
        the next line, like PRRTE's wrapped report."""
        self.on_wrapped_report(line_no, line, match, signature)
        self.rank_blocks.add(line_no)

    def end_wrapped_report(self, line_no: int, content: str) -> bool:
        """Complete a held report with the signal its next line gives (True: that line was
        read); a report whose next line is not its signal stands as an exit with no code."""
        assert self.wrapped_report is not None
        held_no, held, match = self.wrapped_report
        self.wrapped_report = None
        rank, pid = int(match["rank"]), int(match["pid"])
        signal = _WRAPPED_SIGNAL.match(content) if line_no == held_no + 1 else None
        fact = exit_fact(-int(signal["num"]) if signal else 1, pid, match["node"])
        self._add_report(held_no, fact, held.text, rank)
        return signal is not None

    def end_rank_blocks(self) -> None:
        """Intel MPI prints a block for every rank it ended, the cleanup's too: where one rank
        ended by another signal, the SIGKILLs are the cleanup of the remaining processes."""
        blocks = [
            e for e in self.ctx.cycle.events.values() if e.report and e.line in self.rank_blocks
        ]
        if any(e.fact.signal_name not in (None, "SIGKILL") for e in blocks):
            for event in blocks:
                event.fact.by_launcher = event.fact.signal_name == "SIGKILL"
        self.rank_blocks = set()

    def on_nonzero_exit(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        self.end_nonzero_exit(None)
        self.nonzero_exit = NonzeroExitReport(line_no, line)

    def on_runner_exit(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """horovodrun's closing RuntimeError: its summary of the first process to exit
        non-zero, read as mpirun's report (the rank and exit code on its next lines); the
        exception only where no rank is named."""
        self.on_nonzero_exit(line_no, line, match, signature)
        found = match_line(line.content, after=signature)
        if self.nonzero_exit is not None and found is not None:
            fact = line_fact(*found)
            self.nonzero_exit.unnamed = Event(line_no, fact, line.text, marked_rank(line))

    def on_nonzero_exit_name(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> bool:
        """The report's ``Process name:`` (the same words name a daemon in other help texts:
        read only a few lines after the report's header)."""
        held = self.nonzero_exit
        if held is None or held.rank is not None or not held.holds(line_no):
            return False
        held.rank = int(match["rank"])
        if held.lost:
            self.end_nonzero_exit(None)
        return True

    def on_nonzero_exit_code(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> bool:
        """The report's ``Exit code:``, which completes it."""
        held = self.nonzero_exit
        if held is None or held.rank is None or not held.holds(line_no):
            return False
        self.end_nonzero_exit(int(match["code"]))
        return True

    def end_nonzero_exit(self, code: int | None) -> None:
        """The first process to exit non-zero is the root cause mpirun names (its exit code
        where the report kept it; a code over 128 is a signal). The header's host is
        mpirun's, not the rank's: no node."""
        held, self.nonzero_exit = self.nonzero_exit, None
        if held is not None and held.lost and held.rank is None:
            # the path lost was to a daemon ([[job,0],vpid]), not a rank: its node is gone
            self.ctx.cycle.add(Event(held.line, _daemon_lost_fact(), held.header.text, None))
            return
        if held is not None and held.rank is None and held.unnamed is not None:
            self.ctx.cycle.add(held.unnamed)
            return
        if held is None or held.rank is None:
            return
        fact = _comm_lost_fact() if held.lost else exit_fact(1 if code is None else code, None)
        self._add_report(held.line, fact, held.header.text, held.rank)

    def on_comm_lost(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """mpirun lost the process its next ``Process name:`` line names (its node, or the
        network to it, failed): ``A critical communication path was lost to:``."""
        self.end_nonzero_exit(None)
        self.nonzero_exit = NonzeroExitReport(line_no, line, lost=True)

    def end(self) -> None:
        """The log is read: the reports still held stand as they are."""
        if self.wrapped_report is not None:
            self.end_wrapped_report(0, "")
        self.end_rank_blocks()
        self.end_nonzero_exit(None)


def _daemon_lost_fact() -> LineFact:
    detail = "mpirun lost its communication path to a daemon: node lost"
    return LineFact(Kind.CRASH, detail, role="origin")


def _comm_lost_fact() -> LineFact:
    detail = "mpirun lost its communication path to the process (its node or the network failed)"
    return LineFact(Kind.NETWORK, detail, role="report")
