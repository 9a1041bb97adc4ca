"""Rates with intervals in the report: clustered by experiment when trials repeat one, and the
hybrid judges' agreement as Cohen's kappa."""

from __future__ import annotations

from support.report_samples import make_result
from support.verdicts import labels

from pytest_faultloop.models import ExperimentResult
from pytest_faultloop.models.faults import FaultType
from pytest_faultloop.report.aggregate import pass_rates
from pytest_faultloop.report.agreement import agreement_lines
from pytest_faultloop.report.stats import clustered_rate, cohen_kappa, wilson


def trials(fault: FaultType, rank: int, scores: list[dict[str, str]]) -> list[ExperimentResult]:
    runs = []
    for trial, score in enumerate(scores, start=1):
        result = make_result(fault, rank, scores=score)
        experiment = result.experiment.model_copy(update={"trials": len(scores), "trial": trial})
        runs.append(result.model_copy(update={"experiment": experiment}))
    return runs


def test_repeated_experiments_get_an_interval_clustered_by_experiment() -> None:
    good, bad = labels(), labels(rank_primary="false")
    results = [
        *trials(FaultType.GPU_SLEEP, 1, [good, good, bad]),
        *trials(FaultType.GPU_SLEEP, 2, [good, good, good]),
    ]
    rate = pass_rates(results, lambda r: "all")["all"].rates["rank_primary"]
    assert (rate.passed, rate.total, rate.clusters) == (5, 6, ((2, 3), (3, 3)))
    assert rate.interval == clustered_rate([(2, 3), (3, 3)])[1:]
    assert rate.interval[0] <= wilson(5, 6)[0]  # never narrower than if the 6 were independent


def test_single_trials_read_exactly_as_wilson() -> None:
    results = [make_result(FaultType.SIGKILL, r) for r in (0, 1, 2)]
    results.append(make_result(FaultType.SIGKILL, 3, scores=labels(rank_primary="false")))
    rate = pass_rates(results, lambda r: "all")["all"].rates["rank_primary"]
    assert rate.interval == wilson(3, 4)


def hybrid(rules: dict[str, str], llm: dict[str, str]) -> ExperimentResult:
    """A verdict whose ``extra`` holds each judge's labels, as the hybrid judge's does."""
    result = make_result(FaultType.GPU_SLEEP, 1)
    assert result.verdict is not None
    extra = {f"deterministic.{d}": v for d, v in rules.items()}
    extra |= {f"llm.{d}": v for d, v in llm.items()}
    return result.model_copy(update={"verdict": result.verdict.model_copy(update={"extra": extra})})


def test_hybrid_agreement_gives_kappa_per_dimension() -> None:
    results = [
        hybrid(labels(), labels()),
        hybrid(labels(rank_primary="false"), labels()),
        hybrid(
            labels(restart_correct="false", rank_primary="false", fault_described="false"),
            labels(restart_correct="false", rank_primary="false", fault_described="false"),
        ),
        hybrid(labels(fault_described="false"), labels()),
    ]
    lines = agreement_lines(results)
    assert lines[0].startswith("judges agreed on 18 of 20 labels (90%)")
    expected = cohen_kappa(
        [("true", "true"), ("false", "true"), ("false", "false"), ("true", "true")]
    )
    assert (
        f"  rank_primary: kappa {expected.value:.2f} ({expected.low:.2f} to "
        f"{expected.high:.2f}), n=4"
    ) in lines
    assert agreement_lines([make_result(FaultType.GPU_SLEEP, 1)]) == []
