"""Pools: ordered ``FAULT_TYPE:RANK:ITER:NODES`` entries read from ``<name>.pool`` files or POOL,
and which of them (and which experiments) a run selects.

RANK is one rank (``GPU_SLEEP:1:5:2``) or several ranks joined by ``+`` in ascending order, each
with an optional ``@SECONDS`` offset after FAULT_DELAY (``GPU_ERROR:12+14@3:5:4``: ranks 12 and
14, 14 firing 3 s later); NODE_KILL loses the node of each listed rank (one rank per node).
A bad entry raises :class:`PoolError` naming ``file:line``, the token and the fix: an unknown
fault type, a bad number, a rank listed twice or out of order, an offset that is not a
non-negative number of seconds, a rank outside ``[0, NODES*GPUS_PER_NODE)``, NODES below the
workload's minimum, a duplicate entry.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from pytest_faultloop.inputs.cases import CASE_FILE
from pytest_faultloop.inputs.settings import Settings
from pytest_faultloop.jobs.workload.registry import Workload
from pytest_faultloop.models import Experiment, Overrides, PoolEntry
from pytest_faultloop.models.errors import ConfigError, PoolError
from pytest_faultloop.models.faults import FaultType
from pytest_faultloop.store.text_files import NotUtf8, read_utf8

POOL_SUFFIX = ".pool"
_TOKEN = re.compile(r"\S+")


@dataclass(frozen=True)
class PooledEntry:
    """An entry with the place that listed it."""

    entry: PoolEntry
    source: str
    line: int
    trials: int | None = None
    """``ENTRY*N``: this entry's own trial count (else the run's)."""
    workload: str | None = None
    """``ENTRY@workload=NAME``: the workload this entry runs on (else the run's)."""

    @property
    def key(self) -> str:
        """The key of the experiment it makes (``SIGKILL:2:5:1@workload=lightning``)."""
        return self.entry.key + (f"@{WORKLOAD_VARIANT}{self.workload}" if self.workload else "")


@dataclass(frozen=True)
class PoolRules:
    """What a valid entry must satisfy for the selected workload."""

    gpus_per_node: int
    min_nodes: int
    workload: str
    refusal: Callable[[FaultType, int, tuple[int, ...]], str | None] | None = None
    """Why the workload cannot run a fault type on a number of nodes hitting ranks of these
    local ranks (its framework's launcher cannot express it); None: it runs every entry."""
    choose: Callable[[str], Workload] | None = None
    """The registered workload an ``ENTRY@workload=NAME`` names, if the run can use it
    (ConfigError if not); None: entries may not name one."""

    def of(self, workload: Workload) -> PoolRules:
        """The rules of an entry that runs on ``workload``."""
        return PoolRules(self.gpus_per_node, workload.min_nodes, workload.name, workload.refusal)


WORKLOAD_VARIANT = "workload="
"""What follows an entry's ``@`` to run it on another registered workload."""


def parse_entry(token: str) -> PoolEntry:
    """``GPU_SLEEP:1:5:2``, ``GPU_ERROR:12+14@3:5:4`` -> PoolEntry; raises ValueError with the
    reason."""
    parts = token.split(":")
    if len(parts) != 4:
        raise ValueError("expected FAULT_TYPE:RANK:ITER:NODES (four fields separated by ':')")
    fault, ranks, *numbers = parts
    try:
        fault_type = FaultType(fault)
    except ValueError:
        valid = ", ".join(f.value for f in FaultType)
        raise ValueError(f"unknown fault type {fault!r} (valid: {valid})") from None
    if not re.search(r"[+@]", ranks):
        _number("RANK", ranks)
    values = [_number(field, text) for field, text in zip(("ITER", "NODES"), numbers, strict=True)]
    iteration, nodes = values
    if nodes < 1:
        raise ValueError("NODES must be at least 1")
    try:
        return PoolEntry.of(fault_type, ranks, iteration, nodes)
    except ValidationError as exc:  # pragma: no cover - the checks above cover the model's rules
        raise ValueError(exc.errors()[0]["msg"]) from None


def _number(field: str, text: str) -> int:
    if not re.fullmatch(r"\d+", text):
        raise ValueError(f"{field} must be a non-negative integer, got {text!r}")
    return int(text)


def parse_pool(text: str, source: str, rules: PoolRules) -> list[PooledEntry]:
    """Parse and validate a whole pool; the first bad token raises PoolError naming its place."""
    entries: list[PooledEntry] = []
    seen: dict[str, int] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        for match in _TOKEN.finditer(raw.split("#", 1)[0]):
            token = match.group()
            where = f"{source}:{lineno}: {token!r}"
            try:
                text, trials = split_trials(token)
                text, workload = split_workload(text)
                workload = None if workload == rules.workload else workload
                entry = parse_entry(text)
                check_rules(entry, _rules_of(rules, workload) if workload else rules)
            except (ValueError, ConfigError) as exc:
                raise PoolError(f"{where}: {exc}") from None
            pooled = PooledEntry(entry, source, lineno, trials, workload)
            if pooled.key in seen:
                raise PoolError(
                    f"{where}: duplicate entry (first listed on line {seen[pooled.key]}); "
                    "remove one of them"
                )
            seen[pooled.key] = lineno
            entries.append(pooled)
    return entries


def split_workload(text: str) -> tuple[str, str | None]:
    """``SIGKILL:2:5:1@workload=lightning`` -> the entry and the workload it names (None
    without ``@`` after NODES: a rank's ``@`` offset comes before it)."""
    head, colon, last = text.rpartition(":")
    nodes, at, variant = last.partition("@")
    if not at:
        return text, None
    name = variant.removeprefix(WORKLOAD_VARIANT)
    if not variant.startswith(WORKLOAD_VARIANT) or not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise ValueError(
            f"after NODES, '@' takes {WORKLOAD_VARIANT}NAME (a registered workload), "
            f"got {variant!r}"
        )
    return head + colon + nodes, name


def _rules_of(rules: PoolRules, workload: str) -> PoolRules:
    if rules.choose is None:
        raise ValueError(f"{WORKLOAD_VARIANT}{workload}: entries here cannot name a workload")
    return rules.of(rules.choose(workload))


def split_trials(token: str) -> tuple[str, int | None]:
    """``GPU_SLEEP:1:5:2*5`` -> the entry and its trial count (None without ``*N``)."""
    text, star, count = token.partition("*")
    if not star:
        return text, None
    if not re.fullmatch(r"[1-9]\d*", count):
        raise ValueError(f"trial count after '*' must be a positive integer, got {count!r}")
    return text, int(count)


def check_rules(entry: PoolEntry, rules: PoolRules) -> None:
    """Raise ValueError when ``entry`` does not fit the workload's rules."""
    world = entry.nodes * rules.gpus_per_node
    for rank in entry.ranks:
        if rank >= world:
            raise ValueError(
                f"rank {rank} is outside [0, {world}) for {entry.nodes} node(s) x "
                f"GPUS_PER_NODE={rules.gpus_per_node}"
            )
    hit = entry.nodes_hit(rules.gpus_per_node)
    if entry.fault is FaultType.NODE_KILL and len(hit) < len(entry.ranks):
        raise ValueError(
            f"NODE_KILL ranks {entry.rank_text} share a node (GPUS_PER_NODE="
            f"{rules.gpus_per_node}): name one rank per node to lose"
        )
    if entry.nodes < rules.min_nodes:
        raise ValueError(
            f"NODES={entry.nodes} is below workload {rules.workload!r}'s minimum of "
            f"{rules.min_nodes} node(s)"
        )
    local_ranks = tuple(rank % rules.gpus_per_node for rank in entry.ranks)
    refused = rules.refusal(entry.fault, entry.nodes, local_ranks) if rules.refusal else None
    if refused:
        raise ValueError(f"workload {rules.workload!r} refuses it: {refused}")


def available_pools(directory: Path) -> dict[str, Path]:
    """Pool name -> file, for every ``*.pool`` in the experiments directory."""
    return {p.stem: p for p in sorted(directory.glob(f"*{POOL_SUFFIX}"))}


def read_pool_file(path: Path, rules: PoolRules, display: str | None = None) -> list[PooledEntry]:
    shown = display or str(path)
    try:
        text = read_utf8(path)
    except OSError as exc:
        raise PoolError(f"{shown}: cannot read pool file: {exc.strerror}") from None
    except NotUtf8 as exc:
        raise PoolError(f"{shown}:{exc.line}: {exc}") from None
    return parse_pool(text, shown, rules)


def pool_names(requested: list[str]) -> list[str]:
    """Split comma lists, keep order, drop repeats."""
    names: list[str] = []
    for item in requested:
        for name in (n.strip() for n in item.split(",")):
            if name and name not in names:
                names.append(name)
    return names


def unknown_pool(name: str, available: dict[str, Path]) -> PoolError:
    listing = ", ".join(available) or "(none found)"
    return PoolError(
        f"unknown pool {name!r}: available pools are {listing} "
        "(files <name>.pool in the experiments directory, or the path of a .pool file)"
    )


# --- selection: which pools and experiments a run collects ---------------------------------------

POOL_OVERRIDE_NAME = "POOL"
"""The node name of the pool given by the POOL environment variable."""


def entry_to_experiment(
    pooled: PooledEntry,
    *,
    workload: str,
    gpus_per_node: int,
    pool: str,
    priority: int,
    trials: int = 1,
) -> Experiment:
    return Experiment(
        entry=pooled.entry,
        workload=pooled.workload or workload,
        overrides=Overrides(workload=pooled.workload) if pooled.workload else None,
        gpus_per_node=gpus_per_node,
        pool=pool,
        source=pooled.source,
        line=pooled.line,
        priority=priority,
        trials=pooled.trials or trials,
    )


@dataclass(frozen=True)
class Invocation:
    """How pytest was started, as the pools read it: the directory it was started in, the
    run's root, its arguments, and under ``--lf`` the node ids of the last run's failures."""

    directory: Path
    rootpath: Path
    args: tuple[str, ...]
    last_failed: tuple[str, ...] | None = None
    """The failing node ids in pytest's cache (None: no ``--lf``, or the cache is off)."""


class PoolSelection:
    """The pools a run selects and their experiments, each pool parsed once (the header and
    collection share them). In a re-analysis the session's stored experiments stand in for
    the pools (``stored``)."""

    def __init__(
        self,
        invocation: Invocation,
        settings: Settings,
        sources: dict[str, str],
        rules: PoolRules,
        priority_of: Callable[[str], int],
        stored: Callable[[], dict[str, list[Experiment]] | None],
        pool_dir: Path,
    ) -> None:
        self.invocation = invocation
        self.pool_dir = pool_dir
        """The experiments directory: where pools given by name are."""
        self.settings = settings
        self.sources = sources
        self.rules = rules
        self.priority_of = priority_of
        self.stored = stored
        self.replays_only = replays_only(invocation)
        """No argument names pools: the run replays stored cases only."""
        self._parsed: dict[str, list[PooledEntry]] = {}
        self._last_failed: LastFailedPools | None = None

    @property
    def named(self) -> bool:
        """Whether the pools were chosen explicitly (option, POOL, a ``.pool`` argument)."""
        return (
            "pools" in self.sources
            or self.settings.pool_override is not None
            or bool(self.pool_args())
        )

    def pool_args(self) -> list[Path]:
        return [
            Path(a.split("::", 1)[0])
            for a in self.invocation.args
            if Path(a.split("::", 1)[0]).suffix == POOL_SUFFIX
        ]

    def files(self, directory: Path) -> list[tuple[str, Path]]:
        """``(name, file)`` of each selected pool collected in ``directory`` (a pool file in
        its own directory), in selection order."""
        here = directory.resolve()
        return [(name, path) for name, path in self.selected() if path.parent.resolve() == here]

    def selected(self) -> list[tuple[str, Path]]:
        """``(name, file)`` of every selected pool: a re-analysis' stored pools, POOL, the
        ``.pool`` arguments, or the ``--faultloop-pool`` names (in the experiments directory)
        and paths; PoolError for one that does not exist."""
        stored = self.stored()
        if self.replays_only:
            return []
        if stored is not None:
            return [
                (
                    name,
                    self.pool_dir
                    / (name if name == POOL_OVERRIDE_NAME else f"{name}{POOL_SUFFIX}"),
                )
                for name in stored
            ]
        if self.settings.pool_override is not None:
            return [(POOL_OVERRIDE_NAME, self.pool_dir / POOL_OVERRIDE_NAME)]
        if "pools" not in self.sources and self.pool_args():
            return [(p.stem, p) for p in self._resolved_pool_args()]
        if "pools" not in self.sources and self.last_failed().pools:
            return self.last_failed().pools
        available = available_pools(self.pool_dir)
        selected = []
        for name in pool_names(self.settings.pools):
            if name.endswith(POOL_SUFFIX):
                path = self._pool_file(name)
                selected.append((path.stem, path))
            elif name in available:
                selected.append((name, available[name]))
            else:
                raise unknown_pool(name, available)
        return selected

    def last_failed(self) -> LastFailedPools:
        """With ``--lf`` and no pool named: the pools of the last run's failing cells (read
        once)."""
        if self._last_failed is None:
            self._last_failed = last_failed_pools(self.invocation, self.pool_dir)
        return self._last_failed

    def _pool_file(self, name: str) -> Path:
        """A pool given to ``--faultloop-pool`` by its path (PoolError when it is no file)."""
        path = Path(self.invocation.directory, name).expanduser().resolve()
        if not path.is_file():
            raise PoolError(f"--faultloop-pool {name}: no such pool file ({path})")
        return path

    def pool_files_outside(self) -> list[Path]:
        """Pools given to ``--faultloop-pool`` by a path pytest does not collect (it collects
        only below its arguments)."""
        if "pools" not in self.sources:
            return []
        roots = [p.resolve() for p in arg_paths(self.invocation)]
        paths = [
            self._pool_file(n) for n in pool_names(self.settings.pools) if n.endswith(POOL_SUFFIX)
        ]
        return [p for p in paths if not any(p == r or r in p.parents for r in roots)]

    def _resolved_pool_args(self) -> list[Path]:
        here = self.invocation.directory
        return [(p if p.is_absolute() else here / p).resolve() for p in self.pool_args()]

    def entries(self, pool_name: str, path: Path) -> list[PooledEntry]:
        """A pool's validated entries (parsed once per run)."""
        if pool_name not in self._parsed:
            if pool_name == POOL_OVERRIDE_NAME and self.settings.pool_override is not None:
                entries = parse_pool(self.settings.pool_override, "POOL (environment)", self.rules)
            elif pool_name == POOL_OVERRIDE_NAME and self.last_failed().pool_entries:
                text = " ".join(self.last_failed().pool_entries)
                entries = parse_pool(text, "POOL (the last run's failing entries)", self.rules)
            else:
                entries = read_pool_file(
                    path, self.rules, display_path(self.invocation.rootpath, path)
                )
            self._parsed[pool_name] = entries
        return self._parsed[pool_name]

    def experiments(self, pool_name: str, path: Path) -> list[Experiment]:
        stored = self.stored()
        if stored is not None and pool_name in stored:
            return stored[pool_name]
        return [
            entry_to_experiment(
                pooled,
                workload=self.rules.workload,
                gpus_per_node=self.rules.gpus_per_node,
                pool=pool_name,
                priority=self.priority_of(pooled.key),
                trials=self.settings.trials,
            )
            for pooled in self.entries(pool_name, path)
        ]

    def requested_keys(self) -> tuple[list[str], str]:
        """The keys the explicitly named pools list, and the pools' names (for a
        re-analysis' check); raises PoolError for a bad pool."""
        selected = [(p.stem, p) for p in self._resolved_pool_args()]
        if "pools" in self.sources or self.settings.pool_override is not None:
            selected += [s for s in self.selected() if s not in selected]
        keys = [pooled.key for name, path in selected for pooled in self.entries(name, path)]
        return keys, ", ".join(sorted({name for name, _ in selected}))

    def describe(self) -> tuple[str, str]:
        """The header's pool names and experiment count."""
        stored = self.stored()
        if self.replays_only:
            return "none", "stored cases: replay, no jobs"
        if stored is not None:
            count = sum(len(experiments) for experiments in stored.values())
            return ",".join(stored), f"{count} experiments stored in the session"
        try:
            selected = self.selected()
            keys = {pooled.key for name, path in selected for pooled in self.entries(name, path)}
        except PoolError:
            return ",".join(
                pool_names(self.settings.pools)
            ), "invalid pool: see the collection error"
        if self.settings.pool_override is not None:
            return "POOL (environment)", f"{len(keys)} experiments"
        names = ",".join(name for name, _ in selected)
        if "pools" not in self.sources and not self.pool_args() and self.last_failed().pools:
            names += " (--lf: the pools of the last run's failures)"
        return names, f"{len(keys)} experiments"


@dataclass(frozen=True)
class LastFailedPools:
    """The pools ``--lf`` reruns when no pool is named: those the last run's failing cells
    (pytest's ``cache/lastfailed``) are in, so ``pytest experiments/ --lf`` reruns the pool
    last run, not the default one."""

    pools: list[tuple[str, Path]]
    """``(name, file)`` of each such pool in the experiments directory, POOL's included."""
    pool_entries: list[str]
    """The failing entries of a run whose pool was POOL (``experiments/POOL::KEY::...``)."""


def last_failed_pools(invocation: Invocation, pool_dir: Path) -> LastFailedPools:
    """Nothing unless ``--lf`` is given (and pytest's cache is on)."""
    pools: list[tuple[str, Path]] = []
    entries: list[str] = []
    if invocation.last_failed is None:
        return LastFailedPools(pools, entries)
    here = pool_dir.resolve()
    for nodeid in invocation.last_failed:
        file, _, rest = str(nodeid).partition("::")
        path = (invocation.rootpath / file).resolve()
        if path.parent != here or not rest:
            continue
        if path.name == POOL_OVERRIDE_NAME:
            key = re.sub(r"\[[^]]*\]$", "", rest.split("::")[0])  # a perturbed copy's own
            if key not in entries:
                entries.append(key)
        elif path.suffix == POOL_SUFFIX and path.is_file():
            pool = (path.stem, path)
            if pool not in pools:
                pools.append(pool)
    if entries:
        pools.append((POOL_OVERRIDE_NAME, pool_dir / POOL_OVERRIDE_NAME))
    return LastFailedPools(pools, entries)


def display_path(rootpath: Path, path: Path) -> str:
    """``path`` relative to the root directory when under it (for messages)."""
    try:
        return str(path.relative_to(rootpath))
    except ValueError:
        return str(path)


def arg_paths(invocation: Invocation) -> list[Path]:
    paths = []
    for arg in invocation.args:
        path = Path(arg.split("::", 1)[0])
        if not path.is_absolute():
            path = invocation.directory / path
        paths.append(path)
    return paths


def _names_pools(path: Path) -> bool:
    return (
        path.suffix == POOL_SUFFIX
        or path.name == POOL_OVERRIDE_NAME
        or (path.is_dir() and any(path.glob(f"*{POOL_SUFFIX}")))
    )


def _holds_cases(path: Path) -> bool:
    return path.is_dir() and ((path / CASE_FILE).is_file() or any(path.rglob(CASE_FILE)))


def find_pool_dir(invocation: Invocation) -> Path | None:
    """The experiments directory when the run collects pools (an argument is a ``.pool`` file
    or a directory holding some) or stored cases (a directory holding ``case.toml`` files: the
    nearest directory above with pools, else the argument); else None: the plugin then stays
    out of the way."""
    for path in arg_paths(invocation):
        if _names_pools(path):
            return path.parent if not path.is_dir() else path
    for path in arg_paths(invocation):
        if _holds_cases(path):
            return next((d for d in path.parents if any(d.glob(f"*{POOL_SUFFIX}"))), path)
    return None


def replays_only(invocation: Invocation) -> bool:
    """No argument names pools: the run replays stored cases only."""
    return not any(_names_pools(path) for path in arg_paths(invocation))
