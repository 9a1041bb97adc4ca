"""Verdict labels for tests, by dimension: every dimension passing unless a test says otherwise
(``labels(rank_primary="false", fr_rank_correct="node")``), the dimensions and their passing
labels read from the registry."""

from __future__ import annotations

from pytest_faultloop.models import Verdict
from pytest_faultloop.scoring.dimensions import DIMENSIONS
from pytest_faultloop.scoring.pass_rule import DEFAULT_RULE

PASSING = {d.name: next(v for v in d.values if DEFAULT_RULE.passes(d.name, v)) for d in DIMENSIONS}
"""Each dimension's best label, one that passes the strict rule: ``true``, FR's ``rank``."""


def labels(**changed: str) -> dict[str, str]:
    """Every dimension's label, in the registry's order: ``changed`` ones as given, the rest
    passing; TypeError for a name that is no dimension."""
    unknown = sorted(set(changed) - set(PASSING))
    if unknown:
        raise TypeError(f"no dimension named {', '.join(unknown)}; expected {', '.join(PASSING)}")
    return PASSING | changed


def verdict(*, notes: str = "", judge: str = "test", **changed: str) -> Verdict:
    """A verdict with ``labels(**changed)``: ``verdict(rank_primary="false")``."""
    return Verdict.model_validate({**labels(**changed), "notes": notes, "judge": judge})


ALL_FALSE = dict.fromkeys(PASSING, "false")
"""Every dimension ``false`` (a label each of them takes)."""
