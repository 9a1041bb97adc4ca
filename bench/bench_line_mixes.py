"""Benchmark the log analyzer per kind of line (not a test): MB/s on logs made of each kind,
side by side with the ordinary bench log.

    python bench/bench_line_mixes.py [--mb 32] [--mix KIND ...] [--baseline CHECKOUT]
                                     [--repeat 1] [--work DIR]

Each mix (``gen_synthetic.py mix``: membership lines, NCCL INFO, torchrun's failure tables,
stack dumps, tracebacks, JSON records, timestamps, a hard wrap, progress bars, error-level
words) is a log of ``--mb`` MB made of that kind of line, ending as the ordinary log ends. Each
is read by ``analyze_log`` in a fresh process (the catalogue loaded before the clock starts),
``--repeat`` times, the median shown; ``--baseline`` (another checkout of this package, e.g.
``git worktree add /tmp/base HEAD~3``) reads the same files alternating with this checkout.
MB/s and "x ordinary" (the time per MB against the ordinary log's; target: at most 3) are
of CPU seconds, which other work on a shared machine stretches less than wall seconds (shown
too).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
TARGET = 3.0
"""The most a mix may cost per MB against the ordinary log."""
MEASURE = """
import json, sys, time
from pathlib import Path
from pytest_faultloop.analyzers import analyze_log
from pytest_faultloop.analyzers.log.signatures import catalogue
catalogue()
start, cpu = time.perf_counter(), time.process_time()
analysis = analyze_log(Path(sys.argv[1]))
wall, cpu = time.perf_counter() - start, time.process_time() - cpu
print(json.dumps({"wall": wall, "cpu": cpu, "ranks": [i.rank for i in analysis.primary]}))
"""


def _read(log: Path, checkout: Path) -> tuple[float, float, list[int | None]]:
    """Wall and CPU seconds ``checkout``'s analyzer takes on ``log`` (a fresh process), and
    the culprits it names."""
    out = subprocess.run(  # in the checkout: the current directory is first on sys.path
        [sys.executable, "-c", MEASURE, str(log)],
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ, PYTHONPATH=str(checkout)),
        cwd=checkout,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return float(result["wall"]), float(result["cpu"]), list(result["ranks"])


def _median_read(log: Path, checkouts: list[Path], repeat: int) -> list[tuple[float, float, str]]:
    """Per checkout: the median wall and CPU seconds of ``repeat`` reads (alternating with the
    other checkouts), and the culprits named."""
    walls: list[list[float]] = [[] for _ in checkouts]
    cpus: list[list[float]] = [[] for _ in checkouts]
    answers = [""] * len(checkouts)
    for _ in range(repeat):
        for at, checkout in enumerate(checkouts):
            wall, cpu, ranks = _read(log, checkout)
            walls[at].append(wall)
            cpus[at].append(cpu)
            answers[at] = ",".join(map(str, ranks)) or "-"
    return [
        (statistics.median(w), statistics.median(c), a)
        for w, c, a in zip(walls, cpus, answers, strict=True)
    ]


def main() -> int:
    sys.path.insert(0, str(HERE))
    from gen_synthetic import MIXES

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=32)
    parser.add_argument("--mix", nargs="*", choices=sorted(MIXES), default=None)
    parser.add_argument("--baseline", type=Path, default=None)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--work", type=Path, default=None, help="keep generated logs here")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="faultloop-mixes-"))
    work.mkdir(parents=True, exist_ok=True)
    kinds = ["ordinary", *[k for k in args.mix or MIXES if k != "ordinary"]]
    checkouts = [HERE.parent, *([args.baseline] if args.baseline else [])]

    header = ["mix", "MB", "wall s", "CPU s", "MB/s", "x ordinary", "culprits"]
    if args.baseline:
        header += ["baseline CPU s", "baseline MB/s", "baseline x ordinary", "baseline culprits"]
    rows = [header]
    ordinary: list[float] = []
    for kind in kinds:
        log = work / f"{kind}_{args.mb}mb.log"
        if not log.exists():
            generator = [sys.executable, str(HERE / "gen_synthetic.py")]
            subprocess.run([*generator, "mix", kind, str(args.mb), str(log)], check=True)
        size = log.stat().st_size / 2**20
        measured = _median_read(log, checkouts, args.repeat)
        if kind == "ordinary":
            ordinary = [cpu / size for _, cpu, _ in measured]
        row = [kind, f"{size:.0f}"]
        for at, (wall, cpu, answer) in enumerate(measured):
            cells = [f"{cpu:.2f}", f"{size / cpu:.1f}", f"{cpu / size / ordinary[at]:.1f}", answer]
            row += [f"{wall:.2f}", *cells] if at == 0 else cells
        rows.append(row)
        print(f"  {kind}: {row[4]} MB/s", file=sys.stderr, flush=True)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
    times = header.index("x ordinary")
    worst = max(rows[1:], key=lambda r: float(r[times]))
    verdict = "met" if float(worst[times]) <= TARGET else "not met"
    print(
        f"worst: {worst[0]} at {worst[times]}x the ordinary log's time per MB "
        f"(target <= {TARGET:g}x: {verdict}); logs in {work}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
