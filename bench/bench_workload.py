"""Wall time and peak memory of one tiny_gloo experiment on this machine (not a test).

    python bench/bench_workload.py [--nodes 2 4 8] [--gpus-per-node 4] [--launchers fork torchrun]

Runs each size clean and with GPU_SLEEP (rank 1, FAULT_AT_ITER=5, FAULT_DELAY=1, the default
10 s collective timeout) through LocalBackend under each launcher, sampling the job's processes
every 0.2 s: peak memory is the sum of their PSS (shared pages counted once), next to the sum of
their RSS.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

from pytest_faultloop.jobs.backends.local import LocalBackend
from pytest_faultloop.jobs.backends.protocol import standalone_spec
from pytest_faultloop.models import Job, PoolEntry
from pytest_faultloop.models.faults import FaultType

TINY_GLOO = Path(__file__).resolve().parent.parent / "sbatch" / "tiny_gloo.sh"


def job_memory_mb(job_id: str) -> tuple[float, float]:
    """(PSS, RSS) in MB summed over the live processes of a job."""
    needle = f"SLURM_JOB_ID={job_id}\0".encode()
    pss = rss = 0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if needle not in (proc / "environ").read_bytes():
                continue
            for line in (proc / "smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    pss += int(line.split()[1])
                elif line.startswith("Rss:"):
                    rss += int(line.split()[1])
        except OSError:
            continue
    return pss / 1024, rss / 1024


def run_one(
    root: Path, nodes: int, gpus: int, fault: FaultType, launcher: str
) -> tuple[Job, float, float, float]:
    entry = PoolEntry(fault=fault, rank=1, iter=5, nodes=nodes)
    spec = standalone_spec(
        entry,
        root,
        TINY_GLOO,
        gpus_per_node=gpus,
        time_limit_s=300,
        env={"FAULT_DELAY": "1", "FAULTLOOP_LAUNCHER": launcher},
        workload="tiny_gloo",
    )
    backend = LocalBackend()
    peak = [0.0, 0.0]
    started = time.monotonic()
    job = backend.submit(spec)
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.2):
            pss, rss = job_memory_mb(job.job_id)
            peak[0], peak[1] = max(peak[0], pss), max(peak[1], rss)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    while job.state.active:
        time.sleep(0.2)
        job = backend.poll(job)
    wall = time.monotonic() - started
    done.set()
    sampler.join()
    return job, wall, peak[0], peak[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--gpus-per-node", type=int, default=4)
    parser.add_argument("--launchers", nargs="+", default=["fork", "torchrun"])
    args = parser.parse_args()
    print(
        f"{'launcher':>8} | {'nodes x ranks':>13} | {'clean s':>7} | {'GPU_SLEEP s':>11} | "
        f"{'clean PSS/RSS MB':>17} | {'GPU_SLEEP PSS/RSS MB':>20} | states"
    )
    with tempfile.TemporaryDirectory(prefix="bench-tiny-gloo-") as tmp:
        for nodes in args.nodes:
            for launcher in args.launchers:
                root = Path(tmp) / f"n{nodes}-{launcher}"
                clean = run_one(root, nodes, args.gpus_per_node, FaultType.NONE, launcher)
                hang = run_one(root, nodes, args.gpus_per_node, FaultType.GPU_SLEEP, launcher)
                print(
                    f"{launcher:>8} | {f'{nodes} x {args.gpus_per_node}':>13} | "
                    f"{clean[1]:7.1f} | {hang[1]:11.1f} | "
                    f"{clean[2]:8.0f}/{clean[3]:<8.0f} | {hang[2]:10.0f}/{hang[3]:<9.0f} | "
                    f"{clean[0].state.value}, {hang[0].state.value}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
