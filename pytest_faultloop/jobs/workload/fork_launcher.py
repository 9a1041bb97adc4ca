"""The ``fork`` launcher: one emulated node whose ranks are forked from one process.

It imports torch once, forks ``GPUS_PER_NODE`` ranks (global rank = node × GPUS_PER_NODE +
local rank), prefixes every line they print PyTorch-style (``[rank3]: ...``) into the shared
``main_workload`` log (appending, so every node's launcher can write it), and supervises them
like torchrun: each exit is reported with its exit code or signal, and when a rank fails a
torchrun-style failure summary (``Root Cause (first observed failure)``) ends the node's output.
Starting 32 ranks takes under a second here, against about a minute for torchrun's agents.

A rank that makes no progress for the collective timeout plus ``FAULTLOOP_KILL_GRACE_S`` is
stuck (its peers have given up by then): it gets SIGTERM (and SIGCONT, in case it is stopped),
then SIGKILL. Time a rank spends joining the job does not count as a stall: until its first beat
it is held to the startup timeout (``FAULTLOOP_STARTUP_TIMEOUT``, which scales with world size
and load; decided once here and handed to the ranks) plus the same grace. A rank is signalled
only while it is unreaped (its PID cannot have passed to another process). SIGTERM to the
launcher does the same to every rank. Exit status: 0 when every rank finished cleanly, 1 when
any failed, 143 when terminated.
"""

from __future__ import annotations

import contextlib
import faulthandler
import io
import logging
import os
import signal
import sys
import time
import traceback
from typing import NoReturn, TextIO

import torch  # imported once here, before the ranks are forked
import torch.distributed

from pytest_faultloop.jobs.workload import tiny_gloo
from pytest_faultloop.jobs.workload.environment import (
    NodeSpec,
    RankIdentity,
    TrainSettings,
    kill_grace_from,
    startup_timeout_from,
)
from pytest_faultloop.jobs.workload.heartbeat import Heartbeat, HeartbeatBoard
from pytest_faultloop.jobs.workload.job_knobs import STARTUP_TIMEOUT
from pytest_faultloop.jobs.workload.supervisor import LogWriter, RankProcess, Supervisor
from pytest_faultloop.models.layout import ExperimentLayout

log = logging.getLogger("tiny_gloo.launcher")


def run(spec: NodeSpec, notes: TextIO) -> int:
    """Start this node's ranks, supervise them until they end; the launcher's exit status."""
    settings = TrainSettings.from_env(os.environ)
    kill_grace_s = kill_grace_from(os.environ)
    startup_timeout_s = startup_timeout_from(os.environ, spec.world_size)
    spec.log_path.parent.mkdir(parents=True, exist_ok=True)
    ExperimentLayout(spec.experiment_dir).checkpoints.mkdir(exist_ok=True)
    writer = LogWriter(os.open(spec.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644))
    log.addHandler(writer)
    log.setLevel(logging.INFO)
    log.propagate = False

    os.environ[STARTUP_TIMEOUT.name] = f"{startup_timeout_s:g}"  # the ranks inherit it
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
        notes,
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
    print(f"node {spec.node} ({spec.host}): ranks {first}-{last}, log {spec.log_path}", file=notes)
    code = supervisor.run()
    print(f"node {spec.node} ({spec.host}): launcher exits {code}", file=notes)
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
        if not tiny_gloo.die_with_parent(launcher_pid):
            os._exit(1)
        os.dup2(output_fd, 1)
        os.dup2(output_fd, 2)
        os.close(output_fd)
        if isinstance(sys.stdout, io.TextIOWrapper):
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
    except SystemExit as exc:  # sys.exit() ends the process quietly, with its status
        _flush()
        os._exit(_exit_status(exc))
    except KeyboardInterrupt:
        traceback.print_exc()
        _flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)  # die by SIGINT, as Python does
        os._exit(130)
    except BaseException:
        traceback.print_exc()
        _flush()
        os._exit(1)
    _flush()
    os._exit(0)


def _exit_status(exc: SystemExit) -> int:
    """The status Python's own exit gives ``sys.exit(code)``: None 0, an int itself, anything
    else printed to stderr and 1."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    print(exc.code, file=sys.stderr)
    _flush()
    return 1


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
