"""Do experiments touch each other? Pools back to back, counting what only interference causes.

Runs ``pytest experiments/ --faultloop-pool=POOL`` K times in a row (each run its own session
under one scratch base directory) and reads every stored experiment back:

* **invalid**: experiments that ended ``run_invalid`` (or another broken kind), and the invalid
  attempts that ``--faultloop-retries-invalid`` resubmitted (the safety net must not hide them);
* **control failures**: ``NONE`` experiments whose job did not complete cleanly;
* **unexpected signals**: a rank ended by a signal, or sent ``closing signal`` by its launcher,
  that is not the injected rank and not after the fault fired (for a control: any at all),
  read from the launchers' own lines in every attempt's ``main_workload`` log.

Optionally it then runs the test command K times (``--test-runs``) and counts failed runs.

    python bench/bench_isolation.py --pool smoke --runs 20
    python bench/bench_isolation.py --pool default --runs 3
    python bench/bench_isolation.py --pool default --runs 1 -- --faultloop-backend=slurm -n 2
    python bench/bench_isolation.py --runs 0 --test-runs 5
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from pytest_faultloop.models import ExperimentResult
from pytest_faultloop.store.results import load_results

REPO = Path(__file__).resolve().parents[1]
QUIET = "-p no:langsmith_plugin -p no:hypothesispytest"

_STAMP = r"\[(?P<t>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3})\]"
STARTED = re.compile(r"started ranks (?P<first>\d+)-\d+ of \d+ \(pids (?P<pids>[\d,]+)\)")
CLOSING = re.compile(_STAMP + r" .*Sending process (?P<pid>\d+) closing signal (?P<sig>\w+)")
SIGNALLED = re.compile(_STAMP + r" .*failed \(exitcode: (?P<code>-\d+)\) rank: (?P<rank>\d+)")


@dataclass
class Tally:
    experiments: int = 0
    invalid: list[str] = field(default_factory=list)
    retried: list[str] = field(default_factory=list)
    control_failures: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    wall_s: list[float] = field(default_factory=list)


def unexpected_signals(result: ExperimentResult, log: Path) -> list[str]:
    """Ranks signalled in ``log`` that only interference (or a harness bug) explains."""
    entry = result.experiment.entry
    marker = result.artifacts.marker if result.artifacts else None
    fired = marker.fired_at if marker is not None and not entry.fault.is_control else None
    text = log.read_text(errors="replace")
    rank_of: dict[int, int] = {}
    for match in STARTED.finditer(text):
        for offset, pid in enumerate(match["pids"].split(",")):
            rank_of[int(pid)] = int(match["first"]) + offset
    found = []
    for match in CLOSING.finditer(text):
        rank = rank_of.get(int(match["pid"]), -1)
        if _unexpected(rank, match["t"], entry.rank, fired, entry.fault.is_control):
            found.append(
                f"{result.experiment.key}: rank {rank} sent {match['sig']} at {match['t']}"
            )
    for match in SIGNALLED.finditer(text):
        rank = int(match["rank"])
        if _unexpected(rank, match["t"], entry.rank, fired, entry.fault.is_control):
            found.append(
                f"{result.experiment.key}: rank {rank} exit {match['code']} at {match['t']}"
            )
    return found


def _unexpected(rank: int, stamp: str, target: int, fired: float | None, control: bool) -> bool:
    if control:
        return True
    if rank == target:
        return False
    when = datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S.%f").timestamp()
    return fired is None or when < fired


def read_session(session: Path, tally: Tally) -> None:
    unreadable: list[str] = []
    results = load_results(session, unreadable=unreadable)
    tally.invalid += [f"unreadable result {problem}" for problem in unreadable]
    for result in results:
        key = result.experiment.key
        tally.experiments += 1
        if result.broken is not None:
            tally.invalid.append(f"{key}: {result.broken}: {result.reason}")
        tally.retried += [f"{key}: job {a.job.job_id}: {a.reason}" for a in result.attempts]
        if result.experiment.entry.fault.is_control and (
            result.job is None or result.job.state.value != "COMPLETED"
        ):
            tally.control_failures.append(f"{key}: {result.reason or result.job}")
        logs = [result.artifacts.log] if result.artifacts and result.artifacts.log else []
        for attempt in result.attempts:
            logs += sorted(attempt.moved_to.glob("logs/slurm/*.main_workload.log"))
        for log in logs:
            if log.is_file():
                tally.unexpected += unexpected_signals(result, log)


def run_pools(pool: str, runs: int, extra: list[str], base: Path) -> Tally:
    tally = Tally()
    env = dict(os.environ, BASE_EXPERIMENTS_DIR=str(base), PYTEST_ADDOPTS=QUIET)
    env.pop("POOL", None)
    for index in range(runs):
        before = set((base / "fault_injection").glob("2*"))
        started = time.monotonic()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "experiments/",
                f"--faultloop-pool={pool}",
                "-q",
                "-p",
                "no:cacheprovider",
                *extra,
            ],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        tally.wall_s.append(time.monotonic() - started)
        (session,) = set((base / "fault_injection").glob("2*")) - before
        before_counts = (len(tally.invalid), len(tally.unexpected), len(tally.control_failures))
        read_session(session, tally)
        after = (len(tally.invalid), len(tally.unexpected), len(tally.control_failures))
        last = (
            done.stdout.strip().splitlines()[-1]
            if done.stdout.strip()
            else f"exit {done.returncode}"
        )
        print(
            f"run {index + 1}/{runs}: {tally.wall_s[-1]:.0f} s, {last}; new invalid/"
            f"unexpected/control: {after[0] - before_counts[0]}/{after[1] - before_counts[1]}/"
            f"{after[2] - before_counts[2]}",
            flush=True,
        )
    return tally


def run_tests(runs: int, command: str) -> list[str]:
    failures = []
    for index in range(runs):
        started = time.monotonic()
        done = subprocess.run(
            command, shell=True, cwd=REPO, capture_output=True, text=True, check=False
        )
        lines = done.stdout.strip().splitlines()
        last = lines[-1] if lines else ""
        print(
            f"tests {index + 1}/{runs}: exit {done.returncode} in "
            f"{time.monotonic() - started:.0f} s: {last}",
            flush=True,
        )
        if done.returncode != 0:
            failures.append(last)
            for line in lines:
                if line.startswith(("FAILED ", "ERROR ")):
                    print(f"  {line}", flush=True)
            saved = Path(tempfile.mkstemp(prefix=f"faultloop-tests-{index + 1}-", suffix=".log")[1])
            saved.write_text(done.stdout + done.stderr)
            print(f"  full output: {saved}", flush=True)
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pool", default="smoke")
    parser.add_argument("--runs", type=int, default=3, help="pool runs back to back")
    parser.add_argument("--base", type=Path, help="base directory (default: a new temp dir)")
    parser.add_argument("--test-runs", type=int, default=0, help="then run the tests K times")
    parser.add_argument(
        "--test-command", default=f'{sys.executable} -m pytest tests/ -m "not slow" -q'
    )
    parser.add_argument("extra", nargs="*", help="more pytest arguments (after --)")
    args = parser.parse_args()
    base = args.base or Path(tempfile.mkdtemp(prefix="faultloop-isolation-"))
    tally = run_pools(args.pool, args.runs, args.extra, base) if args.runs else Tally()
    if args.runs:
        walls = sorted(tally.wall_s)
        print(
            f"\npool {args.pool} x {args.runs} ({' '.join(args.extra) or 'local backend'}), "
            f"base {base}"
        )
        print("| measure | count |\n|---|---|")
        print(f"| experiments | {tally.experiments} |")
        print(f"| invalid (final) | {len(tally.invalid)} |")
        print(f"| invalid attempts resubmitted | {len(tally.retried)} |")
        print(f"| control failures | {len(tally.control_failures)} |")
        print(f"| unexpected signals | {len(tally.unexpected)} |")
        print(
            f"| wall per run, s (min / median / max) | {walls[0]:.0f} / "
            f"{walls[len(walls) // 2]:.0f} / {walls[-1]:.0f} |"
        )
        for title, lines in (
            ("invalid", tally.invalid),
            ("resubmitted", tally.retried),
            ("control", tally.control_failures),
            ("unexpected", tally.unexpected),
        ):
            for line in lines:
                print(f"  {title}: {line}")
    failures = run_tests(args.test_runs, args.test_command) if args.test_runs else []
    if args.test_runs:
        print(f"\ntest command x {args.test_runs}: {len(failures)} failed run(s)")
    bad = tally.invalid or tally.retried or tally.control_failures or tally.unexpected or failures
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
