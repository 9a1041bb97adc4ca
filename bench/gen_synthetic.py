"""Generate large synthetic inputs for bench_analyzers.py and bench_line_mixes.py.

    python bench/gen_synthetic.py log SIZE_MB PATH        # torchrun-style log ending in a hang
    python bench/gen_synthetic.py mix KIND SIZE_MB PATH   # a log made of one kind of line
    python bench/gen_synthetic.py fr RANKS ENTRIES DIR    # NCCL-format dumps, one hung TP rank

The log repeats realistic training lines (8 ranks, rank prefixes, tqdm's UTF-8 bars) and ends with NCCL watchdog
timeouts from every rank but rank 3. A mix is made of one kind of line the log analyzer reads
with work of its own (``MIXES``), with the same ending. The dumps follow the documented NCCL
format (pickle protocol 2 like torch's writer); rank ``RANKS // 2 + 1`` never enters its TP
all_gather.
"""

from __future__ import annotations

import json
import pickle
import sys
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

WORLD = 8
HUNG_RANK = 3
TP = 8


def _log_chunk(first_iter: int, size: int) -> bytes:
    lines: list[bytes] = []
    iteration = first_iter
    while sum(len(line) for line in lines) < size:
        for rank in range(WORLD):
            lines.append(
                f"[rank{rank}]: [2026-11-29 10:00:00] iteration {iteration:8d}/ 1000000 | consumed samples: "
                f"{iteration * 256:12d} | elapsed time per iteration (ms): 812.4 | lm loss: 9.812E+00 | "
                f"grad norm: 1.234 | number of skipped iterations: 0\n".encode()
            )
        if iteration % 50 == 0:
            lines.append(b"[rank0]: WARNING: data loader is slow, waited 0.2 s for batch\n")
        if iteration % 10 == 0:  # tqdm's bar: non-ASCII bytes, which some regex engines slow on
            done = "\u2588" * (iteration % 40 // 4)
            lines.append(
                f"[rank0]: train: {done:<10}| {iteration}/1000000 [01:02<3:04:05]\n".encode()
            )
        iteration += 1
    return b"".join(lines)


def write_log(size_mb: int, path: Path) -> None:
    chunk = _log_chunk(1, 1 << 20)
    with path.open("wb") as out:
        for _ in range(size_mb):
            out.write(chunk)
        _write_hang(out)


def _write_hang(out: BinaryIO) -> None:
    """The log's end: every rank but the hung one times out in the watchdog."""
    for rank in range(WORLD):
        if rank == HUNG_RANK:
            continue
        out.write(
            f"[rank{rank}]:[E1129 10:10:00.000000000 ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught "
            "collective operation timeout: WorkNCCL(SeqNum=9001, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
            "Timeout(ms)=600000) ran for 600013 milliseconds before timing out.\n".encode()
        )


def _training(step: int) -> list[str]:
    """Every rank's training line of one step (the ordinary log's)."""
    return [
        f"[rank{rank}]: [2026-11-29 10:00:00] iteration {step:8d}/ 1000000 | consumed samples: "
        f"{step * 256:12d} | elapsed time per iteration (ms): 812.4 | lm loss: 9.812E+00 | "
        "grad norm: 1.234 | number of skipped iterations: 0"
        for rank in range(WORLD)
    ]


def _membership(step: int) -> list[str]:
    """Initialization lines of a group that forms again and again (a job restarted in place):
    the store barrier (distributed_c10d.py), Lightning's banner, gloo's connectivity, and the
    issue's own form."""
    lines = []
    for rank in range(WORLD):
        tag = f"[rank{rank}]: INFO:torch.distributed.distributed_c10d:"
        lines += [
            f"{tag}Added key: store_based_barrier_key:{step} to store for rank: {rank}",
            f"{tag}Waiting in store based barrier to initialize process group for rank: {rank}, "
            f"key: store_based_barrier_key:{step} (world_size={WORLD}, worker_count={WORLD}, "
            "timeout=0:30:00)",
            f"{tag}Rank {rank}: Completed store-based barrier for key:store_based_barrier_key:"
            f"{step} with {WORLD} nodes.",
            f"[rank{rank}]: Initializing distributed: GLOBAL_RANK: {rank}, MEMBER: {rank + 1}/{WORLD}",
            f"[rank{rank}]: [Gloo] Rank {rank} is connected to {WORLD - 1} peer ranks. Expected "
            f"number of connected peer ranks is : {WORLD - 1}",
            f"[rank{rank}]: Rank {rank} (local rank {rank % 4}, pid {41000 + rank}) joined {WORLD} "
            f"ranks, world_size={WORLD}",
        ]
    return lines


def _nccl_info(step: int) -> list[str]:
    """NCCL_DEBUG=INFO of one communicator's init on every rank (init.cc, transport.cc)."""
    lines = []
    comm = f"0x{0x55D5A0000000 + step * 0x1000:x}"
    for rank in range(WORLD):
        head = f"node{rank // 4}:{41000 + rank}:{41100 + rank} [{rank % 4}] NCCL INFO"
        lines += [
            f"{head} Bootstrap : Using eth0:10.0.0.{rank // 4}<0>",
            f"{head} NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.0.0.{rank // 4}<0>",
            f"{head} Using network IB",
            f"{head} ncclCommInitRank comm {comm} rank {rank} nranks {WORLD} cudaDev {rank % 4} "
            f"nvmlDev {rank % 4} busId {rank % 4}000 commId 0x{step:x}c0ffee - Init START",
            f"{head} Setting affinity for GPU {rank % 4} to ffff,ffffffff",
            *(
                f"{head} Channel {channel:02d}/0 : {rank}[{rank % 4}] -> {(rank + 1) % WORLD}"
                f"[{(rank + 1) % 4}] via P2P/IPC/read"
                for channel in range(8)
            ),
            f"{head} Connected all rings",
            f"{head} Connected all trees",
            f"{head} threadThresholds 8/8/64 | 64/8/64 | 512 | 512",
            f"{head} ncclCommInitRank comm {comm} rank {rank} nranks {WORLD} cudaDev {rank % 4} "
            f"nvmlDev {rank % 4} busId {rank % 4}000 commId 0x{step:x}c0ffee - Init COMPLETE",
        ]
    return lines


def _failure_tables(step: int) -> list[str]:
    """torchrun restarting a worker that fails at once: its failure table each time
    (torch/distributed/elastic/multiprocessing/errors/error_handler.py, agent/server/api.py)."""
    return [
        "[2026-11-29 10:00:00,000] torch.distributed.elastic.agent.server.api: [INFO] [default] "
        "Starting worker group",
        "[2026-11-29 10:00:01,000] torch.distributed.elastic.multiprocessing.api: [ERROR] failed "
        f"(exitcode: 1) local_rank: 5 (pid: {42000 + step}) of binary: /usr/bin/python3",
        "Traceback (most recent call last):",
        '  File "/usr/local/bin/torchrun", line 8, in <module>',
        "    sys.exit(main())",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "=" * 60,
        "train.py FAILED",
        "-" * 60,
        "Failures:",
        "  <NO_OTHER_FAILURES>",
        "-" * 60,
        "Root Cause (first observed failure):",
        "[0]:",
        f"  time      : 2026-11-29_10:00:{step % 60:02d}",
        "  host      : node1",
        "  rank      : 5 (local_rank: 5)",
        f"  exitcode  : 1 (pid: {42000 + step})",
        "  error_file: <N/A>",
        "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
        "=" * 60,
    ]


def _stack_dumps(step: int) -> list[str]:
    """faulthandler's dumps, every rank's (``dump_traceback_later(repeat=True)``), as a slow
    step leaves them (Modules/faulthandler.c, Python/traceback.c)."""
    lines = []
    for rank in range(WORLD):
        lines += [
            f"[rank{rank}]: Timeout (0:05:00)!",
            f"[rank{rank}]: Thread 0x00007f2da4a3b{rank:03x} (most recent call first):",
            *(
                f'[rank{rank}]:   File "/usr/lib/python3.10/site-packages/model/layer_{depth}.py",'
                f" line {100 + depth} in forward"
                for depth in range(24)
            ),
            *_training(step)[rank : rank + 1],
        ]
    return lines


def _tracebacks(step: int) -> list[str]:
    """A caught error logged with its traceback every step (``logger.exception`` in a retry
    loop), deep in a model's layers."""
    frames = []
    for depth in range(40):
        frames += [
            f'  File "/usr/lib/python3.10/site-packages/model/layer_{depth}.py", line {100 + depth}, '
            "in forward",
            f"    return self.block_{depth}(x)",
        ]
    rank = step % WORLD
    lines = [
        "WARNING:train:data loader batch failed, retrying",
        "Traceback (most recent call last):",
        *frames,
        "OSError: [Errno 5] Input/output error: '/data/shard_17.bin'",
    ]
    return [f"[rank{rank}]: {line}" for line in lines] + _training(step)


def _journald(step: int) -> list[str]:
    """``journalctl -o json`` of the training lines: one JSON record a line."""
    return [
        json.dumps(
            {
                "__REALTIME_TIMESTAMP": str(1764410400000000 + step),
                "_HOSTNAME": "node1",
                "PRIORITY": "6",
                "_PID": "41000",
                "MESSAGE": line,
            }
        )
        for line in _training(step)
    ]


def _timestamped(step: int) -> list[str]:
    """``docker logs -t``: RFC 3339 times with nine fraction digits before each line."""
    return [f"2026-11-29T10:00:{step % 60:02d}.{step:09d}Z {line}" for line in _training(step)]


def _hard_wrapped(step: int) -> list[str]:
    """The training lines as ``fold -w100`` leaves them: cut every 100 characters."""
    return [line[at : at + 100] for line in _training(step) for at in range(0, len(line), 100)]


def _progress(step: int) -> list[str]:
    """tqdm's bar refreshed with carriage returns on one line, between training lines."""
    block = "\u2588"  # tqdm's full block: UTF-8 bytes past ASCII
    bar = "\r".join(
        f"train: {done:3d}%|{block * (done // 10):<10}| {done * 10}/1000 [01:02<01:10,  7.80it/s]"
        for done in range(101)
    )
    return [*_training(step), bar]


def _error_words(step: int) -> list[str]:
    """Metrics an INFO line prints under error-level words (the fallback reads such lines)."""
    return [
        f"[rank{rank}]: [2026-11-29 10:00:00,000] [INFO] [metrics.py:88] step {step} | "
        f"train/error_rate: 0.0{rank}12 | retried Exception count: 0 | ERROR budget left: 99%"
        for rank in range(WORLD)
    ]


MIXES: dict[str, Callable[[int], list[str]]] = {
    "ordinary": _training,
    "membership": _membership,
    "nccl_info": _nccl_info,
    "failure_tables": _failure_tables,
    "stack_dumps": _stack_dumps,
    "tracebacks": _tracebacks,
    "journald_json": _journald,
    "timestamps": _timestamped,
    "hard_wrapped": _hard_wrapped,
    "progress_bars": _progress,
    "error_words": _error_words,
}
"""Each kind of line the log analyzer reads with work of its own, as a function of the step:
the lines of that step."""


def write_mix(kind: str, size_mb: int, path: Path) -> None:
    """A log of ``size_mb`` MB made of ``kind``'s lines, step after step, then the hang."""
    lines = MIXES[kind]
    with path.open("wb") as out:
        step = 1
        while out.tell() < size_mb << 20:
            out.write("".join(f"{line}\n" for line in lines(step)).encode())
            step += 1
        _write_hang(out)


def _entry(
    record: int, pg_id: int, group: tuple[str, str], seq: int, op: str, done: bool
) -> dict[str, object]:
    out_rows = 4096 * TP if op == "all_gather" else 4096  # all_gather output: group x input
    return {
        "record_id": record,
        "pg_id": pg_id,
        "process_group": group,
        "collective_seq_id": seq,
        "p2p_seq_id": 0,
        "op_id": seq,
        "profiling_name": f"nccl:{op}",
        "time_created_ns": 1_700_000_000_000_000_000 + record * 1_000_000,
        "input_sizes": [[4096, 1024]],
        "input_dtypes": ["BFloat16"],
        "output_sizes": [[out_rows, 1024]],
        "output_dtypes": ["BFloat16"],
        "state": "completed" if done else "started",
        "time_discovered_started_ns": 1_700_000_000_000_000_000 + record * 1_000_000 + 10,
        "time_discovered_completed_ns": 1_700_000_000_000_000_000 + record * 1_000_000 + 90
        if done
        else None,
        "retired": done,
        "timeout_ms": 600000,
        "is_p2p": False,
        "frames": [],
    }


def write_fr(ranks: int, entries: int, out: Path) -> None:
    """Each step: a TP all_gather then a default all_reduce; the hung rank skips the last TP one."""
    out.mkdir(parents=True, exist_ok=True)
    hung = ranks // 2 + 1
    steps = entries // 2
    for rank in range(ranks):
        tp_index = rank // TP
        tp_name = str(1 + tp_index)
        records: list[dict[str, object]] = []
        for step in range(1, steps + 1):
            last = step == steps
            skip_tp = last and rank == hung
            waiting_tp = last and rank // TP == hung // TP and rank != hung
            if not skip_tp:
                records.append(
                    _entry(
                        len(records),
                        1,
                        (tp_name, "tp"),
                        step,
                        "all_gather",
                        not (last and waiting_tp),
                    )
                )
            if not (skip_tp or waiting_tp):
                records.append(
                    _entry(
                        len(records),
                        0,
                        ("0", "default_pg"),
                        step,
                        "all_reduce",
                        not last,
                    )
                )
        dump = {
            "version": "2.10",
            "pg_config": {
                "0": {
                    "name": "0",
                    "desc": "default_pg",
                    "ranks": str(list(range(ranks))),
                },
                tp_name: {
                    "name": tp_name,
                    "desc": "tp",
                    "ranks": str(list(range(tp_index * TP, tp_index * TP + TP))),
                },
            },
            "comm_lib_version": "2.21.5",
            "pg_status": {},
            "entries": records,
        }
        (out / f"_dump_{rank}").write_bytes(pickle.dumps(dump, protocol=2))


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "log":
        write_log(int(argv[1]), Path(argv[2]))
    elif len(argv) == 4 and argv[0] == "mix" and argv[1] in MIXES:
        write_mix(argv[1], int(argv[2]), Path(argv[3]))
    elif len(argv) == 4 and argv[0] == "fr":
        write_fr(int(argv[1]), int(argv[2]), Path(argv[3]))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
