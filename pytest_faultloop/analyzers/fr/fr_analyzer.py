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
cause; ranks whose own records say they completed where they stopped (NCCL) are no cascade.

A member with no dump, next to peers that wrote theirs, could not write one: its process died
or cannot run (killed, crashed, stopped, GIL held), or a launcher's teardown killed it before
it could. Beside one, a live member behind is named only where its own record shows it stopped
on its own: it completed the collective its group-mates passed (NCCL), or (gloo, which retires
a failed collective like a finished one) more of them passed it than left no dump. Otherwise
the members without a dump are the suspects, reported apart as "no dump": the one behind may
have got an error from a peer that died inside the collective. A dump that exists but cannot
be used (empty, truncated, refused) is the rank's silence: its rank is unknown, and a suspect
only by its peers' records, where its group stalled without it and nothing already named
explains the stall (a member without a dump explains it first). Groups are read smallest
first, so a suspect named in a tensor-parallel group explains the default group's stall and
spares the members missing there.
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
    odd: dict[int, str] = field(default_factory=dict)
    """Members that entered the front collective as another operation or with other input
    sizes than most members entered it (a collective mismatch), and how."""

    @property
    def accused(self) -> set[int]:
        """Members this group's own records hold against: missing, unseen or odd."""
        return self.candidates | self.vanished | self.unusable | self.odd.keys()

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
    reasons = {
        rank: FrSuspect(rank=rank, evidence="mismatch", why=why)
        for front in by_size
        for rank, why in sorted(front.odd.items())
    }
    for rank, reason in _positive(by_size, groups, dumps).items():
        reasons.setdefault(rank, reason)
    for front in by_size:  # smallest first: a suspect named there explains enclosing groups
        for rank, evidence, why in _unseen_suspects(front, set(reasons)):
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
        if any(rank in f.accused for f in fronts)
    }
    if not culprit_rows:
        culprit_rows = {id(f) for f in fronts if set(f.row.missing_ranks) & named}
    rows = [
        f.row.model_copy(
            update={
                "culprit": id(f) in culprit_rows,
                "missing_ranks": sorted(
                    set(f.row.missing_ranks) | (f.unusable & named) | (f.odd.keys() & named)
                ),
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
        passed = _passed(rank, stop, members, dumps)
        completed = bool(passed) and _completed_there(dumps[rank], stop)
        if stops[stop] != 1 and not completed:
            continue  # stopped beside others: the cascade of a failure
        if (
            (front.vanished or front.unusable)
            and not completed
            and not _stopped_among_dumps(stop, members, dumps)
            and not _outnumber_the_unseen(passed, stop, members, dumps)
        ):
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


def _passed(
    rank: int,
    stop: tuple[str, int] | None,
    members: dict[str, set[int]],
    dumps: dict[int, RankDump],
) -> set[int]:
    """The rank's group-mates with a dump that entered a later collective of the group where
    it stopped: for them that collective finished, with every member's part in it."""
    if stop is None:
        return set()
    name, seq = stop
    return {
        r
        for r in members.get(name, set()) & dumps.keys()
        if r != rank and name in dumps[r].groups and dumps[r].groups[name].entered > seq
    }


def _completed_there(dump: RankDump, stop: tuple[str, int] | None) -> bool:
    """The rank's own record says it completed the collective where it stopped (NCCL's
    ``completed`` state; gloo retires a failed collective like a finished one): it stopped
    between collectives on its own, nobody held it there."""
    if stop is None:
        return False
    own = dump.groups[stop[0]]
    return own.completed >= stop[1] and own.last.state == "completed"


def _outnumber_the_unseen(
    passed: set[int],
    stop: tuple[str, int] | None,
    members: dict[str, set[int]],
    dumps: dict[int, RankDump],
) -> bool:
    """With gloo's record, the members that passed the rank's collective outnumber those
    without a usable dump. A member dying just after its part can fail a collective for a few
    peers while others finish it, so a rank behind beside a lost member may be its casualty;
    but where most members finished it, the lone rank behind stopped on its own and the
    missing members are what a launcher's teardown leaves (on real framework runs the ranks
    that raised first write dumps, the launcher kills the rest before they can)."""
    if stop is None or not passed:
        return False
    return len(passed) > len(members.get(stop[0], set()) - dumps.keys())


def _unseen_suspects(front: _Front, named: set[int]) -> list[tuple[int, EvidenceKind, str]]:
    """Members not seen at a stalled front: suspects, unless what is already known explains
    the stall: every member behind waits at another group's front or is a suspect, and some
    member missing here is a suspect already (named in a smaller group, or positively).

    A member without a dump comes first: it could not write one (its process died or cannot
    run), where one whose dump exists could still write. A dump that cannot be used (empty,
    truncated, refused) is the rank's silence, not evidence; by its peers' records, which show
    the front stalled without it, it is a suspect only where no other member explains the
    stall."""
    unseen = front.vanished | front.unusable
    explained_by = front.held | named
    if not unseen or (front.behind <= explained_by and (front.behind or unseen & named)):
        return []
    if front.vanished:
        why = f"no dump; its {front.where} stalled without it"
        return [(rank, "no_dump", why) for rank in sorted(front.vanished)]
    if front.behind - explained_by:
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
        (f for f in fronts if rank in f.accused),
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
    odd = _odd_ones_out(group, front, progress)
    if not missing and not unusable and not odd:
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
    return _Front(row, front, behind, vanished, unusable, started, created, odd=odd)


def _odd_ones_out(group: _Group, front: int, progress: dict[int, GroupProgress]) -> dict[int, str]:
    """Members that entered the front collective as another operation, or with other input
    sizes, than most members entered it (all-to-all's sizes differ by design): a collective
    mismatch, with how each entered it. Only where one way of entering it is held by more
    members than any other, and by two at least."""
    ways: dict[tuple[str, str], set[int]] = {}
    for rank, p in progress.items():
        if p.last.seq == front and p.last.op:
            sizes = "" if _uneven_by_design(p.last.op) else p.last.sizes
            ways.setdefault((p.last.op, sizes), set()).add(rank)
    if len(ways) < 2:
        return {}
    ranked = sorted(ways.items(), key=lambda kv: len(kv[1]), reverse=True)
    (common, most), (_, runner_up) = ranked[0], ranked[1]
    if len(most) < 2 or len(most) == len(runner_up):
        return {}
    where = f"{group.desc or 'group'} {group.name} collective #{front}"
    return {
        rank: f"entered {where} as {_way(way)}, where ranks {rank_ranges(sorted(most))} "
        f"entered it as {_way(common)}"
        for way, ranks in ranked[1:]
        for rank in ranks
    }


def _uneven_by_design(op: str) -> bool:
    return "all_to_all" in op or "alltoall" in op


def _way(way: tuple[str, str]) -> str:
    op, sizes = way
    return f"{op} {sizes}".strip()


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
