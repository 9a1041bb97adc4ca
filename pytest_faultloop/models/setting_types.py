"""The value types a run's settings share with a test's per-experiment overrides and a
workload's defaults: one type, one validator, wherever the value is written."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field

DEFAULT_FAULT_DELAY_S = 15.0
"""FAULT_DELAY when neither the test, the run nor the workload sets one (the seed's value)."""
DEFAULT_TIME = "00:30:00"
"""The job's time limit when neither the test, the run nor the workload sets one."""

RanksPerNode = Annotated[int, Field(ge=1)]
"""GPUs (ranks) per node."""

FaultDelay = Annotated[float, Field(ge=0)]
"""Seconds from the iteration anchor to the fault."""

_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


def time_limit_seconds(text: str) -> int:
    """Slurm's time formats: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S (ValueError otherwise)."""
    match = _TIME.match(text.strip())
    if not match:
        raise ValueError("not a Slurm time limit; use HH:MM:SS, MM:SS, minutes, or D-HH:MM:SS")
    days, a, b, c = match.groups()
    if days is not None:
        hours, minutes, seconds = int(a), int(b or 0), int(c or 0)
        total = int(days) * 86400 + hours * 3600 + minutes * 60 + seconds
    elif c is not None:
        total = int(a) * 3600 + int(b) * 60 + int(c)
    elif b is not None:
        total = int(a) * 60 + int(b)
    else:
        total = int(a) * 60
    if total <= 0:
        raise ValueError("must be longer than zero")
    return total


def _slurm_time(text: str) -> str:
    time_limit_seconds(text)
    return text


SlurmTime = Annotated[str, AfterValidator(_slurm_time)]
"""A per-job wall-clock limit in one of Slurm's time formats."""
