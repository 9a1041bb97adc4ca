"""Benchmark robustness (not a test): what perturbations cost the built-in analyzers, in cells
and in seconds, printed side by side.

    python bench/bench_robustness.py [--corpus DIR ...] [--pairs] [--log-mb 1024]
                                     [--baseline CHECKOUT] [--repeat 3] [--work DIR]

Cells: each corpus (default: the public corpus and the frozen smoke run) is replayed once by
pytest, then every catalogue perturbation (``--pairs``: and every pair) is scored by the
leaderboard against the unperturbed verdicts; one row per corpus and perturbation set.

With ``--baseline``, each log perturbation of the first corpus is also replayed by the
baseline's analyzers beside this checkout's: the cells each loses against its own unperturbed
replay.

Speed: the log analyzer on a synthetic log (``gen_synthetic.py``) and on the same log as
``docker logs -t`` writes it (the ``ts`` perturbation), each measured in a fresh process,
alternating with ``--baseline`` (another checkout of this package, e.g. ``git worktree add
/tmp/base HEAD~3``) ``--repeat`` times; medians.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DEFAULT_CORPORA = (REPO / "experiments/corpus/public", REPO / "tests/fixtures/frozen/smoke")
MEASURE = """
import json, resource, sys, time
from pathlib import Path
from pytest_faultloop.analyzers import analyze_log
start = time.perf_counter()
analysis = analyze_log(Path(sys.argv[1]))
print(json.dumps({"seconds": time.perf_counter() - start,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "primary": [i.rank for i in analysis.primary]}))
"""


def _cells(corpus: Path, pairs: bool, work: Path) -> list[tuple[str, str, int, str]]:
    from pytest_faultloop.engine.leaderboard import Configuration, leaderboard_table, score_session
    from pytest_faultloop.inputs.perturb.catalogue import CATALOGUE, compositions
    from pytest_faultloop.scoring.pass_rule import PassRule

    base = work / f"replay-{corpus.name}-{time.monotonic_ns()}"
    subprocess.run(
        [sys.executable, "-m", "pytest", str(corpus), "-q", "-p", "no:cacheprovider"],
        cwd=REPO,
        env={**os.environ, "BASE_EXPERIMENTS_DIR": str(base)},
        capture_output=True,
        check=False,
    )
    (session,) = (base / "fault_injection").glob("2*")
    sets = {"every single one": compositions("all")}
    if pairs:
        names = ",".join(f"{a}+{b}" for a, b in itertools.combinations(CATALOGUE, 2))
        sets["every pair"] = compositions(names)
    rows = []
    for label, chosen in sets.items():
        start = time.perf_counter()
        scored = score_session(session, [Configuration()], perturbations=chosen)
        (row,) = leaderboard_table(scored, PassRule())[2:]
        seconds = time.perf_counter() - start
        rows.append(
            (
                corpus.name,
                label,
                len(chosen),
                f"{row.split(' | ')[-1].strip(' |')} ({seconds:.0f} s)",
            )
        )
    return rows


def _outcomes(corpus: Path, checkout: Path | None, work: Path) -> dict[str, str]:
    """``case::dimension`` -> passed / failed / skipped, replaying with a checkout's analyzers."""
    junit = work / f"junit-{os.getpid()}-{time.monotonic_ns()}.xml"
    env = {**os.environ, "BASE_EXPERIMENTS_DIR": str(work / "replays")}
    plugin: list[str] = []
    if checkout is not None:
        env["PYTHONPATH"] = str(checkout)
        # the installed entry point names this checkout's plugin module; a checkout from
        # before the package's layers (pytest_faultloop/plugin.py) is loaded by its own
        plugin = ["-p", "no:faultloop", "-p", _plugin_module(checkout)]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(corpus),
            "-q",
            "-p",
            "no:cacheprovider",
            *plugin,
            f"--junitxml={junit}",
        ],
        cwd=checkout or REPO,  # in the checkout: the current directory is first on sys.path
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if not junit.is_file():
        said = (done.stdout + done.stderr).strip().splitlines()[-3:]
        raise SystemExit(f"the replay of {corpus} with {checkout or REPO} wrote no report: {said}")
    outcomes = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        outcome = "passed"
        if case.find("failure") is not None or case.find("error") is not None:
            outcome = "failed"
        elif case.find("skipped") is not None:
            outcome = "skipped"
        outcomes[f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"] = outcome
    return outcomes


def _plugin_module(checkout: Path) -> str:
    """The module pytest loads as the plugin in ``checkout``."""
    layered = checkout / "pytest_faultloop" / "plugin" / "main.py"
    return "pytest_faultloop.plugin.main" if layered.is_file() else "pytest_faultloop.plugin"


def _baseline_cells(corpus: Path, baseline: Path, work: Path) -> list[tuple[str, int, int]]:
    """Each log perturbation of the corpus (written by this checkout) replayed by both
    checkouts' analyzers: the cells each loses against its own unperturbed replay."""
    from pytest_faultloop.inputs.perturb.catalogue import compositions
    from pytest_faultloop.inputs.perturb.copies import perturbed_copy
    from pytest_faultloop.inputs.perturb.log_rewrites import LOG_PERTURBATIONS

    checkouts = (("base", baseline), ("this", None))
    before = {who: _outcomes(corpus, checkout, work) for who, checkout in checkouts}
    rows = []
    for perturbation in LOG_PERTURBATIONS:
        copy = work / "copies" / perturbation.name / corpus.name
        if not copy.exists():
            perturbed_copy(corpus, copy, compositions(perturbation.name)[0], None, 4)
        lost = []
        for who, checkout in checkouts:
            after = _outcomes(copy, checkout, work)
            lost.append(
                sum(o == "passed" and after.get(k) != "passed" for k, o in before[who].items())
            )
        rows.append((perturbation.name, lost[0], lost[1]))
    return rows


def _time(log: Path, checkout: Path | None) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(checkout)} if checkout else None
    done = subprocess.run(  # in the checkout: the current directory is first on sys.path
        [sys.executable, "-c", MEASURE, str(log)],
        capture_output=True,
        text=True,
        env=env,
        cwd=checkout or REPO,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def _speed(args: argparse.Namespace, work: Path) -> list[tuple[str, str, str, str]]:
    from pytest_faultloop.inputs.perturb.catalogue import compositions
    from pytest_faultloop.inputs.perturb.copies import perturb_log

    plain = work / f"synthetic_{args.log_mb}mb.log"
    if not plain.exists():
        subprocess.run(
            [sys.executable, str(HERE / "gen_synthetic.py"), "log", str(args.log_mb), str(plain)],
            check=True,
        )
    wrapped = work / f"synthetic_{args.log_mb}mb.ts.log"
    if not wrapped.exists():
        perturb_log(plain, wrapped, compositions("ts")[0])
    rows = []
    for log in (plain, wrapped):
        size = log.stat().st_size / 2**20
        runs: dict[str, list[dict[str, object]]] = {"this checkout": [], "baseline": []}
        for _ in range(args.repeat):
            if args.baseline:
                runs["baseline"].append(_time(log, args.baseline))
            runs["this checkout"].append(_time(log, None))
        medians = {}
        for who, measured in runs.items():
            if not measured:
                continue
            seconds = statistics.median(float(str(m["seconds"])) for m in measured)
            rss = max(float(str(m["rss_mb"])) for m in measured)
            medians[who] = seconds
            rows.append(
                (
                    log.name,
                    who,
                    f"{size / seconds:.0f} MB/s ({seconds:.2f} s, {rss:.0f} MB RSS)",
                    f"primary {measured[0]['primary']}",
                )
            )
        if len(medians) == 2:
            ratio = medians["this checkout"] / medians["baseline"]
            rows.append((log.name, "this / baseline", f"{ratio:.2f}x the time", "target <= 1.15x"))
    return rows


def _print(header: tuple[str, ...], rows: list[tuple[object, ...]]) -> None:
    table = [header, *[tuple(str(c) for c in row) for row in rows]]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))
    print()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, action="append", default=None)
    parser.add_argument("--pairs", action="store_true", help="every pair of perturbations too")
    parser.add_argument("--log-mb", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--baseline", type=Path, default=None)
    parser.add_argument("--work", type=Path, default=None, help="keep generated inputs here")
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--skip-cells", action="store_true")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="faultloop-bench-robustness-"))
    work.mkdir(parents=True, exist_ok=True)
    if not args.skip_cells:
        rows = [
            r for corpus in args.corpus or DEFAULT_CORPORA for r in _cells(corpus, args.pairs, work)
        ]
        _print(("corpus", "perturbations", "count", "cells lost (built-in analyzers)"), rows)
        if args.baseline:
            first = (args.corpus or DEFAULT_CORPORA)[0]
            rows = _baseline_cells(first, args.baseline, work)
            _print(("log perturbation", f"lost, {args.baseline}", "lost, this checkout"), rows)
    if not args.skip_speed:
        _print(("log", "analyzer", "throughput", "answer"), _speed(args, work))
    print(f"inputs in {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
