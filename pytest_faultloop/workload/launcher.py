"""One emulated node: ``python -m pytest_faultloop.workload.launcher`` (one per node, e.g. srun).

It imports torch once, forks ``GPUS_PER_NODE`` ranks (global rank = node × GPUS_PER_NODE +
local rank), prefixes every line they print PyTorch-style (``[rank3]: ...``) into the shared
``main_workload`` log (appending, so every node's launcher can write it), and supervises them
like torchrun: each exit is reported with its exit code or signal, and when a rank fails a
torchrun-style failure summary (``Root Cause (first observed failure)``) ends the node's output.

A rank that makes no progress for the collective timeout plus ``FAULTLOOP_KILL_GRACE_S`` is
stuck (its peers have given up by then): it gets SIGTERM (and SIGCONT, in case it is stopped),
then SIGKILL. Time a rank spends joining the job does not count as a stall: until its first beat
it is held to the startup timeout (``FAULTLOOP_STARTUP_TIMEOUT``, which scales with world size
and load; decided once here and handed to the ranks) plus the same grace. A rank is signalled
only while it is unreaped (its PID cannot have passed to another process). SIGTERM to the launcher does the same to every rank. Exit status: 0 when every rank
finished cleanly, 1 when any failed, 2 for a bad configuration, 143 when terminated.
"""

from __future__ import annotations

import ctypes
import datetime
import faulthandler
import logging
import os
import selectors
import signal
import sys
import time
import traceback
from dataclasses import dataclass
from typing import NoReturn

import torch  # imported once here, before the ranks are forked
import torch.distributed

from pytest_faultloop.errors import ConfigError
from pytest_faultloop.inject import FaultPlan
from pytest_faultloop.layout import ExperimentLayout
from pytest_faultloop.workload import tiny_gloo
from pytest_faultloop.workload.environment import (
    STARTUP_TIMEOUT_VAR,
    NodeSpec,
    RankIdentity,
    TrainSettings,
    kill_grace_from,
    startup_timeout_from,
)
from pytest_faultloop.workload.heartbeat import Heartbeat, HeartbeatBoard

log = logging.getLogger("tiny_gloo.launcher")

KILL_AFTER_TERM_S = 3.0
"""How long a rank may take to die after SIGTERM before it gets SIGKILL."""

DRAIN_S = 2.0
"""How long output may still arrive after the last rank exited (pipes inherited elsewhere)."""

_PR_SET_PDEATHSIG = 1


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


def main() -> int:
    try:
        spec = NodeSpec.from_env(os.environ)
        settings = TrainSettings.from_env(os.environ)
        kill_grace_s = kill_grace_from(os.environ)
        startup_timeout_s = startup_timeout_from(os.environ, spec.world_size)
        FaultPlan.from_env(os.environ, spec.world_size)
    except ConfigError as exc:
        print(f"tiny_gloo launcher: configuration error: {exc}", file=sys.stderr)
        return 2
    spec.log_path.parent.mkdir(parents=True, exist_ok=True)
    ExperimentLayout(spec.experiment_dir).checkpoints.mkdir(exist_ok=True)
    writer = LogWriter(os.open(spec.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644))
    log.addHandler(writer)
    log.setLevel(logging.INFO)
    log.propagate = False

    os.environ[STARTUP_TIMEOUT_VAR] = f"{startup_timeout_s:g}"  # the ranks inherit it
    board = HeartbeatBoard(spec.gpus_per_node)
    ranks: list[RankProcess] = []
    for local_rank in range(spec.gpus_per_node):
        ranks.append(
            _fork_rank(spec, local_rank, board.slot(local_rank), [r.output_fd for r in ranks])
        )
    supervisor = Supervisor(
        spec,
        ranks,
        writer,
        stuck_after_s=settings.collective_timeout_s + kill_grace_s,
        startup_limit_s=startup_timeout_s + kill_grace_s,
    )
    signal.signal(signal.SIGTERM, supervisor.request_shutdown)
    first, last = ranks[0].rank, ranks[-1].rank
    log.info(
        "node %d (%s): started ranks %d-%d of %d (pids %s)",
        spec.node,
        spec.host,
        first,
        last,
        spec.world_size,
        ",".join(str(r.pid) for r in ranks),
    )
    print(f"node {spec.node} ({spec.host}): ranks {first}-{last}, log {spec.log_path}", flush=True)
    code = supervisor.run()
    print(f"node {spec.node} ({spec.host}): launcher exits {code}", flush=True)
    return code


def _fork_rank(
    spec: NodeSpec, local_rank: int, heartbeat: Heartbeat, inherited: list[int]
) -> RankProcess:
    read_fd, write_fd = os.pipe()
    launcher_pid = os.getpid()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        for fd in inherited:
            os.close(fd)
        _rank_main(spec, local_rank, heartbeat, write_fd, launcher_pid)
    os.close(write_fd)
    return RankProcess(
        local_rank, spec.global_rank(local_rank), pid, read_fd, heartbeat, time.monotonic()
    )


def _rank_main(
    spec: NodeSpec, local_rank: int, heartbeat: Heartbeat, output_fd: int, launcher_pid: int
) -> NoReturn:
    """The forked rank: never returns; exits like an unhandled Python exception would."""
    try:
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != launcher_pid:
            os._exit(1)
        os.dup2(output_fd, 1)
        os.dup2(output_fd, 2)
        os.close(output_fd)
        sys.stdout.reconfigure(line_buffering=True)
        signal.signal(
            signal.SIGINT, signal.default_int_handler
        )  # even when started with it ignored
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.environ.update(
            RANK=str(spec.global_rank(local_rank)),
            LOCAL_RANK=str(local_rank),
            WORLD_SIZE=str(spec.world_size),
            LOCAL_WORLD_SIZE=str(spec.gpus_per_node),
            GROUP_RANK=str(spec.node),
        )
        faulthandler.enable()
        torch.set_num_threads(1)
        tiny_gloo.configure_logging()
        tiny_gloo.train(
            RankIdentity.from_env(os.environ),
            TrainSettings.from_env(os.environ),
            heartbeat,
            os.environ,
        )
    except KeyboardInterrupt:
        traceback.print_exc()
        _flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)  # die by SIGINT, as Python does
        os._exit(130)
    except BaseException:  # noqa: BLE001 - a rank reports whatever ended it, as Python would
        traceback.print_exc()
        _flush()
        os._exit(1)
    _flush()
    os._exit(0)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass


class Supervisor:
    """Copies the ranks' output into the log, reaps them, ends stuck ones, summarises."""

    def __init__(
        self,
        spec: NodeSpec,
        ranks: list[RankProcess],
        writer: LogWriter,
        stuck_after_s: float,
        startup_limit_s: float,
    ):
        self.spec = spec
        self.ranks = ranks
        self.writer = writer
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

    def _stuck(self, rank: RankProcess, now: float) -> bool:
        """No progress for too long: in training by its heartbeat, while joining by its age."""
        if rank.heartbeat.started:
            return rank.heartbeat.age() > self.stuck_after_s
        return now - rank.forked_at > self.startup_limit_s

    def _failure_summary(self, failed: list[RankProcess]) -> str:
        """torchrun's ChildFailedError block, for this node's failed ranks."""
        ordered = sorted(failed, key=lambda r: r.exited_at or 0.0)
        root, others = ordered[0], ordered[1:]
        rule = "=" * 60
        lines = [rule, "pytest_faultloop.workload.tiny_gloo FAILED", "-" * 60, "Failures:"]
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
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


if __name__ == "__main__":
    exit_code = main()
    _flush()
    os._exit(exit_code)  # skip tearing torch down (about a second on this machine)
