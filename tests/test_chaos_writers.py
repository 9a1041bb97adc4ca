"""Chaos test of a session's writers: runs that write one session at once, and runs killed in
the middle of a revision. After every round, whatever the timing:

* each revision holds results of one analyzer version (the re-analyses here re-score every
  experiment, so a mixed revision is two writers' work, or half of one's);
* the session's own results are exactly its newest revision's (nothing re-scored leaked in
  before it was published, and no publication stopped half-way);
* every experiment still has a readable, scored result, and every revision listed lies on disk.

Three scenarios, with random offsets: two re-analyses by different analyzer versions; a
re-analysis beside a continued run; a re-analysis SIGKILLed at a random moment, followed by a
reader (``compare``) and a re-analysis that must find and finish or set aside what the killed
one left. The fake stages run no jobs; their log analysis sleeps so the runs overlap.
``-m slow`` runs 10 rounds of each; CI runs one of each. The figures are printed (``-s``)."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from support.fake_stages import make_project
from support.sessions import only_session

POOL = {"p": "GPU_SLEEP:1:5:2\nGPU_SLEEP:0:5:2\nSIGKILL:1:5:2\nSIGTERM:1:5:2\n"}
EXPERIMENTS = 4
SLOW_ANALYSIS = {"FAKE_LOG_SECONDS": "0.4"}


@dataclass
class Figures:
    runs: int = 0
    refused: int = 0
    """Runs refused because another held the session (the claim doing its work)."""
    kills: int = 0
    moments: Counter[str] = field(default_factory=Counter)
    """Where each kill landed, read from what it left (see :func:`_moment`)."""
    mixed_revisions: int = 0
    lost: int = 0
    session_off_newest: int = 0

    def line(self, scenario: str) -> str:
        return (
            f"chaos writers {scenario}: {self.runs} runs ({self.refused} refused: session in "
            f"use), {self.kills} kills {dict(self.moments)}; mixed revisions "
            f"{self.mixed_revisions}, lost {self.lost}, session not its newest revision "
            f"{self.session_off_newest}"
        )


def _analyzer(root: Path, version: str) -> None:
    """Another version of the fake log analyzer (its source is part of the fingerprint)."""
    conftest = root / "conftest.py"
    head = "def pytest_faultloop_analyze_log(config, experiment, artifacts):\n"
    marked = re.sub(
        re.escape(head) + r"(?:    # version \w+\n)?",
        f"{head}    # version {version}\n",
        conftest.read_text(),
    )
    conftest.write_text(marked)


def _start(root: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "experiments/", "-p", "no:cacheprovider", "-q", *args],
        cwd=root,
        env={**os.environ, **SLOW_ANALYSIS},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _finish(proc: subprocess.Popen[str], figures: Figures) -> None:
    """Wait for a run; it either scored or was refused because the session was in use."""
    out, _ = proc.communicate(timeout=900)
    figures.runs += 1
    if proc.returncode == pytest.ExitCode.USAGE_ERROR and "is in use by" in out:
        figures.refused += 1
        return
    assert proc.returncode == 0, out[-3000:]


def _fingerprints(directory: Path) -> dict[str, str]:
    return {
        p.parent.name: json.loads(p.read_bytes()).get("fingerprint") or ""
        for p in directory.glob("*/result.json")
    }


def check_session(session: Path, figures: Figures) -> None:
    revisions = session / "revisions"
    index = [
        json.loads(line)["name"]
        for line in (revisions / "revisions.jsonl").read_text().splitlines()
        if line.strip()
    ] if (revisions / "revisions.jsonl").exists() else []  # fmt: skip
    assert len(index) == len(set(index)), index
    for name in index:
        assert (revisions / name).is_dir(), f"revision {name} listed, not on disk"
        versions = set(_fingerprints(revisions / name).values())
        figures.mixed_revisions += len(versions) > 1
    current = {p.parent.name: p.read_bytes() for p in session.glob("*/result.json")}
    scored = [json.loads(data) for data in current.values()]
    figures.lost += EXPERIMENTS - sum(1 for r in scored if r.get("verdict") is not None)
    if index:
        newest = {
            p.parent.name: p.read_bytes() for p in (revisions / index[-1]).glob("*/result.json")
        }
        figures.session_off_newest += newest != current


def _two_reanalyses(root: Path, session: Path, rng: random.Random, figures: Figures) -> None:
    _analyzer(root, f"a{figures.runs}")
    first = _start(root, "--faultloop-reanalyze", "--faultloop-session", str(session))
    time.sleep(rng.uniform(0, 3))
    _analyzer(root, f"b{figures.runs}")
    second = _start(root, "--faultloop-reanalyze", "--faultloop-session", str(session))
    _finish(first, figures)
    _finish(second, figures)


def _reanalysis_beside_a_continue(
    root: Path, session: Path, rng: random.Random, figures: Figures
) -> None:
    _analyzer(root, f"c{figures.runs}")
    runs = [
        _start(root, "--faultloop-reanalyze", "--faultloop-session", str(session)),
        _start(root, "--faultloop-pool=p", "--faultloop-session", str(session)),
    ]
    if rng.random() < 0.5:
        runs.reverse()
    time.sleep(rng.uniform(0, 3))
    for proc in runs:
        _finish(proc, figures)


def _killed_reanalysis(root: Path, session: Path, rng: random.Random, figures: Figures) -> None:
    _analyzer(root, f"k{figures.runs}")
    revisions_before = _listed(session)
    victim = _start(root, "--faultloop-reanalyze", "--faultloop-session", str(session))
    aim = AIMS[(figures.runs // 2) % len(AIMS)]  # each in turn: CI's one round kills mid-way
    if aim == "any time":  # start-up, re-scoring (4 × 0.4 s, two at a time), publishing, done
        time.sleep(rng.uniform(0.2, 6.0))
    else:  # a moment a uniform delay rarely hits on a loaded machine: wait for it, then a bit
        _await_moment(session, revisions_before, aim, victim)
        time.sleep(rng.uniform(0, 0.4))
    if victim.poll() is None:
        victim.send_signal(signal.SIGKILL)
        victim.communicate(timeout=300)
        figures.kills += 1
        figures.moments[_moment(session, revisions_before)] += 1
    else:
        victim.communicate(timeout=300)
    figures.runs += 1
    reader = subprocess.run(
        [sys.executable, "-m", "pytest_faultloop", "compare", str(session), str(session)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert reader.returncode == 0, reader.stderr
    check_session(session, figures)  # what a reader sees right after the kill
    _analyzer(root, f"r{figures.runs}")
    _finish(_start(root, "--faultloop-reanalyze", "--faultloop-session", str(session)), figures)


AIMS = ("re-scoring", "begun", "any time")


def _await_moment(
    session: Path, listed_before: int, aim: str, victim: subprocess.Popen[str]
) -> None:
    """Until the re-analysis has reached ``aim`` (or gone past it, or ended)."""
    order = ["start-up", "begun", "re-scoring", "publishing", "published"]
    while victim.poll() is None:
        if order.index(_moment(session, listed_before)) >= order.index(aim):
            return
        time.sleep(0.01)


def _listed(session: Path) -> int:
    """The revisions re-analyses wrote (not those keeping a run's own scoring)."""
    index = session / "revisions" / "revisions.jsonl"
    lines = index.read_text().splitlines() if index.exists() else []
    return sum(1 for line in lines if line.strip() and json.loads(line)["rescored"])


def _moment(session: Path, listed_before: int) -> str:
    """Where a kill landed, from what the killed re-analysis left."""
    revisions = session / "revisions"
    if (revisions / ".publishing").exists():
        return "publishing"
    staged = list(revisions.glob(".r*.partial"))
    if staged:
        return "re-scoring" if any(staged[0].iterdir()) else "begun"
    return "published" if _listed(session) > listed_before else "start-up"


SCENARIOS = {
    "two re-analyses": _two_reanalyses,
    "re-analysis beside a continue": _reanalysis_beside_a_continue,
    "killed re-analysis": _killed_reanalysis,
}


def chaos(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, scenario: str, rounds: int
) -> Figures:
    base = make_project(pytester, monkeypatch, pools=POOL)
    pytester.runpytest("experiments/", "--faultloop-pool=p").assert_outcomes(passed=20)
    session = only_session(base)
    rng = random.Random(f"{scenario}-{rounds}")
    figures = Figures()
    for _ in range(rounds):
        SCENARIOS[scenario](pytester.path, session, rng, figures)
        check_session(session, figures)
    print(figures.line(scenario))
    return figures


def check(figures: Figures) -> None:
    assert (figures.mixed_revisions, figures.lost, figures.session_off_newest) == (0, 0, 0), figures


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_one_round_of_writers_mixes_nothing(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, scenario: str
) -> None:
    check(chaos(pytester, monkeypatch, scenario, rounds=1))


@pytest.mark.slow
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_ten_rounds_of_writers_mix_nothing(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, scenario: str
) -> None:
    check(chaos(pytester, monkeypatch, scenario, rounds=10))
