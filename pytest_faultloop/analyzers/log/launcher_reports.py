"""srun's per-task verdicts: which tasks, and how each ended (the line itself is read by the
catalogue's ``srun.task_verdict`` entry)."""

from __future__ import annotations

import re

from pytest_faultloop.analyzers.log.exit_codes import exit_signal
from pytest_faultloop.analyzers.log.line_facts import Kind


def expand_tasks(tasks: str) -> list[int]:
    """srun's task list ``0-1,3,6`` -> [0, 1, 3, 6]."""
    ranks: list[int] = []
    for part in tasks.split(","):
        first, _, last = part.partition("-")
        if first.isdigit():
            ranks.extend(range(int(first), int(last) + 1 if last.isdigit() else int(first) + 1))
    return ranks


def srun_task_verdict(what: str) -> tuple[Kind, str | None]:
    """srun's words for how a task ended -> (kind, signal)."""
    if what.startswith("Killed"):
        return Kind.SIGNAL, "SIGKILL"
    if what.startswith("Terminated"):
        return Kind.SIGNAL, "SIGTERM"
    if what.startswith(("Segmentation fault", "Aborted", "Bus error", "Out Of Memory")):
        return Kind.CRASH, None
    code = re.search(r"exit code (\d+)", what)
    if code and (name := exit_signal(int(code.group(1)))):
        return Kind.SIGNAL, name
    return Kind.EXIT, None
