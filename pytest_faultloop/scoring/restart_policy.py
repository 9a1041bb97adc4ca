"""The restart policy: which decision a correct analyzer makes for each fault type.

Kept as data (``restart_policy.toml``) so a user can replace it; ``policy_hash`` identifies the
policy's content (decisions and rationales, not comments or layout) and is stored with results.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from pytest_faultloop.models import Decision
from pytest_faultloop.models.errors import ConfigError
from pytest_faultloop.models.faults import FaultType
from pytest_faultloop.store.text_files import NotUtf8, read_utf8

DEFAULT_POLICY_PATH = Path(__file__).with_name("restart_policy.toml")
EXPECTABLE = (Decision.RESTART, Decision.STOP, Decision.CONTINUE)


@dataclass(frozen=True)
class Expectation:
    """The expected decision for one fault type and why."""

    decision: Decision
    rationale: str


@dataclass(frozen=True)
class RestartPolicy:
    source: Path
    expectations: Mapping[FaultType, Expectation]
    policy_hash: str
    """``sha256:`` + 16 hex digits over the canonical content."""

    def expected(self, fault: FaultType) -> Expectation | None:
        """The expectation for ``fault``; None when the policy has none (restart_correct N/A)."""
        return self.expectations.get(fault)


def load_policy(path: Path | None = None) -> RestartPolicy:
    """Read and validate a policy file (the packaged seed table when ``path`` is None)."""
    source = path or DEFAULT_POLICY_PATH
    try:
        data = tomllib.loads(read_utf8(source))
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read the restart policy: {exc.strerror}") from None
    except NotUtf8 as exc:
        raise ConfigError(f"{source}:{exc.line}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: restart policy is not valid TOML: {exc}") from None
    expectations = {
        _fault(source, key): _expectation(source, key, table) for key, table in data.items()
    }
    if not expectations:
        raise ConfigError(f"{source}: restart policy is empty; add a [FAULT_TYPE] table per fault")
    return RestartPolicy(source, MappingProxyType(expectations), _hash(expectations))


def _fault(source: Path, key: str) -> FaultType:
    try:
        return FaultType(key)
    except ValueError:
        known = ", ".join(f.value for f in FaultType)
        raise ConfigError(f"{source}: [{key}] is not a fault type; use one of {known}") from None


def _expectation(source: Path, key: str, table: object) -> Expectation:
    where = f"{source}: [{key}]"
    if not isinstance(table, dict):
        raise ConfigError(f'{where} must be a table: decision = "RESTART", rationale = "..."')
    unknown = sorted(set(table) - {"decision", "rationale"})
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}; only decision and rationale")
    decision = table.get("decision")
    allowed = " | ".join(d.value for d in EXPECTABLE)
    if decision not in {d.value for d in EXPECTABLE}:
        raise ConfigError(f"{where}: decision = {decision!r}; use {allowed}")
    rationale = table.get("rationale")
    if not isinstance(rationale, str) or not rationale.strip():
        raise ConfigError(f"{where}: rationale must be a non-empty string saying why")
    return Expectation(Decision(decision), rationale.strip())


def _hash(expectations: Mapping[FaultType, Expectation]) -> str:
    canonical = json.dumps(
        {f.value: [e.decision.value, e.rationale] for f, e in expectations.items()},
        sort_keys=True,
    )
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()[:16]
