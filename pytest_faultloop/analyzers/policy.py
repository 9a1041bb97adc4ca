"""The analyzers' restart decision: which failure nature calls for a restart, in one place.

Transient hangs, external signals, network and scheduler events restart; deterministic code
errors, crashes and GPU errors stop (the seed's ``_RESTART_TABLE``). Override per nature with
``parse_policy("scheduler=STOP, network=STOP")``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from pytest_faultloop.errors import ConfigError
from pytest_faultloop.faults import Nature
from pytest_faultloop.models import Decision

DECISION_TEXT: Mapping[Decision, str] = MappingProxyType(
    {
        Decision.RESTART: "RESTART IMMEDIATE",
        Decision.STOP: "STOP - DONT RESTART IMMEDIATE",
        Decision.CONTINUE: "ERRORS NOT FOUND",
        Decision.UNKNOWN: "NO LOGS",
    }
)
"""The seed's vocabulary for each decision (``NO LOGS`` when there was nothing to analyse)."""

DEFAULT_DECISIONS: Mapping[Nature, Decision] = MappingProxyType(
    {
        Nature.HANG: Decision.RESTART,
        Nature.SIGNAL: Decision.RESTART,
        Nature.NETWORK: Decision.RESTART,
        Nature.SCHEDULER: Decision.RESTART,
        Nature.CRASH: Decision.STOP,
        Nature.EXCEPTION: Decision.STOP,
        Nature.GPU_ERROR: Decision.STOP,
        Nature.NONE: Decision.CONTINUE,
    }
)


@dataclass(frozen=True)
class DecisionPolicy:
    decisions: Mapping[Nature, Decision] = field(
        default_factory=lambda: DEFAULT_DECISIONS
    )

    def decide(self, nature: Nature) -> Decision:
        return self.decisions[nature]

    def describe(self) -> str:
        """``nature=DECISION`` pairs, stable order: part of an analysis fingerprint."""
        return ", ".join(f"{n.value}={self.decisions[n].value}" for n in Nature)


DEFAULT_POLICY = DecisionPolicy()


def parse_policy(spec: str) -> DecisionPolicy:
    """``"scheduler=STOP, network=STOP"``: the default policy with these natures overridden."""
    decisions = dict(DEFAULT_DECISIONS)
    for item in filter(None, (part.strip() for part in spec.split(","))):
        nature, sep, decision = (s.strip() for s in item.partition("="))
        if not sep:
            raise ConfigError(
                f"restart policy {spec!r}: {item!r} is not NATURE=DECISION"
            )
        try:
            decisions[Nature(nature.lower())] = Decision(decision.upper())
        except ValueError:
            raise ConfigError(
                f"restart policy {spec!r}: {item!r}: natures are "
                f"{', '.join(n.value for n in Nature)}; decisions are RESTART, STOP, CONTINUE"
            ) from None
    return DecisionPolicy(MappingProxyType(decisions))
