"""Flight-recorder dumps for gloo, which records collectives but never dumps by itself.

A dump is ``torch._C._distributed_c10d._dump_fr_trace()`` (without stack traces: with them the
first dump imports torch._dynamo, ~2 s per rank) with ``pg_config`` rebuilt from the live
process groups (gloo 2.13 leaves it empty and ``torchfrtrace`` then dies), written atomically to
``${EXPERIMENT_DIR}/checkpoints/_dump_<rank>``. :class:`StallWatchdog` dumps when the rank makes
no progress for a while; the training loop's failure path dumps too.
"""

from __future__ import annotations

import logging
import os
import pickle
import threading
from pathlib import Path
from typing import Any

import torch.distributed as dist
from torch._C._distributed_c10d import _dump_fr_trace  # type: ignore[attr-defined]

from pytest_faultloop.jobs.workload.heartbeat import Heartbeat
from pytest_faultloop.models.layout import DUMP_PREFIX, ExperimentLayout

log = logging.getLogger("tiny_gloo.flight_recorder")


def live_pg_config() -> dict[str, dict[str, str]]:
    """``pg_config`` as NCCL writes it, for every process group this rank belongs to."""
    config: dict[str, dict[str, str]] = {}
    for group in list(dist.distributed_c10d._world.pg_map):
        name = group.group_name
        config[name] = {
            "name": name,
            "desc": group.group_desc,
            "ranks": str(dist.get_process_group_ranks(group)),
        }
    return config


def dump_flight_record(experiment_dir: Path, rank: int) -> tuple[Path, int]:
    """Write this rank's dump; returns its path and how many entries it holds."""
    trace: dict[str, Any] = pickle.loads(
        _dump_fr_trace(includeCollectives=True, includeStackTraces=False, onlyActive=False)
    )
    trace["pg_config"] = live_pg_config()
    target = ExperimentLayout(experiment_dir).fr_dump(rank)
    tmp = experiment_dir / f".{DUMP_PREFIX}{rank}.{os.getpid()}.tmp"  # outside checkpoints/
    tmp.write_bytes(pickle.dumps(trace))
    os.replace(tmp, target)
    return target, len(trace.get("entries", []))


def dump_and_log(experiment_dir: Path, rank: int, why: str, *, hints: bool) -> None:
    """Dump; log why it could not be written, and with ``hints`` where it went (a real job's
    NCCL watchdog dumps without saying why in the training log)."""
    try:
        path, entries = dump_flight_record(experiment_dir, rank)
    except Exception as exc:
        log.error("Rank %d: flight recorder dump failed (%s): %r", rank, why, exc)
        return
    if hints:
        log.warning(
            "Rank %d: %s; flight recorder dumped %d entries to %s", rank, why, entries, path
        )


class StallWatchdog(threading.Thread):
    """Dumps once per stall: when the heartbeat is older than ``stall_s``."""

    def __init__(
        self, experiment_dir: Path, rank: int, heartbeat: Heartbeat, stall_s: float, *, hints: bool
    ):
        super().__init__(name="fr-watchdog", daemon=True)
        self.hints = hints
        self.experiment_dir = experiment_dir
        self.rank = rank
        self.heartbeat = heartbeat
        self.stall_s = stall_s
        self._stop_event = threading.Event()

    def run(self) -> None:
        dumped = False
        while not self._stop_event.wait(min(0.5, self.stall_s / 4)):
            age = self.heartbeat.age()
            if age < self.stall_s:
                dumped = False
            elif not dumped:
                dumped = True
                dump_and_log(
                    self.experiment_dir, self.rank, f"no progress for {age:.1f} s", hints=self.hints
                )

    def stop(self) -> None:
        self._stop_event.set()
