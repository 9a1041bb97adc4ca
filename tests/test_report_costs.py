"""The report's "Cost of the analyses": medians, nearest-rank p95, timeouts and tokens."""

from __future__ import annotations

import json

import pytest
from support.report_samples import make_result

from pytest_faultloop.models import AnalysisCosts, ExperimentResult, Usage
from pytest_faultloop.models.faults import FaultType
from pytest_faultloop.report.costs import costs_section, nearest_rank, stage_costs
from pytest_faultloop.report.markdown import render_report


def with_costs(rank: int, costs: AnalysisCosts | None) -> ExperimentResult:
    return make_result(FaultType.SIGKILL, rank).model_copy(update={"costs": costs})


def test_nearest_rank() -> None:
    values = [float(v) for v in range(20, 0, -1)]  # 1..20, unsorted
    assert nearest_rank(values, 95) == 19  # ceil(0.95 * 20) = 19th smallest
    assert nearest_rank(values, 50) == 10
    assert nearest_rank([3.0, 1.0, 2.0], 95) == 3  # ceil(2.85) = 3rd
    assert nearest_rank([7.0], 95) == 7
    with pytest.raises(ValueError):
        nearest_rank([], 95)


def test_stage_costs_from_known_inputs() -> None:
    results = [
        with_costs(0, AnalysisCosts(log_s=1.0, fr_s=0.1, judge_s=2.0)),
        with_costs(1, AnalysisCosts(log_s=3.0, fr_s=0.3, judge_s=4.0,
                                    judge_usage=Usage(calls=1, tokens_in=100, tokens_out=10))),
        with_costs(2, AnalysisCosts(log_s=5.0, timed_out=["log"])),
        with_costs(3, AnalysisCosts(log_s=2.0, fr_s=0.2, judge_s=6.0,
                                    judge_usage=Usage(calls=2, tokens_in=300, tokens_out=30))),
        with_costs(4, None),  # stored before costs existed
    ]  # fmt: skip
    log, fr, judge = stage_costs(results)
    assert (log.experiments, log.median_s, log.p95_s, log.timed_out) == (4, 2.5, 5.0, 1)
    assert (fr.experiments, fr.median_s, fr.p95_s, fr.timed_out) == (3, 0.2, 0.3, 0)
    assert (judge.experiments, judge.median_s, judge.p95_s) == (3, 4.0, 6.0)
    assert (judge.tokens_in, judge.tokens_out, judge.median_tokens) == (400, 40, (200, 20))
    assert log.median_tokens is None and fr.usages == ()


def test_section_table() -> None:
    results = [
        with_costs(0, AnalysisCosts(log_s=1.0, fr_s=0.5, judge_s=2.0,
                                    judge_usage=Usage(calls=1, tokens_in=10, tokens_out=2))),
        with_costs(1, AnalysisCosts(log_s=0.5, timed_out=["log"])),
    ]  # fmt: skip
    lines = costs_section(results).splitlines()
    assert lines[:4] == [
        "",
        "## Cost of the analyses",
        "",
        "| stage | experiments | median s | p95 s | timed out | tokens in/out |",
    ]
    assert lines[5] == "| log analysis | 2 | 0.75 | 1.00 | 1 | — |"
    assert lines[6] == "| FR analysis | 1 | 0.50 | 0.50 | 0 | — |"
    assert lines[7] == "| judge | 1 | 2.00 | 2.00 | 0 | 10 / 2 (median 10 / 2; 1 calls) |"
    assert "nearest rank" in lines[-1]


def test_no_costs_no_section_and_old_results_load() -> None:
    old = make_result(FaultType.SIGKILL, 1)
    data = json.loads(old.model_dump_json())
    del data["costs"]
    assert ExperimentResult.model_validate(data).costs is None
    assert costs_section([old]) == ""
    assert "## Cost of the analyses" not in render_report([old])
    timed = with_costs(1, AnalysisCosts(log_s=0.5))
    assert render_report([timed]).endswith(costs_section([timed]))
