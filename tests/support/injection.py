"""The job contract for one process that injects into itself: what the adapters' tests give a
real framework run of a single process."""

from __future__ import annotations

from pathlib import Path


def exception_at_step_two(experiment_dir: Path) -> dict[str, str]:
    """WORKLOAD_EXC on rank 0 of 1, armed after step 2 and fired at once; the marker goes to
    ``experiment_dir``."""
    return {
        "RANK": "0",
        "WORLD_SIZE": "1",
        "FAULT_TYPE": "WORKLOAD_EXC",
        "FAULT_RANK": "0",
        "FAULT_AT_ITER": "2",
        "FAULT_DELAY": "0",
        "EXPERIMENT_DIR": str(experiment_dir),
    }
