"""Benchmark the built-in analyzers (not a test): prints measured numbers next to the targets.

    python bench/bench_analyzers.py [--log-mb 1024] [--ranks 256] [--entries 2000] [--work DIR]
                                    [--baseline CHECKOUT] [--skip-torchfrtrace]

Log analyzer: throughput and peak RSS on a synthetic log (target >= 100 MB/s, <= 200 MB).
FR analyzer: time on RANKS x ENTRIES NCCL-format dumps next to plain unpickling of the same
files (target <= 1.5x) and next to torchfrtrace (target >= 10x faster). Each measurement runs
in a fresh process so peak RSS is the analyzer's own. ``--baseline`` measures another checkout
of this package (e.g. ``git worktree add /tmp/base HEAD~3``) on the same inputs, alternating
with this one, so a change's cost shows side by side under the same machine load.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MEASURE = """
import json, resource, sys, time
from pathlib import Path
start = time.perf_counter()
{body}
elapsed = time.perf_counter() - start
print(json.dumps({{"seconds": elapsed, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "result": result}}))
"""
LOG_BODY = """
from pytest_faultloop.analyzers import analyze_log
start = time.perf_counter()
analysis = analyze_log(Path(sys.argv[1]))
result = [i.rank for i in analysis.primary]
"""
FR_BODY = """
from pytest_faultloop.analyzers import analyze_fr
start = time.perf_counter()
result = analyze_fr(Path(sys.argv[1])).suspects
"""
UNPICKLE_BODY = """
import pickle
start = time.perf_counter()
result = sum(len(pickle.loads(p.read_bytes())["entries"]) for p in Path(sys.argv[1]).glob("_dump_*"))
"""


def _measure(body: str, arg: Path, checkout: Path | None = None) -> dict[str, object]:
    script = MEASURE.format(body=body)
    env = dict(os.environ, PYTHONPATH=str(checkout)) if checkout else None
    out = subprocess.run(  # in the checkout: the current directory is first on sys.path
        [sys.executable, "-c", script, str(arg)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=checkout or HERE.parent,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _torchfrtrace(fr_dir: Path, timeout: float) -> float | None:
    if shutil.which("torchfrtrace") is None:
        return None
    start = time.perf_counter()
    try:
        subprocess.run(
            ["torchfrtrace", "-p", "_dump_", str(fr_dir)],
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return float("inf")
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log-mb", type=int, default=1024)
    parser.add_argument("--ranks", type=int, default=256)
    parser.add_argument("--entries", type=int, default=2000)
    parser.add_argument("--work", type=Path, default=None, help="keep generated inputs here")
    parser.add_argument("--torchfrtrace-timeout", type=float, default=600)
    parser.add_argument("--skip-torchfrtrace", action="store_true")
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="another checkout of this package to measure side by side",
    )
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="faultloop-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    log = work / f"synthetic_{args.log_mb}mb.log"
    fr_dir = work / f"fr_{args.ranks}x{args.entries}"
    gen = [sys.executable, str(HERE / "gen_synthetic.py")]
    if not log.exists():
        subprocess.run([*gen, "log", str(args.log_mb), str(log)], check=True)
    if not fr_dir.exists():
        subprocess.run([*gen, "fr", str(args.ranks), str(args.entries), str(fr_dir)], check=True)

    size_mb = log.stat().st_size / 2**20
    base_log = _measure(LOG_BODY, log, args.baseline) if args.baseline else None
    log_run = _measure(LOG_BODY, log)
    base_fr = _measure(FR_BODY, fr_dir, args.baseline) if args.baseline else None
    fr_run = _measure(FR_BODY, fr_dir)
    plain = _measure(UNPICKLE_BODY, fr_dir)
    trace = None if args.skip_torchfrtrace else _torchfrtrace(fr_dir, args.torchfrtrace_timeout)

    throughput = size_mb / float(log_run["seconds"])
    ratio = float(fr_run["seconds"]) / float(plain["seconds"])
    rows = [
        (
            "log analyzer",
            f"{size_mb:.0f} MB in {log_run['seconds']:.2f} s",
            f"{throughput:.0f} MB/s",
            ">= 100 MB/s",
        ),
        ("log analyzer peak RSS", "", f"{log_run['rss_mb']:.0f} MB", "<= 200 MB"),
        (
            "FR analyzer",
            f"{args.ranks} ranks x {args.entries} entries",
            f"{fr_run['seconds']:.2f} s",
            "",
        ),
        ("plain unpickling", "same files", f"{plain['seconds']:.2f} s", ""),
        ("FR / unpickling", "", f"{ratio:.2f}x", "<= 1.5x"),
    ]
    if base_log is not None and base_fr is not None:
        rows[1:1] = [
            (
                "  baseline log analyzer",
                f"{args.baseline}",
                f"{size_mb / float(base_log['seconds']):.0f} MB/s, {base_log['rss_mb']:.0f} MB",
                "",
            )
        ]
        rows.append(
            ("  baseline FR analyzer", f"{args.baseline}", f"{base_fr['seconds']:.2f} s", "")
        )
    if args.skip_torchfrtrace:
        rows.append(("torchfrtrace", "skipped", "-", ">= 10x slower"))
    elif trace is None:
        rows.append(("torchfrtrace", "not installed", "-", ">= 10x slower"))
    else:
        shown = (
            f"> {args.torchfrtrace_timeout:.0f} s" if trace == float("inf") else f"{trace:.2f} s"
        )
        speedup = trace / float(fr_run["seconds"])
        rows.append(("torchfrtrace", "same dumps", shown, ">= 10x slower"))
        rows.append(
            (
                "torchfrtrace / FR analyzer",
                "",
                f">= {speedup:.0f}x" if trace == float("inf") else f"{speedup:.1f}x",
                ">= 10x",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for row in [("measure", "input", "result", "target"), *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)))
    print(f"suspects: log {log_run['result']}, FR {fr_run['result']}; inputs in {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
