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
from support.fake_stages import make_project, started
from support.sessions import only_session

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


def _one_byte_not_utf8(path: Path, line: int) -> None:
    """A byte flipped inside ``line`` (as a damaged disk leaves it): it is no longer UTF-8."""
    lines = path.read_bytes().splitlines(keepends=True)
    lines[line - 1] = lines[line - 1][:2] + b"\xe9" + lines[line - 1][3:]
    path.write_bytes(b"".join(lines))


NOT_UTF8: dict[str, tuple[str, int, str]] = {
    # file under the session, the line damaged: what the continued run says of it
    "history.jsonl": ("../history.jsonl", 1, "*unreadable history record *history.jsonl:1: *"),
    "experiments.tsv": ("experiments.tsv", 2, "*experiments.tsv: line 2 is not UTF-8*"),
    "events.log": (
        "events.log",
        1,
        "(skipped: 1 unreadable line(s) in *events.log, kept as they are)",
    ),
}


@pytest.mark.parametrize("damaged", list(NOT_UTF8))
def test_a_byte_that_is_not_utf8_in_a_file_the_tool_wrote(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, damaged: str
) -> None:
    """One byte of a file the tool itself wrote is not UTF-8 any more; the session is
    continued with a new experiment (a job submitted: its TSV row, its progress lines, a
    history record). The run ends as it would have (all passed, its summary printed), says
    what it skipped, and every earlier byte is still there. It was a traceback at the end of
    every later run (history.jsonl) or at every job's submission (experiments.tsv)."""
    base = make_project(pytester, monkeypatch, pools={"p": "GPU_SLEEP:1:5:2\n"})
    first = pytester.runpytest("experiments/", "--faultloop-pool=p")
    first.assert_outcomes(passed=5)
    session = only_session(base)
    where, line, told = NOT_UTF8[damaged]
    path = session / where
    if damaged == "history.jsonl":  # its one record is this session's: make it an earlier one
        path.write_bytes(path.read_bytes() * 2)
    _one_byte_not_utf8(path, line)
    before = _snapshot(base)

    (pytester.path / "experiments" / "p.pool").write_text("GPU_SLEEP:1:5:2\nSIGKILL:0:5:2\n")
    result = pytester.runpytest("experiments/", "--faultloop-pool=p", "--faultloop-session", "last")
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.OK, output
    assert "Traceback" not in output and "INTERNALERROR" not in output, output
    result.assert_outcomes(passed=10)
    result.stdout.fnmatch_lines(["faultloop: 2 experiment(s): 2 scored"])
    result.stdout.fnmatch_lines([told])
    assert started(pytester) == ["GPU_SLEEP:1:5:2", "SIGKILL:0:5:2"]
    assert _lost(before, base) == []
