"""The job-side knobs: what the built-in workload reads from its environment beyond the seed's
variables, each with its default and its floor, in one table (docs/concepts/workloads.md lists
it).

They are set in the environment the job inherits (``sbatch --export=ALL``, the local backend's
environment); a value below its floor or not a number stops the job with a line naming it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pytest_faultloop.jobs.workload.envparse import env_float


@dataclass(frozen=True)
class JobKnob:
    """One variable: ``default`` in seconds (None: computed, as ``help`` says)."""

    name: str
    default: float | None
    minimum: float
    help: str

    def read(self, env: Mapping[str, str], computed: float | None = None) -> float:
        """The variable's value; unset, its default (or ``computed``, for a computed one)."""
        default = self.default if self.default is not None else computed
        assert default is not None, f"{self.name}: a computed default must be given"
        return env_float(env, self.name, default, minimum=self.minimum)

    @property
    def shown_default(self) -> str:
        return f"{self.default:g} s" if self.default is not None else "computed"


COLLECTIVE_TIMEOUT = JobKnob(
    "FAULTLOOP_COLLECTIVE_TIMEOUT", 10.0, 1.0, "gloo's timeout for every collective"
)
FR_STALL = JobKnob(
    "FAULTLOOP_FR_STALL_S",
    None,
    0.1,
    "no progress for this long dumps the flight recorder; half the collective timeout "
    "unless set, and always shorter than it",
)
ITER_PERIOD = JobKnob(
    "FAULTLOOP_ITER_PERIOD_S", 0.05, 0.0, "the shortest iteration (the loop sleeps the rest)"
)
EXIT_MARGIN = JobKnob(
    "FAULTLOOP_EXIT_MARGIN_S",
    2.0,
    0.0,
    "training goes on for FAULT_DELAY plus this after the anchor iteration, then ends",
)
STARTUP_TIMEOUT = JobKnob(
    "FAULTLOOP_STARTUP_TIMEOUT",
    None,
    1.0,
    "how long a rank may take to join the job (the rendezvous store and every peer): "
    "(30 + 2 × world size) × max(1, load average / CPUs) unless set",
)
KILL_GRACE = JobKnob(
    "FAULTLOOP_KILL_GRACE_S",
    5.0,
    0.0,
    "how long past the collective timeout a rank without progress may live before its "
    "launcher terminates it",
)
FAULT_DELAY_IN_JOB = JobKnob(
    "FAULT_DELAY",
    0.0,
    0.0,
    "the seed's variable, as the injector reads it when a job is started by hand; a "
    "pytest run always exports it (the workload's or the setting's value)",
)

JOB_KNOBS = (
    COLLECTIVE_TIMEOUT,
    FR_STALL,
    ITER_PERIOD,
    EXIT_MARGIN,
    STARTUP_TIMEOUT,
    KILL_GRACE,
    FAULT_DELAY_IN_JOB,
)


def knobs_table() -> list[str]:
    """The table as the docs show it (scripts/gen_docs.py writes it there)."""
    lines = ["| variable | default | floor | what it does |", "|---|---|---|---|"]
    for knob in JOB_KNOBS:
        lines.append(f"| `{knob.name}` | {knob.shown_default} | {knob.minimum:g} s | {knob.help} |")
    return lines
