"""The built-in flight-recorder analyzer: where collectives diverge, and who held them up.

Per process group (matched by name across ranks) the wavefront is the highest collective any
member entered; members that never entered it are missing from it. A missing rank that is
itself waiting inside a collective of another group is collateral (held up elsewhere); a
missing rank that waits nowhere, or left no dump, is the culprit. Example: rank 1 never enters
its tensor-parallel all_gather; rank 0 waits in that all_gather, so the default group looks
short of ranks 0 and 1, but only the TP group holds the culprit.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from pytest_faultloop.analyzers.fr_dumps import (
    DumpSet,
    GroupProgress,
    RankDump,
    load_dumps,
)
from pytest_faultloop.analyzers.fr_report import fr_table
from pytest_faultloop.models import FrAnalysis, FrGroup

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
    groups, suspects = _diverging_groups(dump_set)
    analysis = FrAnalysis(
        analyzer=ANALYZER,
        suspects=suspects,
        groups=groups,
        dumps_read=len(dump_set.dumps),
        unreadable=dump_set.unreadable,
    )
    return analysis.model_copy(update={"table": fr_table(analysis)})


@dataclass
class _Front:
    """A group whose members diverge at its wavefront."""

    row: FrGroup
    unexplained: set[int]
    """Missing ranks that wait nowhere else (or left no dump): culprit candidates."""
    created_ns: int
    """When the front collective was first created: orders groups of the same size."""


def _diverging_groups(dump_set: DumpSet) -> tuple[list[FrGroup], list[int]]:
    dumps = dump_set.dumps
    if not dumps:
        return [], []
    fronts = [f for g in _groups(dumps) if (f := _wavefront(g, dumps)) is not None]
    suspects: set[int] = set().union(*(f.unexplained for f in fronts))
    culprit_rows = {id(_first_missed(fronts, rank)) for rank in suspects}
    if not suspects:
        suspects = _fallback_suspects([f.row for f in fronts])
        culprit_rows = {id(f) for f in fronts if set(f.row.missing_ranks) & suspects}
    rows = [f.row.model_copy(update={"culprit": id(f) in culprit_rows}) for f in fronts]
    rows.sort(key=lambda r: (not r.culprit, len(r.missing_ranks), r.pg_id))
    return rows, sorted(suspects)


def _first_missed(fronts: list[_Front], rank: int) -> _Front:
    """The group where the rank's absence is most specific: the smallest, then the earliest.

    Process groups nest (TP inside DP inside the default group): a rank missing from its TP
    collective is also missing from every enclosing group, which only looks short because of it.
    """
    return min(
        (f for f in fronts if rank in f.unexplained),
        key=lambda f: (int(f.row.size), f.created_ns),
    )


def _groups(dumps: dict[int, RankDump]) -> list[_Group]:
    """Every process group by name, with its members: from pg_config, else from the entries."""
    groups: dict[str, _Group] = {}
    world = set(dumps)
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


def _wavefront(group: _Group, dumps: dict[int, RankDump]) -> _Front | None:
    progress = {
        r: dumps[r].groups[group.name]
        for r in group.members
        if r in dumps and group.name in dumps[r].groups
    }
    if not progress:
        return None
    front = max(p.entered for p in progress.values())
    if all(p.completed >= front for p in progress.values()):
        return None  # everyone it reached got through it: nobody is missing
    without_dump = {r for r in group.members if r not in dumps}
    behind = {
        r
        for r in group.members
        if r in dumps
        and (progress[r].entered if r in progress else -1) < front
        and not _lost_history(dumps[r], group.name)
    }
    started = _not_started(progress, front)
    missing = behind | without_dump | started
    if not missing:
        return None
    unexplained = {r for r in behind if not _waiting_elsewhere(dumps[r], group.name)}
    at_front = [
        p.last
        for p in progress.values()
        if p.last and p.last.get("collective_seq_id") == front
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
    return _Front(row, unexplained | without_dump | started, created)


def _lost_history(dump: RankDump, name: str) -> bool:
    """No record of the group survived the ring buffer: the rank's position there is unknown."""
    return dump.wrapped and name not in dump.groups


def _waiting_elsewhere(dump: RankDump, name: str) -> bool:
    return dump.waiting_in is not None and dump.waiting_in[0] != name


def _not_started(progress: dict[int, GroupProgress], front: int) -> set[int]:
    """NCCL with timing: at the front, ranks whose collective was never started on the GPU."""
    states = {
        rank: p.last.get("state")
        for rank, p in progress.items()
        if p.entered == front
        and p.last is not None
        and p.last.get("collective_seq_id") == front
    }
    if "started" not in states.values():
        return set()
    return {r for r, state in states.items() if state == "scheduled"}


def _fallback_suspects(rows: list[FrGroup]) -> set[int]:
    """Everyone missing is waiting somewhere (a wait cycle): blame the smallest missing sets."""
    sets = [frozenset(r.missing_ranks) for r in rows if r.missing_ranks]
    minimal = [s for s in sets if not any(other < s for other in sets)]
    return set().union(*minimal) if minimal else set()


def _first(values: object) -> str:
    if isinstance(values, list) and values:
        counts = Counter(str(v) for v in values)
        return counts.most_common(1)[0][0]
    return ""
