"""SlotLimiter makespan on the local Slurm cluster: window vs pairs vs the seed's fixed polling.

Runs a pool of sleep jobs with known, varied durations through the real scheduler slots and
the real backend job runner (``sbatch``/``squeue``/``scontrol``), two slots, and prints side
by side: makespan, efficiency against the ideal (total job time / BATCH_SIZE), and the delay
from a job's end (written by the job itself) to the next submission.

    eval "$(sbatch/local-cluster/start.sh 4)"
    python bench/bench_scheduler.py [--durations 3,8,5,12,4,7,10,6] [--poll 30]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from pytest_faultloop.engine.job_runner import BackendJobRunner
from pytest_faultloop.engine.slots import SlotLimiter
from pytest_faultloop.jobs.backends.protocol import JobSpec, standalone_spec
from pytest_faultloop.jobs.backends.slurm import SlurmBackend, cluster_reachable
from pytest_faultloop.models import Job, PoolEntry
from pytest_faultloop.models.faults import FaultType
from pytest_faultloop.models.layout import ExperimentLayout
from pytest_faultloop.store.ledger import RunLedger
from pytest_faultloop.store.session_dir import SessionDir

JOB_SCRIPT = """#!/bin/bash
sleep "$DURATION"
date +%s.%N > "$EXPERIMENT_DIR/job_ended"
"""
BATCH = 2


@dataclass
class Trial:
    name: str
    makespan: float = 0.0
    submissions: list[float] = field(default_factory=list)
    ends: list[float] = field(default_factory=list)


class FixedPollBackend:
    """The seed's loop: poll every ``interval`` seconds, no backoff, no end marker."""

    def __init__(self, backend: SlurmBackend, interval: float) -> None:
        self.backend, self.interval, self.name = backend, interval, backend.name
        self.max_poll_interval = interval

    def submit(self, spec: JobSpec) -> Job:
        return self.backend.submit(spec)

    def poll(self, job: Job) -> Job:
        return self.backend.poll(job)

    def cancel(self, job: Job) -> Job:
        return self.backend.cancel(job)


def run_trial(
    name: str, mode: str, durations: list[float], poll: float, root: Path, fixed_poll: bool = False
) -> Trial:
    script = root / "sleep_job.sh"
    script.write_text(JOB_SCRIPT)
    lockdir = Path(tempfile.mkdtemp(dir=root, prefix=f"locks-{name}-"))
    keys = [f"SIGKILL:{i}:5:1" for i in range(len(durations))]
    stop = threading.Event()
    session = lockdir / "session"
    session.mkdir()
    ledger = RunLedger(lockdir, SessionDir(session, "# bench\n"))
    scheduler = SlotLimiter(ledger, BATCH, mode, keys, stop)
    backend = SlurmBackend()
    job_backend = FixedPollBackend(backend, poll) if fixed_poll else backend
    trial = Trial(name)
    lock = threading.Lock()

    def submitted(job: Job) -> None:
        with lock:
            trial.submissions.append(time.time())

    queue = list(zip(keys, durations, strict=True))

    def worker() -> None:
        while True:
            with lock:
                if not queue:
                    return
                key, duration = queue.pop(0)
            index = keys.index(key)
            entry = PoolEntry(fault=FaultType.SIGKILL, rank=index, iter=5, nodes=1)
            spec = standalone_spec(
                entry,
                root / name,
                script,
                gpus_per_node=1,
                time_limit_s=600,
                env={"DURATION": f"{duration}"},
                workload="bench",
            )
            directory = spec.experiment_dir
            runner = BackendJobRunner(
                job_backend,
                poll,
                stop,
                False,
                submitted,
                lambda _l: None,
                watch_marker=not fixed_poll,
            )
            with scheduler.slot(key):
                runner.run(spec)
            ledger.mark_ended(key)
            trial.ends.append(float(ExperimentLayout(directory).job_ended.read_text()))

    start = time.time()
    threads = [threading.Thread(target=worker) for _ in range(BATCH)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    trial.makespan = time.time() - start
    return trial


def handoff_delays(trial: Trial) -> list[float]:
    """For each job end, the time until the next submission after it (the freed slot reused)."""
    subs = sorted(trial.submissions)
    delays = []
    for end in sorted(trial.ends):
        later = [s for s in subs if s >= end]
        if later:
            delays.append(later[0] - end)
    return delays


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--durations", default="3,8,5,12,4,7,10,6")
    parser.add_argument("--poll", type=float, default=30.0, help="POLL_INTERVAL (default 30)")
    parser.add_argument("--skip-seed", action="store_true", help="skip the slow fixed-poll run")
    args = parser.parse_args()
    reason = cluster_reachable()
    if reason:
        raise SystemExit(reason)
    durations = [float(d) for d in args.durations.split(",")]
    ideal = sum(durations) / BATCH
    root = Path(tempfile.mkdtemp(prefix="bench-scheduler-", dir=Path.cwd() / ".local-cluster"))
    trials = [
        run_trial("window", "window", durations, args.poll, root),
        run_trial("pairs", "pairs", durations, args.poll, root),
    ]
    if not args.skip_seed:
        trials.append(run_trial("seed-30s", "pairs", durations, 30.0, root, fixed_poll=True))
    print(
        f"jobs: {len(durations)} durations {args.durations} s; slots {BATCH}; "
        f"POLL_INTERVAL {args.poll:g} s; ideal makespan {ideal:.1f} s"
    )
    print(
        f"{'schedule':<10} {'makespan s':>10} {'efficiency':>10} {'end->next median s':>19} "
        f"{'end->next max s':>16}"
    )
    for trial in trials:
        delays = handoff_delays(trial)
        median = statistics.median(delays) if delays else float("nan")
        worst = max(delays) if delays else float("nan")
        print(
            f"{trial.name:<10} {trial.makespan:>10.1f} {ideal / trial.makespan:>10.2f} "
            f"{median:>19.2f} {worst:>16.2f}"
        )


if __name__ == "__main__":
    main()
