"""Damaged stored files: a real session (one real job on the local backend) gets one stored
file corrupted, truncated or deleted; the session is then re-analysed and continued. Nothing
recorded may be lost (every earlier byte is still there: in place, as a prefix of a file the
run appends to, under ``attempts/`` or under ``revisions/``), and the run says what it found."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
POOL = "SIGKILL:1:5:1"
EXPERIMENT = "n1_SIGKILL_r1_i5"
APPENDED = ("experiments.tsv", "events.log", "history.jsonl")
"""Files a run appends to: what was there must stay their prefix."""
DERIVED = ("experiments_report.md",)
"""Re-rendered from the stored results at every run's end."""


def _pytest(root: Path, base: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("WORKLOAD", "PYTEST_ADDOPTS")}
    env.update(BASE_EXPERIMENTS_DIR=str(base), POOL=POOL, GPUS_PER_NODE="2")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "experiments/", "-p", "no:cacheprovider", *args],
        cwd=root, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project and its base directory holding one finished session (one real job)."""
    root = tmp_path_factory.mktemp("project")
    shutil.copytree(REPO / "experiments", root / "experiments")
    done = _pytest(root, root / "out", "-q")
    assert done.returncode == 0, done.stdout[-3000:]
    return root


def _snapshot(base: Path) -> dict[Path, bytes]:
    return {p.relative_to(base): p.read_bytes() for p in sorted(base.rglob("*")) if p.is_file()}


def _lost(before: dict[Path, bytes], base: Path) -> list[str]:
    """Every earlier file whose bytes cannot be found where the run keeps them."""
    now = _snapshot(base)
    kept = set(now.values())
    lost = []
    for path, data in before.items():
        if path.suffix == ".lock" or path.name in DERIVED:
            continue
        if path.name in APPENDED:
            if not now.get(path, b"").startswith(data):
                lost.append(f"{path}: no longer starts with what it held")
        elif now.get(path) != data and data not in kept:
            lost.append(f"{path}: its bytes are nowhere in the session")
    return lost


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])


def _garble(path: Path) -> None:
    path.write_bytes(b"\x80garbage" + path.read_bytes()[:7])


DAMAGE: dict[str, tuple[str, Callable[[Path], None], str]] = {
    # name: (file under the session, what is done to it, what the re-analysis says of it)
    "result truncated": (f"{EXPERIMENT}/result.json", _truncate, "not a valid result"),
    "result deleted": (f"{EXPERIMENT}/result.json", Path.unlink, "missing beside the files"),
    "marker garbled": (f"{EXPERIMENT}/fault_injection.json", _garble, "json: not a fault marker"),
    "survivor's dump garbled": (f"{EXPERIMENT}/checkpoints/_dump_0", _garble, "unusable: _dump_0"),
    "tsv truncated": ("experiments.tsv", _truncate, "experiments.tsv: line 2 has"),
    "history truncated": ("../history.jsonl", _truncate, "unreadable history record"),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_stored_file_loses_nothing_and_is_told(
    finished: Path, tmp_path: Path, damage: str
) -> None:
    root = tmp_path / "project"
    shutil.copytree(finished, root)
    base = root / "out"
    (session,) = (base / "fault_injection").glob("2*")
    where, spoil, told = DAMAGE[damage]
    spoil(session / where)
    before = _snapshot(base)

    rescored = _pytest(root, base, "--faultloop-reanalyze", "--faultloop-session", "last", "-rA")
    assert told in rescored.stdout + rescored.stderr, rescored.stdout[-3000:]
    assert _lost(before, base) == []

    before = _snapshot(base)
    continued = _pytest(root, base, "--faultloop-session", "last", "-q")
    assert _lost(before, base) == [], continued.stdout[-3000:]
