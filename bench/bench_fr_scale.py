"""The FR analyzer's scaling curve (not a test): ranks against wall, CPU, peak memory, answer.

    python bench/bench_fr_scale.py [--ranks 64,256,1024,2048,4096] [--entries 2000]
                                   [--jobs 1,2] [--work DIR] [--peer-timeout 300]
                                   [--peer-max-ranks 256] [--repeat 1] [--keep]

For each rank count: NCCL-shaped dumps from ``gen_synthetic.py`` (TP groups of 8, one hung
rank), then, each in a fresh process, side by side: this analyzer for every ``--jobs``, the
single-thread unpickle floor (``pickle.load`` of every dump, with the garbage collector on as
by default and off), and torchfrtrace where installed (up to ``--peer-max-ranks``, killed
after ``--peer-timeout``). nvrx's analyzer is not installed here: its row says so.

Wall: the analysis call (imports excluded) or, for a peer, the command. CPU: user + system of
the process and its workers. Peak: the process's largest resident set; with workers, the
parent's plus N times the largest worker's (an upper bound: forked workers share pages with
the parent, counted in each). Each row carries the load average (1, 5, 15 min) at its start.
Generated sets live under ``--work`` (default a temporary directory) and are deleted after
their row unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MEASURE = """
import gc, json, resource, sys, time
from pathlib import Path
from typing import Any
{body}
def cpu():
    return sum(resource.getrusage(w).ru_utime + resource.getrusage(w).ru_stime
               for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
cpu0, start = cpu(), time.perf_counter()
result = run(Path(sys.argv[1]), *sys.argv[2:])
seconds, peaks = time.perf_counter() - start, [resource.getrusage(w).ru_maxrss / 1024
                                              for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
print(json.dumps({{"seconds": seconds, "cpu": cpu() - cpu0, "peaks": peaks, "result": result}}))
"""
OURS = """
from pytest_faultloop.analyzers import analyze_fr
def run(path, jobs):
    return analyze_fr(path, jobs=int(jobs)).model_dump(mode="json", exclude={"raw_output"})
"""
UNPICKLE = """
import pickle
def run(path, collector):
    if collector == "off":
        gc.disable()
    entries = 0
    for dump in sorted(path.glob("_dump_*")):
        with open(dump, "rb") as stream:
            entries += len(pickle.load(stream)["entries"])
    return entries
"""
_MISSING = re.compile(r"missing ranks: \{([\d, ]+)\}")


@dataclass
class Row:
    ranks: int
    tool: str
    wall: str
    cpu: str
    peak_mib: str
    answer: str
    load: str


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def _run(command: list[str], timeout: float) -> tuple[float, float, float, str, str] | None:
    """Wall, CPU, peak MiB of the process tree, stdout, stderr; None when it ran too long."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(command, stdout=out, stderr=err, cwd=HERE.parent)
        deadline = start + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                os.wait4(proc.pid, 0)
                return None
            time.sleep(0.05)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if proc.returncode != 0 and "torchfrtrace" not in command[0]:
        raise RuntimeError(f"{command} failed:\n{stderr}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, stdout, stderr


def _python(body: str, dumps: Path, *args: str) -> tuple[dict[str, Any], float]:
    ran = _run([sys.executable, "-c", MEASURE.format(body=body), str(dumps), *args], 3600)
    assert ran is not None
    return json.loads(ran[3].strip().splitlines()[-1]), ran[2]


def _short(ranks: list[int]) -> str:
    return ",".join(map(str, ranks[:8])) + (f",… ({len(ranks)} ranks)" if len(ranks) > 8 else "")


def _ours(ranks: int, dumps: Path, jobs: int) -> tuple[Row, dict[str, Any]]:
    load = _load()
    measured, _ = _python(OURS, dumps, str(jobs))
    result, (parent, worker) = measured["result"], measured["peaks"]
    peak = f"{parent:.0f}" + (f" + {jobs} × {worker:.0f}" if jobs > 1 else "")
    row = Row(
        ranks,
        f"ours, --jobs {jobs}",
        f"{measured['seconds']:.2f}",
        f"{measured['cpu']:.2f}",
        peak,
        _short(result["suspects"]),
        load,
    )
    return row, result


def _floor(ranks: int, dumps: Path, collector: str) -> Row:
    load = _load()
    measured, peak = _python(UNPICKLE, dumps, collector)
    return Row(
        ranks,
        f"pickle.load floor, gc {collector}",
        f"{measured['seconds']:.2f}",
        f"{measured['cpu']:.2f}",
        f"{peak:.0f}",
        f"{measured['result']} entries",
        load,
    )


def _curve_point(ranks: int, dumps: Path, args: argparse.Namespace) -> list[Row]:
    """Every tool once per round, the rounds back to back (so load swings hit all alike); the
    row of each tool's median wall time."""
    runs: dict[str, list[Row]] = {}
    answers = []
    for _ in range(args.repeat):
        for jobs in args.jobs:
            row, answer = _ours(ranks, dumps, jobs)
            runs.setdefault(row.tool, []).append(row)
            answers.append(answer)
        for collector in ("on", "off"):
            row = _floor(ranks, dumps, collector)
            runs.setdefault(row.tool, []).append(row)
    rows = [sorted(r, key=lambda row: float(row.wall))[len(r) // 2] for r in runs.values()]
    if args.repeat > 1:
        for row, tool_runs in zip(rows, runs.values(), strict=True):
            row.wall += " (" + "/".join(r.wall for r in tool_runs) + ")"
    if any(a != answers[0] for a in answers):
        rows[len(args.jobs) - 1].answer += " (DIFFERS between runs)"
    rows.append(_torchfrtrace(ranks, dumps, args))
    rows.append(Row(ranks, "nvrx", "-", "-", "-", "not installed", "-"))
    return rows


def _torchfrtrace(ranks: int, dumps: Path, args: argparse.Namespace) -> Row:
    beside = Path(sys.executable).parent / "torchfrtrace"  # in this venv, active or not
    tool = str(beside) if beside.exists() else shutil.which("torchfrtrace")
    if tool is None:
        return Row(ranks, "torchfrtrace", "-", "-", "-", "not installed", "-")
    if ranks > args.peer_max_ranks:
        return Row(ranks, "torchfrtrace", "-", "-", "-", "skipped (--peer-max-ranks)", "-")
    load = _load()
    ran = _run([tool, "-p", "_dump_", str(dumps)], args.peer_timeout)
    if ran is None:
        return Row(ranks, "torchfrtrace", f"> {args.peer_timeout:.0f}", "-", "-", "timed out", load)
    wall, cpu, peak, _, stderr = ran
    named = sorted({int(r) for m in _MISSING.finditer(stderr) for r in m.group(1).split(",")})
    return Row(
        ranks, "torchfrtrace", f"{wall:.2f}", f"{cpu:.2f}", f"{peak:.0f}", _short(named), load
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", default="64,256,1024,2048,4096")
    parser.add_argument("--entries", type=int, default=2000)
    parser.add_argument("--jobs", default="1,2")
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--peer-timeout", type=float, default=300)
    parser.add_argument("--peer-max-ranks", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=1, help="rounds; rows show the median")
    parser.add_argument("--keep", action="store_true", help="keep the generated dump sets")
    args = parser.parse_args()
    args.jobs = [int(j) for j in args.jobs.split(",")]
    work = args.work or Path(tempfile.mkdtemp(prefix="faultloop-fr-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    print("| ranks (dump set) | tool | wall s | CPU s | peak MiB | answer (suspects) | load avg |")
    print("|---" * 7 + "|", flush=True)
    for ranks in (int(r) for r in args.ranks.split(",")):
        dumps = work / f"fr_{ranks}x{args.entries}"
        if not dumps.exists():
            gen = [sys.executable, str(HERE / "gen_synthetic.py"), "fr", str(ranks)]
            subprocess.run([*gen, str(args.entries), str(dumps)], check=True)
        size = sum(f.stat().st_size for f in dumps.iterdir()) / 2**20
        for row in _curve_point(ranks, dumps, args):
            cells = [f"{row.ranks} ({size:.0f} MiB)", row.tool, row.wall, row.cpu]
            cells += [row.peak_mib, row.answer, row.load]
            print("| " + " | ".join(cells) + " |", flush=True)
        if not args.keep:
            shutil.rmtree(dumps)
    print(f"{os.cpu_count()} cores; peak: max RSS (with workers: parent + N × largest worker)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
