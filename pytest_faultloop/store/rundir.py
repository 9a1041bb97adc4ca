"""The run directory: a private temporary directory shared by every process of one pytest run.

It holds the scheduler's slot locks and markers and the path of the run's session, so the
controller, xdist workers and experiments started from Python tests agree on both. The
controller (or the single process) creates it and hands it to workers; it is removed when the
process that created it ends (one killed before it could is removed by the next run).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock

from pytest_faultloop.store.processes import alive

_SESSION = "session"
_PREFIX = "faultloop-run-"
_OWNER = "owner.pid"
"""The pid of the process that created the run directory (its cleanup removes it)."""


def create_run_dir() -> Path:
    """A new run directory owned by this process (its creator removes it when the run ends);
    the directories of runs killed before they could remove theirs are removed now."""
    path = Path(tempfile.mkdtemp(prefix=_PREFIX))
    (path / _OWNER).write_text(str(os.getpid()))
    remove_abandoned(path.parent)
    return path


def remove_abandoned(parent: Path) -> None:
    """Remove the run directories whose creating process is gone (a run killed with SIGKILL
    could not remove its own); a directory without its owner's pid is left alone."""
    for directory in parent.glob(f"{_PREFIX}*"):
        try:
            owner = int((directory / _OWNER).read_text())
        except (OSError, ValueError):
            continue
        if not alive(owner):
            shutil.rmtree(directory, ignore_errors=True)


def agreed_session(directory: Path, choose: Callable[[], Path]) -> Path:
    """The run's session directory: the first process to ask chooses it (``choose``), every
    later one reads its choice."""
    return Path(agreed(directory, _SESSION, lambda: str(choose())))


def recorded_session(directory: Path) -> Path | None:
    """The session some process of the run chose, or None when none has yet."""
    text = recorded(directory, _SESSION)
    return None if text is None else Path(text)


def agreed(directory: Path, name: str, choose: Callable[[], str]) -> str:
    """One value the run's processes share (``name`` in the run directory): the first to ask
    chooses it, every later one reads its choice."""
    with FileLock(str(directory / f"{name}.lock")):
        existing = recorded(directory, name)
        if existing is not None:
            return existing
        value = choose()
        (directory / name).write_text(value)
        return value


def recorded(directory: Path, name: str) -> str | None:
    """The value some process of the run chose, or None when none has yet."""
    try:
        return (directory / name).read_text()
    except FileNotFoundError:
        return None
