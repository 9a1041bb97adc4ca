"""NODE_KILL: the injecting rank takes its whole node down at once, as a lost node would.

A node's ranks are the children of one launcher process (this package's fork launcher;
torchrun's elastic agent, whose workers are its subprocesses). From the rank, ``/proc`` gives the
launcher (the parent) and everything under it (by parent pid). All get SIGKILL: the launcher
first (so it reports nothing), then its other descendants, then this process. Nothing above the
launcher (slurmstepd, the local backend, a shell) is touched. The parent counts as a launcher
only when the rank's environment has ``LOCAL_WORLD_SIZE`` (torchrun and this package's launcher
give it to the processes they start) and it is not ``init``; otherwise the rank kills only
itself.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path
from typing import NoReturn

RELAY_S = 0.2
"""A moment for the launcher to pass on the lines the rank has just written."""


def parents(proc: Path = Path("/proc")) -> dict[int, int]:
    """pid -> parent pid of every process visible in ``proc``."""
    found: dict[int, int] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # ended meanwhile
            continue
        found[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return found


def descendants(root: int, parent_of: dict[int, int]) -> list[int]:
    """Every process under ``root``, parents before their children."""
    children: dict[int, list[int]] = {}
    for pid, parent in parent_of.items():
        children.setdefault(parent, []).append(pid)
    found: list[int] = []
    todo = [root]
    while todo:
        below = sorted(children.get(todo.pop(0), []))
        found += below
        todo += below
    return found


def node_processes(pid: int, parent_of: dict[int, int], *, launched: bool) -> list[int]:
    """What NODE_KILL on ``pid`` kills, in order: its launcher, the launcher's other
    descendants, ``pid`` last; only ``pid`` when it has no launcher (not ``launched`` by one,
    or adopted by ``init``)."""
    launcher = parent_of.get(pid, 1)
    if not launched or launcher <= 1:
        return [pid]
    return [launcher, *(p for p in descendants(launcher, parent_of) if p != pid), pid]


def kill_node() -> NoReturn:
    """SIGKILL this process's launcher, its other ranks and this process."""
    time.sleep(RELAY_S)
    me = os.getpid()
    launched = "LOCAL_WORLD_SIZE" in os.environ
    for pid in node_processes(me, parents(), launched=launched):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    while True:  # SIGKILL to ourselves is delivered at once
        time.sleep(1)
