"""The built-in flight-recorder analyzer: where collectives diverge, and who held them up.

Per process group (matched by name across ranks) the wavefront is the highest collective any
member entered; members that never entered it are missing from it, and so are members that
left no dump, unless every member with a dump moved past it (then they took part). A missing
rank held up at the front of another diverging group is collateral; the others are culprit
candidates. Example: rank 1 never enters its tensor-parallel all_gather; rank 0 waits in that
all_gather, so the default group looks short of ranks 0 and 1, but only the TP group holds the
culprit.

Where a rank stopped: the first collective it still waits in, else its newest one. gloo
retires a collective that failed (timeout, lost peer) just like one that completed, so "still
waiting" alone cannot tell a held-up rank; a rank whose newest collective is the front of
another diverging group was stopped there. One stopped at a collective its group-mates all
passed waits for nobody: it is a candidate.

Positive evidence first: in a group whose other members all left dumps and all entered its
front collective, the one member that did not is a suspect, whatever dumps are missing
elsewhere, provided no other rank stopped where it stopped. Several members short at once, or
a rank stopped beside others at one failed collective, is the cascade of a failure, not its
cause. A
member with no dump, next to peers that wrote theirs, could not write one: its process died or
cannot run (killed, crashed, stopped, GIL held). It explains its own group's shortfall better
than a live member that is behind (that one got an error from the dead peer), so in a group with
a member without a dump, those members are the suspects, reported apart as "no dump". A dump
that exists but cannot be used says nothing: its rank is unknown, never guilty.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pytest_faultloop.analyzers.fr.dump_set import load_dumps
from pytest_faultloop.analyzers.fr.nvrx_table import fr_table
from pytest_faultloop.analyzers.fr.summary import DumpSet, GroupProgress, RankDump
from pytest_faultloop.analyzers.rank_ranges import rank_ranges
from pytest_faultloop.models import FrAnalysis, FrGroup, FrSuspect
from pytest_faultloop.models.analysis import EvidenceKind

ANALYZER = "builtin"
DEFAULT_GROUP_DESC = "default_pg"


@dataclass
class _Group:
    name: str
    desc: str
    members: set[int]


def analyze_fr(path: Path, pattern: str = "_dump_*", jobs: int | None = None) -> FrAnalysis:
    """Analyse the dumps under ``path``, decoded by ``jobs`` processes (None: one per core for
    a large set); never raises on bad or missing dumps. The answer is the same for any jobs."""
    dump_set = load_dumps(Path(path), pattern, jobs)
    groups, reasons = _diverging_groups(dump_set)
    analysis = FrAnalysis(
        analyzer=ANALYZER,
        suspects=sorted(r.rank for r in reasons),
        reasons=sorted(reasons, key=lambda r: r.rank),
        unknown=sorted(dump_set.unknown),
        groups=groups,
        dumps_read=len(dump_set.dumps),
        unreadable=dump_set.unreadable,
    )
    return analysis.model_copy(update={"table": fr_table(analysis)})


@dataclass
class _Front:
    """A group whose members diverge at its wavefront."""

    row: FrGroup
    seq: int
    """The front collective: the highest ``collective_seq_id`` any member entered."""
    behind: set[int]
    """Members with a dump that never entered the front collective."""
    vanished: set[int]
    """Members without a dump."""
    unusable: set[int]
    """Members whose dump exists but cannot be used."""
    not_started: set[int]
    created_ns: int
    """When the front collective was first created: orders groups of the same size."""
    candidates: set[int] = field(default_factory=set)
    """Members with a dump that are missing and not held up elsewhere: positive evidence."""
    held: set[int] = field(default_factory=set)
    """Members behind because they wait at the front of another diverging group."""

    @property
    def where(self) -> str:
        return f"{self.row.desc or 'group'} {self.row.name} collective #{self.seq}"


def _diverging_groups(dump_set: DumpSet) -> tuple[list[FrGroup], list[FrSuspect]]:
    dumps = dump_set.dumps
    if not dumps:
        return [], []
    groups = _groups(dumps, dump_set.unknown)
    fronts = [f for g in groups if (f := _wavefront(g, dumps, dump_set.unknown)) is not None]
    front_of = {f.row.name: f.seq for f in fronts}
    for front in fronts:
        front.held = {r for r in front.behind if _held_up_elsewhere(dumps[r], front, front_of)}
        front.candidates = (front.behind - front.held) | front.not_started
    by_size = sorted(fronts, key=lambda f: (int(f.row.size), f.created_ns))
    reasons = _positive(by_size, groups, dumps)
    positive = set(reasons)
    for front in by_size:
        for rank, evidence, why in _unseen_suspects(front, positive):
            reasons.setdefault(rank, FrSuspect(rank=rank, evidence=evidence, why=why))
    if not reasons:  # no rank stands out: every live rank missing where it is not held up
        for front in by_size:
            for rank in sorted(front.candidates):
                reasons.setdefault(
                    rank,
                    FrSuspect(rank=rank, evidence="missing", why=f"missing from {front.where}"),
                )
    named = set(reasons)
    culprit_rows = {
        id(_first_missed(fronts, rank))
        for rank in reasons
        if any(rank in f.candidates | f.vanished | f.unusable for f in fronts)
    }
    if not culprit_rows:
        culprit_rows = {id(f) for f in fronts if set(f.row.missing_ranks) & named}
    rows = [
        f.row.model_copy(
            update={
                "culprit": id(f) in culprit_rows,
                "missing_ranks": sorted(set(f.row.missing_ranks) | (f.unusable & named)),
            }
        )
        for f in fronts
    ]
    rows.sort(key=lambda r: (not r.culprit, len(r.missing_ranks), r.pg_id))
    return rows, list(reasons.values())


def _positive(
    fronts: list[_Front], groups: list[_Group], dumps: dict[int, RankDump]
) -> dict[int, FrSuspect]:
    """Positive evidence: the one member with a dump that did not enter its group's front
    collective, unless another rank stopped where it did. Beside members without a usable
    dump it counts only where it stopped among members that all left one (else one of those
    may have stopped it)."""
    stops = Counter(_stop(d) for d in dumps.values())
    members = {g.name: g.members for g in groups}
    reasons: dict[int, FrSuspect] = {}
    for front in fronts:
        if len(front.behind | front.not_started) != 1 or not front.candidates:
            continue
        (rank,) = front.candidates
        stop = _stop(dumps[rank])
        if stops[stop] != 1:
            continue
        if (front.vanished or front.unusable) and not _stopped_among_dumps(stop, members, dumps):
            continue  # it may have stopped on the unseen member: that one explains it
        entered = rank_ranges(
            sorted(
                _members(groups, front)
                - front.behind
                - front.not_started
                - front.unusable
                - front.vanished
            )
        )
        why = f"the only member missing from {front.where}, which ranks {entered} entered"
        reasons.setdefault(rank, FrSuspect(rank=rank, evidence="missing", why=why))
    return reasons


def _stopped_among_dumps(
    stop: tuple[str, int] | None, members: dict[str, set[int]], dumps: dict[int, RankDump]
) -> bool:
    """The rank stopped in a group whose every member left a usable dump: no member without
    one could have stopped it there (it stopped on its own: its own error, its own hang)."""
    return stop is not None and members.get(stop[0], set()) <= dumps.keys()


def _unseen_suspects(front: _Front, positive: set[int]) -> list[tuple[int, EvidenceKind, str]]:
    """Members not seen at a stalled front: suspects, unless the members behind it explain the
    stall (each waits at another group's front, or is positively a culprit). A member without
    a dump comes first (its process died or cannot run); a dump that exists but cannot be used
    is a suspect only where no other member explains the stall."""
    explained = bool(front.behind) and front.behind <= front.held | positive
    if explained or not (front.vanished or front.unusable):
        return []
    if front.vanished:
        why = f"no dump; its {front.where} stalled without it"
        return [(rank, "no_dump", why) for rank in sorted(front.vanished)]
    if front.behind - front.held:
        return []  # a live member behind explains it better than a dump we cannot read
    why = f"dump unusable; its {front.where} stalled with no usable record of it"
    return [(rank, "unusable_dump", why) for rank in sorted(front.unusable)]


def _members(groups: list[_Group], front: _Front) -> set[int]:
    return next(g.members for g in groups if g.name == front.row.name)


def _held_up_elsewhere(dump: RankDump, front: _Front, front_of: dict[str, int]) -> bool:
    """The rank stopped at the front collective of another diverging group.

    A rank stopped at a collective its group-mates already passed is not held up by them.
    """
    stop = _stop(dump)
    return stop is not None and stop[0] != front.row.name and front_of.get(stop[0]) == stop[1]


def _stop(dump: RankDump) -> tuple[str, int] | None:
    """(group, seq) where the rank stopped: the first collective it still waits in (NCCL),
    else its newest one (gloo marks failed collectives retired)."""
    return dump.waiting_in or dump.newest


def _first_missed(fronts: list[_Front], rank: int) -> _Front:
    """The group where the rank's absence is most specific: the smallest, then the earliest.

    Process groups nest (TP inside DP inside the default group): a rank missing from its TP
    collective is also missing from every enclosing group, which only looks short because of it.
    """
    return min(
        (f for f in fronts if rank in f.candidates | f.vanished | f.unusable),
        key=lambda f: (int(f.row.size), f.created_ns),
    )


def _groups(dumps: dict[int, RankDump], unknown: set[int]) -> list[_Group]:
    """Every process group by name, with its members: from pg_config, else from the entries."""
    groups: dict[str, _Group] = {}
    world = set(dumps) | unknown
    merged: set[int] = set()  # ids of the shared configs already merged: again adds nothing
    for dump in dumps.values():
        if id(dump.config) not in merged:
            merged.add(id(dump.config))
            for member in dump.config.groups:
                group = groups.setdefault(member.name, _Group(member.name, member.desc, set()))
                group.members.update(member.ranks)
                world.update(member.ranks)
        for name, progress in dump.groups.items():
            group = groups.setdefault(name, _Group(name, progress.desc, set()))
            group.desc = group.desc or progress.desc
            if name not in dump.config.names:
                group.members.add(dump.rank)
    world_size = max(world) + 1
    for group in groups.values():
        if group.desc == DEFAULT_GROUP_DESC:
            group.members.update(range(world_size))
    return sorted(groups.values(), key=lambda g: (len(g.name), g.name))


def _wavefront(group: _Group, dumps: dict[int, RankDump], unknown: set[int]) -> _Front | None:
    progress = {
        r: dumps[r].groups[group.name]
        for r in sorted(group.members)
        if r in dumps and group.name in dumps[r].groups
    }
    if not progress:
        return None
    front = max(p.entered for p in progress.values())
    behind = {
        r
        for r in group.members
        if r in dumps
        and (progress[r].entered if r in progress else -1) < front
        and not _lost_history(dumps[r], group.name)
    }
    started = _not_started(progress, front)
    unfinished = behind or started or _stopped_at(group.name, front, dumps, progress)
    unseen = {r for r in group.members if r not in dumps} if unfinished else set()
    vanished, unusable = unseen - unknown, unseen & unknown
    missing = behind | vanished | started
    if not missing and not unusable:
        return None
    at_front = [p.last for p in progress.values() if p.last.seq == front]
    row = FrGroup(
        pg_id=group.name,
        name=group.name,
        desc=group.desc,
        op=at_front[0].op if at_front else "",
        size=str(len(group.members)),
        dtype=at_front[0].dtype if at_front else "",
        missing_ranks=sorted(missing),
    )
    created = min((e.created_ns for e in at_front), default=0)
    return _Front(row, front, behind, vanished, unusable, started, created)


def _stopped_at(name: str, seq: int, dumps: dict[int, RankDump], ranks: Iterable[int]) -> bool:
    """Some of ``ranks`` stopped at this collective. When all moved past it, it finished, and
    members without a dump took part in it: they are not missing from it."""
    return any(_stop(dumps[r]) == (name, seq) for r in ranks)


def _lost_history(dump: RankDump, name: str) -> bool:
    """No record of the group survived the ring buffer: the rank's position there is unknown."""
    return dump.wrapped and name not in dump.groups


def _not_started(progress: dict[int, GroupProgress], front: int) -> set[int]:
    """NCCL with timing: at the front, ranks whose collective was never started on the GPU."""
    states = {
        rank: p.last.state for rank, p in progress.items() if p.entered == front == p.last.seq
    }
    if "started" not in states.values():
        return set()
    return {r for r, state in states.items() if state == "scheduled"}
