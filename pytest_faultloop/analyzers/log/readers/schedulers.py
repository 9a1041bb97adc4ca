"""Schedulers' and their launchers' word on a job (Slurm's srun and slurmstepd, SkyPilot's and
others' preemption, a Kubernetes pod's terminated container)."""

from __future__ import annotations

import re
from typing import ClassVar

from pytest_faultloop.analyzers.log import launcher_reports as launchers
from pytest_faultloop.analyzers.log.exit_codes import exit_fact
from pytest_faultloop.analyzers.log.line_facts import Kind, LineFact
from pytest_faultloop.analyzers.log.line_wrappers import PeeledLine
from pytest_faultloop.analyzers.log.readers.context import ScanContext
from pytest_faultloop.analyzers.log.scan_events import Event
from pytest_faultloop.analyzers.log.signatures import Signature, tagged_entry

CONTAINER_STATE_LINES = 8
"""How far after kubectl describe's ``State: Terminated`` its ``Exit Code:`` may come (after
the state's Reason and Message)."""
PREEMPTION = tagged_entry("preemption")
"""The entry a preemption's fact names, whichever handler's line said it."""


class SchedulerReader:
    """srun's task verdicts, preemptions, and a container's state until its exit code."""

    HANDLERS: ClassVar[tuple[str, ...]] = (
        "step_terminating",
        "srun_tasks",
        "preempted",
        "container_terminated",
        "container_exit_code",
    )

    def __init__(self, ctx: ScanContext) -> None:
        self.ctx = ctx
        self.container_end: int | None = None
        """The line of kubectl describe's ``State: Terminated``, until its ``Exit Code:``."""

    def on_step_terminating(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        self.ctx.cycle.step_terminating = True

    def on_srun_tasks(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """srun's verdict per task: tasks are ranks where its labels are."""
        what = match["what"].strip()
        kind, sig = launchers.srun_task_verdict(what)
        tasks = launchers.expand_tasks(match["tasks"])
        # after a task failed, srun stops the step: SIGTERM, then SIGKILL after KillWait
        teardown = ("SIGTERM", "SIGKILL") if self.ctx.cycle.task_failed else ("SIGTERM",)
        stopped = sig in teardown and self.ctx.cycle.step_terminating
        verdict = LineFact(kind, what, node=match["node"], signal_name=sig, by_launcher=stopped)
        self.ctx.cycle.step_terminating = True  # srun stops the other tasks after this one
        self.ctx.cycle.task_failed = self.ctx.cycle.task_failed or not stopped
        if not self.ctx.labels_are_ranks:
            self.ctx.cycle.add(Event(line_no, verdict, line.text, None, report=True))
            return
        for task in tasks:
            self.ctx.cycle.add(Event(line_no, verdict, line.text, task, report=True))

    def on_preempted(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        preempted = LineFact(
            Kind.SCHEDULER, "the job was preempted", role="origin", signature=PREEMPTION.id
        )
        self.ctx.cycle.step_terminating = True
        self.ctx.cycle.add(Event(line_no, preempted, line.text, None))

    def on_container_terminated(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        self.container_end = line_no

    def on_container_exit_code(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> bool:
        """A terminated container's exit code, as kubectl describe prints the pod's status
        (apart from the log stream): a signal where the code says one, else an exit; 0 is a
        container that completed. No rank: a worker pod's index is a node's."""
        held, self.container_end = self.container_end, None
        if held is None or line_no - held > CONTAINER_STATE_LINES:
            return False
        code = int(match["code"])
        if code:
            fact = exit_fact(code, None, line.host)
            fact.detail = f"the container ended: {fact.detail} (Kubernetes pod status)"
            fact.role, fact.signature = signature.role, signature.id
            fact.extra = dict(signature.extra)
            self.ctx.cycle.add(Event(line_no, fact, line.text, None, report=True))
        return True
