"""Chaos test of the harness itself: the pytest controller is killed at random moments (SIGKILL,
SIGTERM, Ctrl-C) while a pool of real local jobs runs, then resumed with ``--faultloop-session
last`` until a run ends by itself. Nothing finished may be lost or re-run, no job process may
survive, no result.json or TSV row may be torn, and the session's report must equal the one
rendered afresh from the stored results. ``-m slow`` runs 20 each of SIGKILL, SIGTERM and
Ctrl-C, and 5 each of SIGKILL and SIGTERM under xdist; CI runs three SIGKILLs. The figures are printed (``-s``) for the notes."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from support.processes import foreground_sigint, live_processes_with_env

REPO = Path(__file__).resolve().parents[1]
POOL = "SIGKILL:1:5:1 WORKLOAD_EXC:0:5:1 NONE:0:5:1 SIGTERM:1:5:1"
EXPERIMENTS = 4


@dataclass
class Figures:
    kills: int = 0
    moments: list[str] = field(default_factory=list)
    """Where each kill landed (a key of MOMENTS)."""
    runs_to_finish: int = 0
    """Sessions (rounds) that were finished by a run that was not killed."""
    lost: int = 0
    rerun: int = 0
    orphans: int = 0
    torn: int = 0

    def line(self, signum: signal.Signals) -> str:
        moments = {m: self.moments.count(m) for m in MOMENTS}
        return (
            f"chaos {signum.name}: {self.kills} kills over {self.runs_to_finish} runs; moments "
            f"{moments}; lost {self.lost}, re-run {self.rerun}, orphans {self.orphans}, "
            f"torn {self.torn}"
        )


MOMENTS: dict[str, tuple[str | None, float, float]] = {
    "start-up": (None, 0.2, 2.5),
    "submission": (">>> Experiment", 0.0, 0.3),
    "jobs running": ("submitted:", 1.0, 6.0),
    "result written": ("finished:", 0.0, 0.2),
    "report written": ("faultloop: ", 0.0, 0.1),
}
"""Where a kill lands: after which output line (None: after the start), how long after."""


class Controller:
    """A pytest run whose output is read as it comes, so a kill can follow a given line."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def wait_for(self, text: str | None, limit_s: float = 300) -> bool:
        """Whether ``text`` appeared (None: at once) before the run ended."""
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline and self.proc.poll() is None:
            if text is None or any(text in line for line in self.lines):
                return True
            time.sleep(0.02)
        return False

    def end(self, signum: signal.Signals | None) -> str:
        if signum is not None:
            self.proc.send_signal(signum)
        try:
            self.proc.wait(timeout=900 if signum is None else 300)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(timeout=10)
        return "".join(self.lines)


def torn_files(base: Path) -> int:
    torn = 0
    for result in base.glob("fault_injection/2*/*/result.json"):
        try:
            json.loads(result.read_text())
        except ValueError:
            torn += 1
    for tsv in base.glob("fault_injection/2*/experiments.tsv"):
        rows = tsv.read_text().splitlines()
        torn += sum(1 for row in rows if len(row.split("\t")) != len(rows[0].split("\t")))
    return torn


def run_once(root: Path, env: dict[str, str], resume: bool, workers: int) -> subprocess.Popen[str]:
    """Start one pytest run of the pool (continuing the session when ``resume``; under xdist
    with ``workers``), taking SIGINT as a foreground run does."""
    args = [sys.executable, "-m", "pytest", "experiments/", "-p", "no:cacheprovider", "-q"]
    if resume:
        args += ["--faultloop-session", "last"]
    if workers:
        args += ["-n", str(workers)]
    return subprocess.Popen(
        args, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        preexec_fn=foreground_sigint,  # noqa: PLW1509 - only sets a signal disposition
    )  # fmt: skip


