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

from pytest_faultloop.analyzers.fr.dumps import (
    DumpSet,
    GroupProgress,
    RankDump,
    load_dumps,
)
from pytest_faultloop.analyzers.fr.nvrx_table import fr_table
from pytest_faultloop.analyzers.rank_ranges import rank_ranges
from pytest_faultloop.models import FrAnalysis, FrGroup, FrSuspect

ANALYZER = "builtin"
DEFAULT_GROUP_DESC = "default_pg"


@dataclass
class _Group:
    name: str
    desc: str
    members: set[int]


def analyze_fr(path: Path, pattern: str = "_dump_*") -> FrAnalysis:
    """Analyse the dumps under ``path``; never raises on bad or missing dumps."""
    dump_set = load_dumps(Path(path), pattern)
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
    not_started: set[int]
    created_ns: int
    """When the front collective was first created: orders groups of the same size."""
    candidates: set[int] = field(default_factory=set)
    """Members with a dump that are missing and not held up elsewhere: positive evidence."""


def _diverging_groups(dump_set: DumpSet) -> tuple[list[FrGroup], list[FrSuspect]]:
    dumps = dump_set.dumps
    if not dumps:
        return [], []
    groups = _groups(dumps, dump_set.unknown)
    fronts = [f for g in groups if (f := _wavefront(g, dumps, dump_set.unknown)) is not None]
    front_of = {f.row.name: f.seq for f in fronts}
    reasons: dict[int, FrSuspect] = {}
    for front in fronts:
        held = {r for r in front.behind if _held_up_elsewhere(dumps[r], front, front_of)}
        front.candidates = (front.behind - held) | front.not_started
    stops = Counter(_stop(d) for d in dumps.values())
    by_size = sorted(fronts, key=lambda f: (int(f.row.size), f.created_ns))
    for front in by_size:
        where = f"{front.row.desc or 'group'} {front.row.name} collective #{front.seq}"
        entered = rank_ranges(
            sorted(_members(groups, front) - front.behind - front.not_started - front.vanished)
        )
        if front.vanished:
            for rank in sorted(front.vanished):
                reasons.setdefault(
                    rank,
                    FrSuspect(
                        rank=rank,
                        evidence="no_dump",
                        why=f"no dump; its {where} stalled without it",
                    ),
                )
        elif (
            len(front.behind | front.not_started) == 1
            and front.candidates
            and stops[_stop(dumps[next(iter(front.candidates))])] == 1
        ):
            (rank,) = front.candidates
            reasons.setdefault(
                rank,
                FrSuspect(
                    rank=rank,
                    evidence="missing",
                    why=f"the only member missing from {where}, which ranks {entered} entered",
                ),
            )
    if not reasons:  # no rank stands out: every live rank missing where it is not held up
        for front in by_size:
            where = f"{front.row.desc or 'group'} {front.row.name} collective #{front.seq}"
            for rank in sorted(front.candidates):
                reasons.setdefault(
                    rank, FrSuspect(rank=rank, evidence="missing", why=f"missing from {where}")
                )
    culprit_rows = {
        id(_first_missed(fronts, rank))
        for rank in reasons
        if any(rank in f.candidates | f.vanished for f in fronts)
    }
    if not culprit_rows:
        culprit_rows = {id(f) for f in fronts if set(f.row.missing_ranks) & set(reasons)}
    rows = [f.row.model_copy(update={"culprit": id(f) in culprit_rows}) for f in fronts]
    rows.sort(key=lambda r: (not r.culprit, len(r.missing_ranks), r.pg_id))
    return rows, list(reasons.values())


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
        (f for f in fronts if rank in f.candidates | f.vanished),
        key=lambda f: (int(f.row.size), f.created_ns),
    )


def _groups(dumps: dict[int, RankDump], unknown: set[int]) -> list[_Group]:
    """Every process group by name, with its members: from pg_config, else from the entries."""
    groups: dict[str, _Group] = {}
    world = set(dumps) | unknown
    for dump in dumps.values():
        for name, (desc, ranks) in dump.config.items():
            group = groups.setdefault(name, _Group(name, desc, set()))
            group.members.update(ranks)
            world.update(ranks)
        for name, progress in dump.groups.items():
            group = groups.setdefault(name, _Group(name, progress.desc, set()))
            group.desc = group.desc or progress.desc
            if name not in dump.config:
                group.members.add(dump.rank)
    world_size = max(world) + 1
    for group in groups.values():
        if group.desc == DEFAULT_GROUP_DESC:
            group.members.update(range(world_size))
    return sorted(groups.values(), key=lambda g: (len(g.name), g.name))


def _wavefront(group: _Group, dumps: dict[int, RankDump], unknown: set[int]) -> _Front | None:
    progress = {
        r: dumps[r].groups[group.name]
        for r in group.members
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
    absent = {r for r in group.members if r not in dumps and r not in unknown}
    vanished = absent if unfinished else set()
    missing = behind | vanished | started
    if not missing:
        return None
    at_front = [
        p.last for p in progress.values() if p.last and p.last.get("collective_seq_id") == front
    ]
    last = at_front[0] if at_front else {}
    row = FrGroup(
        pg_id=group.name,
        name=group.name,
        desc=group.desc,
        op=str(last.get("profiling_name", "")),
        size=str(len(group.members)),
        dtype=_first(last.get("input_dtypes")),
        missing_ranks=sorted(missing),
    )
    created = min((int(e.get("time_created_ns") or 0) for e in at_front), default=0)
    return _Front(row, front, behind, vanished, started, created)


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
        rank: p.last.get("state")
        for rank, p in progress.items()
        if p.entered == front and p.last is not None and p.last.get("collective_seq_id") == front
    }
    if "started" not in states.values():
        return set()
    return {r for r, state in states.items() if state == "scheduled"}


def _first(values: object) -> str:
    if isinstance(values, list) and values:
        counts = Counter(str(v) for v in values)
        return counts.most_common(1)[0][0]
    return ""
