"""Pools: ordered ``FAULT_TYPE:RANK:ITER:NODES`` entries read from ``<name>.pool`` files or POOL."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from pytest_faultloop.errors import PoolError
from pytest_faultloop.faults import FaultType
from pytest_faultloop.models import PoolEntry

POOL_SUFFIX = ".pool"
_TOKEN = re.compile(r"\S+")


@dataclass(frozen=True)
class PooledEntry:
    """An entry with the place that listed it."""

    entry: PoolEntry
    source: str
    line: int


@dataclass(frozen=True)
class PoolRules:
    """What a valid entry must satisfy for the selected workload."""

    gpus_per_node: int
    min_nodes: int
    workload: str


def parse_entry(token: str) -> PoolEntry:
    """``GPU_SLEEP:1:5:2`` -> PoolEntry; raises ValueError with the reason."""
    parts = token.split(":")
    if len(parts) != 4:
        raise ValueError("expected FAULT_TYPE:RANK:ITER:NODES (four fields separated by ':')")
    fault, *numbers = parts
    try:
        fault_type = FaultType(fault)
    except ValueError:
        valid = ", ".join(f.value for f in FaultType)
        raise ValueError(f"unknown fault type {fault!r} (valid: {valid})") from None
    values: list[int] = []
    for field, text in zip(("RANK", "ITER", "NODES"), numbers, strict=True):
        if not re.fullmatch(r"\d+", text):
            raise ValueError(f"{field} must be a non-negative integer, got {text!r}")
        values.append(int(text))
    rank, iteration, nodes = values
    if nodes < 1:
        raise ValueError("NODES must be at least 1")
    try:
        return PoolEntry(fault=fault_type, rank=rank, iter=iteration, nodes=nodes)
    except ValidationError as exc:  # pragma: no cover - the checks above cover the model's rules
        raise ValueError(exc.errors()[0]["msg"]) from None


def parse_pool(text: str, source: str, rules: PoolRules) -> list[PooledEntry]:
    """Parse and validate a whole pool; the first bad token raises PoolError naming its place."""
    entries: list[PooledEntry] = []
    seen: dict[str, int] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        for match in _TOKEN.finditer(raw.split("#", 1)[0]):
            token = match.group()
            where = f"{source}:{lineno}: {token!r}"
            try:
                entry = parse_entry(token)
                check_rules(entry, rules)
            except ValueError as exc:
                raise PoolError(f"{where}: {exc}") from None
            if entry.key in seen:
                raise PoolError(
                    f"{where}: duplicate entry (first listed on line {seen[entry.key]}); "
                    "remove one of them"
                )
            seen[entry.key] = lineno
            entries.append(PooledEntry(entry, source, lineno))
    return entries


def check_rules(entry: PoolEntry, rules: PoolRules) -> None:
    """Raise ValueError when ``entry`` does not fit the workload's rules."""
    world = entry.nodes * rules.gpus_per_node
    if entry.rank >= world:
        raise ValueError(
            f"rank {entry.rank} is outside [0, {world}) for {entry.nodes} node(s) x "
            f"GPUS_PER_NODE={rules.gpus_per_node}"
        )
    if entry.nodes < rules.min_nodes:
        raise ValueError(
            f"NODES={entry.nodes} is below workload {rules.workload!r}'s minimum of "
            f"{rules.min_nodes} node(s)"
        )


def available_pools(directory: Path) -> dict[str, Path]:
    """Pool name -> file, for every ``*.pool`` in the experiments directory."""
    return {p.stem: p for p in sorted(directory.glob(f"*{POOL_SUFFIX}"))}


def read_pool_file(path: Path, rules: PoolRules, display: str | None = None) -> list[PooledEntry]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise PoolError(f"{display or path}: cannot read pool file: {exc.strerror}") from None
    return parse_pool(text, display or str(path), rules)


def resolve_pool_names(requested: list[str], available: dict[str, Path]) -> list[str]:
    """Split comma lists, keep order, drop repeats; unknown names list what exists."""
    names: list[str] = []
    for item in requested:
        for name in (n.strip() for n in item.split(",")):
            if name and name not in names:
                names.append(name)
    unknown = [n for n in names if n not in available]
    if unknown:
        listing = ", ".join(available) or "(none found)"
        raise PoolError(
            f"unknown pool {unknown[0]!r}: available pools are {listing} "
            "(files <name>.pool in the experiments directory)"
        )
    return names
