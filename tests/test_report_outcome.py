"""The pass rule shared by the reports and the plugin's pass/fail/skip."""

import pytest
from support.report_samples import make_result

from pytest_faultloop.models import ExperimentResult
from pytest_faultloop.models.faults import FaultType
from pytest_faultloop.scoring.pass_rule import (
    PassRule,
    dimension_passes,
    scored_verdict,
    unscored_note,
)


@pytest.mark.parametrize(
    ("dimension", "value", "expected"),
    [
        ("restart_correct", "true", True),
        ("restart_correct", "false", False),
        ("restart_correct", "N/A", None),
        ("rank_primary", "true", True),
        ("rank_primary", "partial", False),
        ("rank_primary", "false", False),
        ("rank_any", "true", True),
        ("rank_any", "false", False),
        ("fault_described", "partial", False),
        ("fr_rank_correct", "rank", True),
        ("fr_rank_correct", "node", False),
        ("fr_rank_correct", "segment", False),
        ("fr_rank_correct", "false", False),
        ("fr_rank_correct", "no_dumps", False),
    ],
)
def test_default_rule(dimension: str, value: str, expected: bool | None) -> None:
    assert dimension_passes(dimension, value) is expected


def test_partial_passes_only_when_accepted() -> None:
    for dimension in ("rank_primary", "fault_described"):
        assert dimension_passes(dimension, "partial", accept_partial=True) is True
    assert PassRule(accept_partial=True).passes("rank_any", "false") is False


@pytest.mark.parametrize(
    ("scope", "passing"),
    [("rank", {"rank"}), ("node", {"rank", "node"}), ("segment", {"rank", "node", "segment"})],
)
def test_fr_scope_accepts_narrower_findings(scope: str, passing: set[str]) -> None:
    for value in ("rank", "node", "segment", "false", "no_dumps"):
        assert dimension_passes("fr_rank_correct", value, fr_scope=scope) is (value in passing)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("dimension", "value"),
    [("rank_any", "partial"), ("restart_correct", "maybe"), ("fr_rank_correct", "true")],
)
def test_unexpected_values_are_refused(dimension: str, value: str) -> None:
    with pytest.raises(ValueError, match=dimension):
        dimension_passes(dimension, value)


def test_unknown_dimension_and_scope_are_refused() -> None:
    with pytest.raises(KeyError, match="category"):
        dimension_passes("category", "true")
    with pytest.raises(ValueError, match="cluster"):
        dimension_passes("fr_rank_correct", "rank", fr_scope="cluster")  # type: ignore[arg-type]


def test_broken_results_have_no_scored_verdict_and_say_why() -> None:
    def broken(kind: str, reason: str | None) -> ExperimentResult:
        return make_result(FaultType.SIGKILL, 1, broken=kind, reason=reason)  # type: ignore[arg-type]

    assert scored_verdict(make_result(FaultType.SIGKILL, 1)) is not None
    assert scored_verdict(broken("judge_failed", "HTTP 500")) is None
    assert unscored_note(broken("run_invalid", "no fault marker")) == "run_invalid: no fault marker"
    assert unscored_note(broken("infrastructure", "sbatch: invalid partition")) == (
        "run_invalid: infrastructure: sbatch: invalid partition"
    )
    assert unscored_note(broken("analysis_failed", None)) == "analysis_failed: no reason recorded"
    assert unscored_note(broken("judge_failed", "timeout")) == "judge_failed: timeout"
