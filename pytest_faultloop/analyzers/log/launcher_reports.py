"""Other launchers and the scheduler: srun and slurmstepd, mpirun, DeepSpeed, Horovod stall
reports and preemption notices."""

from __future__ import annotations

import re

from pytest_faultloop.analyzers.log.exit_codes import exit_signal
from pytest_faultloop.analyzers.log.line_facts import Kind, LineFact

_MPIRUN_RANK = re.compile(
    r"process rank (?P<rank>\d+) with PID (?P<pid>\d+) on node (?P<node>\S+) "
    r"exited on signal (?P<num>\d+)"
)
_DEEPSPEED_EXIT = re.compile(r"exits with return code = (?P<code>-?\d+)")
_READY_RANKS = re.compile(r"ready ranks: (?P<ranks>\d+(?:, ?\d+)*)")
_PREEMPTED = re.compile(r"(?i)\bjob (?:is|was|has been) preempted|\bpreempted by\b")

_SLURM_CANCELLED = re.compile(
    r"\*\*\* (?P<what>JOB|STEP) (?P<id>\S+)(?: ON (?P<node>\S+))? CANCELLED AT (?P<at>\S+)"
    r"(?: DUE TO (?P<why>[A-Z][A-Z ]*?))?(?: on (?P<node2>\S+))? \*\*\*"
)
_SRUN_TASKS = re.compile(r"srun: error: (?P<node>\S+): tasks? (?P<tasks>[\d,\-]+): (?P<what>.+)$")
_SLURM_OOM = re.compile(r"Detected \d+ oom[-_]kill event")
STEP_TERMINATING = re.compile(r"srun: (?:Terminating|Job step aborted|Force Terminated)")


def launcher_report(content: str) -> tuple[int | None, int, int | None, str | None] | None:
    """A launcher's word on how a rank ended, for launchers other than torchrun: mpirun's
    ``process rank N with PID P on node H exited on signal S`` and DeepSpeed's ``exits with
    return code = C`` (its line names the last command started, not the rank that failed).
    Returns (rank, exit code, pid, node)."""
    if match := _MPIRUN_RANK.search(content):
        return int(match["rank"]), -int(match["num"]), int(match["pid"]), match["node"]
    if match := _DEEPSPEED_EXIT.search(content):
        return None, int(match["code"]), None, None
    return None


def ready_ranks(content: str) -> list[int] | None:
    """Horovod's stall report of the ranks that did submit a tensor: the others did not."""
    match = _READY_RANKS.search(content)
    return [int(r) for r in re.findall(r"\d+", match["ranks"])] if match else None


def preempted(content: str) -> bool:
    return bool(_PREEMPTED.search(content))


def classify_slurm(content: str) -> LineFact | None:
    """slurmstepd's cancellation banner, srun's per-task verdicts, OOM kills."""
    if match := _SLURM_CANCELLED.search(content):
        node = match["node"] or match["node2"]
        why = match["why"]
        if why:
            return LineFact(
                Kind.SCHEDULER,
                f"Slurm {match['what'].lower()} cancelled due to {why.lower()}",
                node=node,
            )
        return LineFact(Kind.JOB_SIGNAL, f"Slurm {match['what'].lower()} cancelled", node=node)
    if match := _SRUN_TASKS.search(content):
        return LineFact(
            Kind.EXIT,
            match["what"].strip(),
            node=match["node"],
            extra={"tasks": match["tasks"]},
        )
    if _SLURM_OOM.search(content):
        return LineFact(Kind.CRASH, "killed by the out-of-memory killer")
    return None


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