def chaos(root: Path, kills: int, signum: signal.Signals, seed: int, workers: int = 0) -> Figures:
    """Rounds of a fresh session each, killed at the planned moments and resumed until a run
    ends by itself, until ``kills`` kills have landed; every round's session is checked."""
    shutil.copytree(REPO / "experiments", root / "experiments")
    rng = random.Random(seed)
    plan = [list(MOMENTS)[i % len(MOMENTS)] for i in range(kills)]
    rng.shuffle(plan)
    figures = Figures()
    for round_ in range(kills):
        if figures.kills >= kills:
            break
        base = root / f"out{round_}"
        env = {k: v for k, v in os.environ.items() if k not in ("WORKLOAD", "PYTEST_ADDOPTS")}
        env.update(BASE_EXPERIMENTS_DIR=str(base), POOL=POOL, GPUS_PER_NODE="2")
        resume = False
        while True:
            run = Controller(run_once(root, env, resume, workers))
            if figures.kills < kills:
                moment = plan[figures.kills]
                trigger, low, high = MOMENTS[moment]
                if run.wait_for(trigger):
                    time.sleep(rng.uniform(low, high))
                    if run.proc.poll() is None:
                        run.end(signum)
                        figures.kills += 1
                        figures.moments.append(moment)
                        figures.torn += torn_files(base)
                        # killed before its first submission, a run leaves no session
                        resume = any(base.glob("fault_injection/2*/experiments.tsv"))
                        continue
            output = run.end(None)
            figures.runs_to_finish += 1
            assert run.proc.returncode == 0, output[-3000:]
            break
        check_session(root, base, env, figures)
    print(figures.line(signum) + (f" (xdist -n {workers})" if workers else ""))
    return figures


def check_session(root: Path, base: Path, env: dict[str, str], figures: Figures) -> None:
    """Lost, re-run, orphans, torn files; the report as rendered afresh from the results."""
    (tsv,) = base.glob("fault_injection/2*/experiments.tsv")
    session = tsv.parent
    results = [json.loads(p.read_text()) for p in session.glob("*/result.json")]
    figures.lost += EXPERIMENTS - sum(1 for r in results if r.get("verdict") is not None)
    kept = {r["job"]["job_id"] for r in results} | {
        a["job"]["job_id"] for r in results for a in r.get("attempts", [])
    }
    # a job that finished and was then replaced by another was run again (a job cancelled by
    # SIGTERM or Ctrl-C never finished: running its experiment again is right)
    finished = set(re.findall(r"finished: job=(\S+)", (session / "events.log").read_text()))
    figures.rerun += len(finished - kept)
    rows = (session / "experiments.tsv").read_text().splitlines()[1:]
    assert {row.split("\t")[0] for row in rows} >= kept, "a stored job has no TSV row"
    deadline = time.monotonic() + 30
    while (left := live_processes_with_env("BASE_EXPERIMENTS_DIR", str(base))) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.5)  # a process that is just ending is not an orphan
    figures.orphans += len(left)
    figures.torn += torn_files(base)
    written = (session / "experiments_report.md").read_text()
    subprocess.run(
        [sys.executable, "-m", "pytest_faultloop", "report", str(session)],
        cwd=root, env=env, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    assert (session / "experiments_report.md").read_text() == written, session


def check(figures: Figures, kills: int) -> None:
    assert figures.kills == kills
    assert (figures.lost, figures.rerun, figures.orphans, figures.torn) == (0, 0, 0, 0), figures


def test_three_sigkills_lose_nothing(tmp_path: Path) -> None:
    check(chaos(tmp_path, 3, signal.SIGKILL, seed=1), 3)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("signum", "kills", "workers"),
    [
        (signal.SIGKILL, 20, 0),
        (signal.SIGTERM, 20, 0),
        (signal.SIGINT, 20, 0),
        (signal.SIGKILL, 5, 2),
        (signal.SIGTERM, 5, 2),
    ],
    ids=["SIGKILL", "SIGTERM", "SIGINT", "SIGKILL-xdist", "SIGTERM-xdist"],
)
def test_many_kills_lose_nothing(
    tmp_path: Path, signum: signal.Signals, kills: int, workers: int
) -> None:
    """Under xdist only the controller is signalled (as a CI runner or ``kill`` does): xdist
    then stops the workers, and each must cancel and record (or leave adoptable) its job."""
    check(chaos(tmp_path, kills, signum, seed=int(signum), workers=workers), kills)
