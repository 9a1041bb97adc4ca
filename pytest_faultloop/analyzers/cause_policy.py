"""The analyzers' restart decision: one per cause class, read from ``analyzer_policy.toml``.

A cause class is the primary issue's nature, except that GPU errors split in two: faults of the
device itself (ECC, Xid, fallen off the bus, NVLink: infrastructure, restart without that node)
and errors of the job's own GPU code (illegal memory access, device-side assert, out of memory:
stop); a crash that took a whole node (its ranks died silently with their launcher) is
``node_lost``: infrastructure, restart without that node; and a hang of a launch that cannot
form its process group (duplicate ranks, more processes than the world size) is
``launch_config``: a restart fails the same way. Override per class with ``parse_policy("scheduler=STOP, network=STOP")``.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from pytest_faultloop.analyzers.log.membership import CANNOT_FORM
from pytest_faultloop.models import Decision
from pytest_faultloop.models.errors import ConfigError
from pytest_faultloop.models.faults import Nature

POLICY_FILE = Path(__file__).resolve().parent / "analyzer_policy.toml"
GPU_HARDWARE = "gpu_hardware"
NODE_LOST = "node_lost"
LAUNCH_CONFIG = "launch_config"
CAUSES: tuple[str, ...] = (*(n.value for n in Nature), GPU_HARDWARE, NODE_LOST, LAUNCH_CONFIG)


_HARDWARE = re.compile(
    r"ECC|\bXid (?!(?:13|31|43|45)\b)|fallen off the bus|GPU is lost|NVLink|GPU has fallen"
    r"|row remap",
    re.IGNORECASE,
)
_NODE_LOST = re.compile(r"\bnode (?:was )?lost\b|\bnode failure\b", re.IGNORECASE)


def cause_of(nature: Nature, detail: str) -> str:
    """The cause class of a primary issue: its nature, ``gpu_hardware`` for device faults,
    ``node_lost`` for a crash that took a whole node (ranks and launcher) at once,
    ``launch_config`` for a hang of a launch that cannot form its process group."""
    if nature is Nature.GPU_ERROR and _HARDWARE.search(detail):
        return GPU_HARDWARE
    if nature is Nature.CRASH and _NODE_LOST.search(detail):
        return NODE_LOST
    if nature is Nature.HANG and CANNOT_FORM in detail:
        return LAUNCH_CONFIG
    return nature.value


def _load(path: Path) -> Mapping[str, tuple[Decision, str]]:
    tables = tomllib.loads(path.read_text())
    missing = [c for c in CAUSES if c not in tables]
    if missing:
        raise ConfigError(f"{path}: no decision for cause class(es) {', '.join(missing)}")
    return MappingProxyType(
        {
            cause: (Decision(tables[cause]["decision"]), str(tables[cause].get("rationale", "")))
            for cause in CAUSES
        }
    )


DEFAULT_DECISIONS = _load(POLICY_FILE)


@dataclass(frozen=True)
class DecisionPolicy:
    decisions: Mapping[str, tuple[Decision, str]] = field(default_factory=lambda: DEFAULT_DECISIONS)

    def decide(self, cause: str) -> Decision:
        return self.decisions[cause][0]

    def rationale(self, cause: str) -> str:
        return self.decisions[cause][1]

    def describe(self) -> str:
        """``cause=DECISION`` pairs, stable order: part of an analysis fingerprint."""
        return ", ".join(f"{c}={self.decisions[c][0].value}" for c in CAUSES)


DEFAULT_POLICY = DecisionPolicy()


def parse_policy(spec: str) -> DecisionPolicy:
    """``"scheduler=STOP, network=STOP"``: the default policy with these classes overridden."""
    decisions = dict(DEFAULT_DECISIONS)
    for item in filter(None, (part.strip() for part in spec.split(","))):
        cause, sep, decision = (s.strip() for s in item.partition("="))
        if not sep:
            raise ConfigError(f"restart policy {spec!r}: {item!r} is not CAUSE=DECISION")
        try:
            if cause.lower() not in CAUSES:
                raise ValueError(cause)
            decisions[cause.lower()] = (Decision(decision.upper()), "overridden")
        except ValueError:
            raise ConfigError(
                f"restart policy {spec!r}: {item!r}: cause classes are "
                f"{', '.join(CAUSES)}; decisions are RESTART, STOP, CONTINUE"
            ) from None
    return DecisionPolicy(MappingProxyType(decisions))
