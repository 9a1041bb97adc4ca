"""Generate large synthetic inputs for bench_analyzers.py.

    python bench/gen_synthetic.py log SIZE_MB PATH      # torchrun-style log ending in a hang
    python bench/gen_synthetic.py fr RANKS ENTRIES DIR  # NCCL-format dumps, one hung TP rank

The log repeats realistic training lines (8 ranks, rank prefixes, tqdm's UTF-8 bars) and ends with NCCL watchdog
timeouts from every rank but rank 3. The dumps follow the documented NCCL format (pickle
protocol 2 like torch's writer); rank ``RANKS // 2 + 1`` never enters its TP all_gather.
"""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

WORLD = 8
HUNG_RANK = 3
TP = 8


def _log_chunk(first_iter: int, size: int) -> bytes:
    lines = []
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
        for rank in range(WORLD):
            if rank == HUNG_RANK:
                continue
            out.write(
                f"[rank{rank}]:[E1129 10:10:00.000000000 ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught "
                "collective operation timeout: WorkNCCL(SeqNum=9001, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
                "Timeout(ms)=600000) ran for 600013 milliseconds before timing out.\n".encode()
            )


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
        records = []
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
    elif len(argv) == 4 and argv[0] == "fr":
        write_fr(int(argv[1]), int(argv[2]), Path(argv[3]))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
