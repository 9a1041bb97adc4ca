"""Horovod's stall inspector lists (``horovod/common/stall_inspector.cc``): the ranks its peers
wait for, one ``<rank>[!]: [<tensor>, ...]`` entry each after ``Missing ranks:`` (``Stalled
ranks:`` before 0.21). A warning (``LOG(WARNING)``, no ``!``) may pass: the rank submits its
tensors late and training goes on. So an entry names a stalled rank only while the rank is not
heard from again; a ``!`` entry (stalled past the shutdown time, ``Will shutdown.``) always does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pytest_faultloop.analyzers.log.line_facts import Kind, LineFact
from pytest_faultloop.analyzers.log.line_forms import Progress
from pytest_faultloop.analyzers.log.line_wrappers import PeeledLine
from pytest_faultloop.analyzers.log.scan_events import Event
from pytest_faultloop.analyzers.log.signatures import catalogue, tagged

STALL_WARNINGS = tagged("stall-warning")
"""The catalogue entry of the warning the list follows (a hang of its own without a list)."""
INSPECTOR_LINES = tuple(s for s in catalogue() if "stall-inspector" in s.tags)
"""The stall inspector's own lines: printed by rank 0's background thread, also while rank 0
itself is the one stalled, so never that rank's word."""
OUTLIVED_LINES = 2000
"""How far after a stall entry the lines are read for the stalled rank's own word (entry names
are the user's tensors, its progress lines the user's prints: neither holds a keyword)."""
_ENTRY = re.compile(r"(?P<rank>\d+)(?P<shutdown>!)?: \[")
"""stall_inspector.cc: ``global_ranks[kv.first]``, ``!`` where it passed the shutdown time,
then ``: [`` and the tensors."""


def inspector_line(content: str) -> bool:
    """Is the line the stall inspector's (its warning, its list's header, its shutdown)?"""
    return any(entry.search(content) for entry in INSPECTOR_LINES)


def stall_entry(line: PeeledLine) -> tuple[int, bool] | None:
    """The rank an entry names and whether it is marked ``!`` (Horovod shuts down for it); the
    rank reads as a task label where ``: [`` follows it (``[1,0]<stderr>:5: [t]``)."""
    if line.labels and line.after_label.startswith("["):
        return line.labels[-1], False
    match = _ENTRY.match(line.content)
    return (int(match["rank"]), bool(match["shutdown"])) if match else None


@dataclass
class StalledRanks:
    """The ranks stall lists named and that have not spoken since, with their first entry."""

    entries: dict[int, tuple[Event, bool]] = field(default_factory=dict)
    """rank -> (its first entry since it last spoke, marked ``!``)."""
    read_until: int = 0
    """The last line read for the named ranks' own word."""
    progress: dict[int, Progress] = field(default_factory=dict)
    """Other ranks' last line since a list: its form (numbers masked) and its text."""

    def name(self, line_no: int, rank: int, shutdown: bool, text: str) -> None:
        fact = LineFact(
            Kind.NAMED, "stalled: never submitted the tensors its peers wait for", named=(rank,)
        )
        known = self.entries.get(rank)
        event = known[0] if known is not None else Event(line_no, fact, text, None)
        self.entries[rank] = (event, shutdown or (known is not None and known[1]))
        self.read_until = line_no + OUTLIVED_LINES
        self.progress = {}  # work goes on only if it advances after the latest list

    def watching(self, line_no: int) -> bool:
        """Are lines still read for a named rank's word (one not marked ``!`` is pending)?"""
        pending = any(not shutdown for _, shutdown in self.entries.values())
        return pending and line_no <= self.read_until

    def spoke(self, rank: int) -> bool:
        """The rank printed a line of its own after its entry: the stall passed (True where
        that withdrew the last entry); a ``!`` entry stands."""
        known = self.entries.get(rank)
        if known is None or known[1]:
            return False
        del self.entries[rank]
        return not self.entries

    def advanced(self, rank: int, content: str) -> bool:
        """A rank no list named printed a line of the same form as its last one since the
        list, with other numbers (``step 300``, then ``step 400``): its work went on, so the
        collective the lists waited for completed (it needs every rank), and every entry not
        marked ``!`` passed (True where none is left). A line repeated as it was (a monitor
        thread's) says nothing."""
        if not self.progress.setdefault(rank, Progress()).advanced(content):
            return False
        self.entries = {r: known for r, known in self.entries.items() if known[1]}
        return not self.entries

    def event(self) -> Event | None:
        """One event naming every rank still stalled, at the first entry's line."""
        if not self.entries:
            return None
        first = min((e for e, _ in self.entries.values()), key=lambda e: e.line)
        first.fact.named = tuple(sorted(self.entries))
        self.entries = {}
        return first
