"""What the scanner's readers share, passed down to each: the restart cycle being read and what
the log has said so far of its ranks (prefixes, srun labels, world size)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from pytest_faultloop.analyzers.log.line_facts import Kind
from pytest_faultloop.analyzers.log.line_wrappers import PeeledLine, Source
from pytest_faultloop.analyzers.log.scan_events import Cycle, Event
from pytest_faultloop.analyzers.log.signatures import Signature, line_fact
from pytest_faultloop.analyzers.log.torch_messages import message_rank

OWNED_LINES = 400
"""How far after ``Process N terminated with the following error:`` its traceback may end."""
Handler = Callable[[int, PeeledLine, re.Match[str], Signature], bool | None]
"""A reader's method for its catalogue entries' lines (line number, line, match, entry); one
that returns False declines the line, which is then read as if no entry had matched it."""


@dataclass(slots=True)
class LabelsBesideRanks:
    """srun labels seen beside a rank another marker on the same line names."""

    agreeing: set[int] = field(default_factory=set)
    """Labels equal to the rank beside them."""
    differ: bool = False
    """A label beside another rank."""

    def note(self, label: int, rank: int) -> None:
        if label == rank:
            self.agreeing.add(label)
        else:
            self.differ = True


class ScanContext:
    """The cycle being read and the log's ranks so far; ``new_cycle`` starts the next cycle at
    a line (the scanner's, which ends what every reader holds of the cycle before)."""

    def __init__(self, new_cycle: Callable[[int], None]) -> None:
        self.new_cycle = new_cycle
        self.cycle = Cycle(first_line=1)
        self.ranks_seen: set[int] = set()
        self.labels_seen: set[int] = set()
        """srun labels: the ranks, when no launcher prefix names them otherwise."""
        self.labels_by_prefix = LabelsBesideRanks()
        """srun labels beside a launcher's rank prefix (``5: [rank5]:``; under torchrun a
        label is the node's task and differs)."""
        self.labels_by_comm: dict[int, LabelsBesideRanks] = {}
        """srun labels beside the rank NCCL's communicator init line gives, by the
        communicator's size (``5: host:pid:tid [1] NCCL INFO ... rank 5 nranks 8``)."""
        self.world_size: int | None = None
        self.tee_locals: set[int] = set()
        """The local ranks torchrun's ``--tee`` prefixes name (``[default3]:``)."""
        self.stated_ranks: dict[Source, dict[int, int]] = {}
        """Global ranks processes state beside torchrun's ``--tee`` local prefix (gloo's
        connectivity line of the world's context), by launcher and local rank."""
        self.error_owner: tuple[tuple[int, ...], int] | None = None
        """(ranks, line) of a launcher's ``Process N terminated with the following error:``:
        the traceback after it, printed without a rank, is that process's (the first rank's;
        a report may give one error for several ranks: Ray Train's ``[Rank 0,1 Error
        Snippet]:``)."""

    @property
    def labels_are_ranks(self) -> bool:
        """srun's task labels are the ranks where nothing else names ranks, or where lines
        that carry both a label and a rank (a launcher's rank prefix, or NCCL's init line in
        the largest communicator seen: the world's, where sub-groups number their own ranks)
        have the two equal, for a label besides 0 (label 0 is rank 0 under torchrun too), and
        never differ (srun started one task per rank; under torchrun a label is the node's
        task). Read as the scan goes: a line before the evidence keeps what was known then."""
        evidence = [self.labels_by_prefix]
        if self.labels_by_comm:
            evidence.append(self.labels_by_comm[max(self.labels_by_comm)])
        agree = any(e.agreeing - {0} for e in evidence)
        return not self.ranks_seen or (agree and not any(e.differ for e in evidence))

    def line_rank(self, line_no: int, line: PeeledLine) -> int | None:
        """The rank whose line it is: its marker, else srun's label (where labels are ranks),
        else the process a launcher said the traceback after it belongs to."""
        return self.rank_of(line_no, line, marked_rank(line))

    def rank_of(self, line_no: int, line: PeeledLine, marked: int | None) -> int | None:
        """``line_rank``, given the line's ``marked_rank``."""
        rank = marked
        if rank is None and line.labels and self.labels_are_ranks:
            rank = line.labels[0]
        if rank is None and self.error_owner and line_no - self.error_owner[1] < OWNED_LINES:
            rank = self.error_owner[0][0]
        return rank

    def also_owned(self, line_no: int, rank: int | None) -> tuple[int, ...]:
        """The other ranks a report said raised the error the line shows for ``rank``."""
        owner = self.error_owner
        if owner is None or line_no - owner[1] >= OWNED_LINES or rank != owner[0][0]:
            return ()
        return owner[0][1:]

    def note_world(self, size: int | None) -> None:
        """The largest world size a line states (a communicator's or a launcher's)."""
        if size and size > (self.world_size or 0):
            self.world_size = size

    def init_step(
        self, line_no: int, line: PeeledLine, match: re.Match[str], entry: Signature
    ) -> None:
        """An initialization step the log may end on; no rank: the one whose line it is got
        there, the one to blame did not."""
        fact = line_fact(entry, match, Kind.PROGRESS)
        fact.node = line.host
        self.cycle.init_step = Event(line_no, fact, line.text, None)


def marked_rank(line: PeeledLine) -> int | None:
    """The rank the line's wrappers mark (``[rank3]:``), else the one its message names as
    its own (``[Rank 3]``)."""
    return line.rank if line.rank is not None else message_rank(line.content)


def number_field(match: re.Match[str], group: str) -> int | None:
    """A group of the match as a number (None where it did not take part)."""
    value = match.groupdict().get(group)
    return int(value) if value is not None else None


def rank_field(match: re.Match[str]) -> int | None:
    """The rank an entry's pattern captured (``rank``, or ``rank2`` in its other wording)."""
    rank = number_field(match, "rank")
    return rank if rank is not None else number_field(match, "rank2")
