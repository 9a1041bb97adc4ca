"""The launcher's supervision of its ranks, like torchrun's agent: their output into the shared
log with ``[rankN]:`` prefixes, each exit reported, stuck ranks ended, the failure summary."""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import selectors
import signal
import sys
import time
from dataclasses import dataclass
from typing import TextIO

from pytest_faultloop.jobs.workload import tiny_gloo
from pytest_faultloop.jobs.workload.environment import NodeSpec
from pytest_faultloop.jobs.workload.heartbeat import Heartbeat

log = logging.getLogger("tiny_gloo.launcher")

KILL_AFTER_TERM_S = 3.0
"""How long a rank may take to die after SIGTERM before it gets SIGKILL."""

DRAIN_S = 2.0
"""How long output may still arrive after the last rank exited (pipes inherited elsewhere)."""


@dataclass
class RankProcess:
    local_rank: int
    rank: int
    pid: int
    output_fd: int
    heartbeat: Heartbeat
    forked_at: float
    """``time.monotonic()`` when the rank was forked."""
    exit_code: int | None = None
    """``os.waitstatus_to_exitcode``: negative for a signal, as torchrun reports it."""
    exited_at: float | None = None
    term_sent_at: float | None = None
    killed: bool = False

    @property
    def alive(self) -> bool:
        return self.exit_code is None


