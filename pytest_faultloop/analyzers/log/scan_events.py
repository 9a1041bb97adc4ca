"""What the scanner keeps of a log: classified lines (events), grouped per restart cycle."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pytest_faultloop.analyzers.log.line_facts import Kind, LineFact

EVIDENCE_CHARS = 400
"""Evidence lines are cut to this many characters."""


@dataclass(slots=True)
class Event:
    """A classified line of the log."""

    line: int
    fact: LineFact
    text: str
    rank: int | None
    report: bool = False
    """From an end-of-run report (torchrun's table, srun), not from the rank's own output."""
    root_cause: bool = False
    """torchrun's "Root Cause (first observed failure)"."""
    count: int = 1

    @property
    def kind(self) -> Kind:
        return self.fact.kind


@dataclass
class Cycle:
    """Facts of one restart cycle (the scanner keeps only the current one)."""

    first_line: int
    events: dict[tuple[int | None, Kind, str], Event] = field(default_factory=dict)
    launcher_term_pids: set[int] = field(default_factory=set)
    step_terminating: bool = False
    """srun or Slurm began stopping the whole step: later "Terminated" tasks are its doing."""
    training_done_line: int | None = None
    checkpoint_saved: bool = False

    def add(self, event: Event) -> None:
        if len(event.text) > EVIDENCE_CHARS:
            event.text = event.text[:EVIDENCE_CHARS] + " [...]"
        key_detail = (event.fact.pg or "") if event.kind is Kind.PROGRESS else ""
        key = (event.rank, event.kind, key_detail)
        known = self.events.get(key)
        if known is None:
            self.events[key] = event
        elif event.kind is Kind.PROGRESS:
            event.count = known.count + 1
            self.events[key] = event  # the latest counters matter
        else:
            known.count += 1

    def ordered(self) -> list[Event]:
        return sorted(self.events.values(), key=lambda e: e.line)


@dataclass
class ScanResult:
    path: Path
    cycle: Cycle
    cycles: int
    lines: int
    bytes_read: int
    ranks_seen: set[int]
    world_size: int | None
    has_text: bool = False
    """Anything but whitespace and the harness's lines."""
    not_text: str | None = None
    """Why the file is not a text log (binary data), when it is not."""