class LogWriter(logging.Handler):
    """Appends whole lines to the shared log with one ``write`` each (no interleaving)."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self.fd = fd
        self.setFormatter(logging.Formatter(tiny_gloo.LOG_FORMAT, tiny_gloo.LOG_DATEFMT))

    def emit(self, record: logging.LogRecord) -> None:
        self.write(self.format(record) + "\n")

    def write(self, text: str) -> None:
        os.write(self.fd, text.encode("utf-8", "replace"))


class Supervisor:
    """Copies the ranks' output into the log, reaps them, ends stuck ones, summarises."""

    def __init__(
        self,
        spec: NodeSpec,
        ranks: list[RankProcess],
        writer: LogWriter,
        notes: TextIO,
        stuck_after_s: float,
        startup_limit_s: float,
    ):
        self.spec = spec
        self.ranks = ranks
        self.writer = writer
        self.notes = notes
        """The launcher's own messages (``FAULTLOOP_LAUNCHER_NOTES``), not the workload log."""
        self.stuck_after_s = stuck_after_s
        self.startup_limit_s = startup_limit_s
        self.shutdown_requested = False
        self._selector = selectors.DefaultSelector()
        self._partial: dict[int, bytes] = {}
        for rank in ranks:
            self._selector.register(rank.output_fd, selectors.EVENT_READ, rank)
            self._partial[rank.output_fd] = b""

    def request_shutdown(self, signum: int, frame: object) -> None:
        self.shutdown_requested = True

    def run(self) -> int:
        drain_until: float | None = None
        while self._selector.get_map() or any(r.alive for r in self.ranks):
            self._copy_output(timeout=0.2)
            self._reap()
            self._end_stuck_ranks()
            if drain_until is None and not any(r.alive for r in self.ranks):
                drain_until = time.monotonic() + DRAIN_S
            if drain_until is not None and time.monotonic() > drain_until:
                break
        failed = [r for r in self.ranks if r.exit_code != 0]
        if failed:
            self.writer.write(self._failure_summary(failed))
        if self.shutdown_requested:
            return 128 + signal.SIGTERM
        return 1 if failed else 0

    # --- output -------------------------------------------------------------------------------

    def _copy_output(self, timeout: float) -> None:
        for key, _ in self._selector.select(timeout):
            rank: RankProcess = key.data
            chunk = os.read(rank.output_fd, 65536)
            if not chunk:
                self._selector.unregister(rank.output_fd)
                rest = self._partial.pop(rank.output_fd)
                os.close(rank.output_fd)
                if rest:
                    self._write_lines(rank, [rest])
                continue
            *lines, self._partial[rank.output_fd] = (self._partial[rank.output_fd] + chunk).split(
                b"\n"
            )
            if lines:
                self._write_lines(rank, lines)

    def _write_lines(self, rank: RankProcess, lines: list[bytes]) -> None:
        prefix = f"[rank{rank.rank}]: ".encode()
        os.write(self.writer.fd, b"".join(prefix + line + b"\n" for line in lines))

    # --- processes ----------------------------------------------------------------------------

    def _reap(self) -> None:
        for rank in self.ranks:
            if not rank.alive:
                continue
            pid, status = os.waitpid(rank.pid, os.WNOHANG)
            if pid == 0:
                continue
            rank.exit_code = os.waitstatus_to_exitcode(status)
            rank.exited_at = time.time()
            if rank.exit_code == 0:
                log.info(
                    "rank %d (local_rank %d, pid %d) finished (exitcode: 0)",
                    rank.rank,
                    rank.local_rank,
                    rank.pid,
                )
            else:
                log.error(
                    "failed (exitcode: %d) rank: %d local_rank: %d (pid: %d) of binary: %s%s",
                    rank.exit_code,
                    rank.rank,
                    rank.local_rank,
                    rank.pid,
                    sys.executable,
                    f" ({_signal_text(rank)})" if rank.exit_code < 0 else "",
                )

    def _end_stuck_ranks(self) -> None:
        now = time.monotonic()
        for rank in self.ranks:
            if not rank.alive:
                continue
            if rank.term_sent_at is None and (self.shutdown_requested or self._stuck(rank, now)):
                self._say_why(rank, now)
                log.warning("Sending process %d closing signal SIGTERM", rank.pid)
                _signal(rank.pid, signal.SIGTERM)
                _signal(rank.pid, signal.SIGCONT)
                rank.term_sent_at = now
            elif (
                rank.term_sent_at is not None
                and not rank.killed
                and now - rank.term_sent_at > KILL_AFTER_TERM_S
            ):
                log.warning("Process %d did not exit after SIGTERM; sending SIGKILL", rank.pid)
                _signal(rank.pid, signal.SIGKILL)
                rank.killed = True

    def _say_why(self, rank: RankProcess, now: float) -> None:
        """Why the launcher ends a rank, in its notes, not in the log the analyzers read."""
        if self.shutdown_requested:
            why = "the launcher was asked to shut down"
        elif rank.heartbeat.started:
            why = (
                f"no progress for {rank.heartbeat.age():.1f} s (heartbeat; limit "
                f"{self.stuck_after_s:g} s)"
            )
        else:
            why = (
                f"not joined after {now - rank.forked_at:.1f} s (limit {self.startup_limit_s:g} s)"
            )
        print(
            f"launcher: ending rank {rank.rank} (pid {rank.pid}): {why}",
            file=self.notes,
            flush=True,
        )

    def _stuck(self, rank: RankProcess, now: float) -> bool:
        """No progress for too long: in training by its heartbeat, while joining by its age."""
        last = rank.heartbeat.last()  # one read: the age and "started" must agree
        if last > 0.0:
            return time.monotonic() - last > self.stuck_after_s
        return now - rank.forked_at > self.startup_limit_s

    def _failure_summary(self, failed: list[RankProcess]) -> str:
        """torchrun's ChildFailedError block, for this node's failed ranks."""
        ordered = sorted(failed, key=lambda r: r.exited_at or 0.0)
        root, others = ordered[0], ordered[1:]
        rule = "=" * 60
        lines = [rule, "pytest_faultloop.jobs.workload.tiny_gloo FAILED", "-" * 60, "Failures:"]
        if others:
            for index, rank in enumerate(others, start=1):
                lines += self._failure_entry(index, rank)
        else:
            lines.append("  <NO_OTHER_FAILURES>")
        lines += [
            "-" * 60,
            "Root Cause (first observed failure):",
            *self._failure_entry(0, root),
            rule,
        ]
        return "\n".join(lines) + "\n"

    def _failure_entry(self, index: int, rank: RankProcess) -> list[str]:
        when = datetime.datetime.fromtimestamp(rank.exited_at or time.time()).strftime(
            "%Y-%m-%d_%H:%M:%S"
        )
        if rank.exit_code is not None and rank.exit_code < 0:
            trace = _signal_text(rank)
        else:
            trace = "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"
        return [
            f"[{index}]:",
            f"  time      : {when}",
            f"  host      : {self.spec.host}",
            f"  rank      : {rank.rank} (local_rank: {rank.local_rank})",
            f"  exitcode  : {rank.exit_code} (pid: {rank.pid})",
            "  error_file: <N/A>",
            f"  traceback : {trace}",
        ]


def _signal_text(rank: RankProcess) -> str:
    number = -(rank.exit_code or 0)
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = "unknown signal"
    return f"Signal {number} ({name}) received by PID {rank.pid}"


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)
