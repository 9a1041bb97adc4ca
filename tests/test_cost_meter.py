"""The cost meter and ``Broken``'s update: a stage's costs survive the stage breaking."""

from __future__ import annotations

import time

import pytest
from support.report_samples import make_result

from pytest_faultloop.analyzers import AnalyzerError
from pytest_faultloop.engine.cost_meter import CostMeter
from pytest_faultloop.engine.pipeline import Broken, run_stages
from pytest_faultloop.models import ExperimentResult, Usage
from pytest_faultloop.models.faults import FaultType
from pytest_faultloop.scoring.judges import JudgeError


def test_a_stage_is_timed_also_when_it_raises_and_a_timeout_is_marked() -> None:
    meter = CostMeter()
    with meter.stage("log"):
        time.sleep(0.05)
    with pytest.raises(JudgeError), meter.stage("judge"):
        raise JudgeError("slow", timed_out=True)
    with pytest.raises(AnalyzerError), meter.stage("fr"):
        raise AnalyzerError("exited 1")
    costs = meter.costs
    assert costs.log_s is not None and costs.log_s >= 0.05
    assert costs.judge_s is not None and costs.fr_s is not None
    assert costs.timed_out == ["judge"]


def test_usage_is_recorded_per_stage() -> None:
    meter = CostMeter()
    meter.usage("log", Usage(calls=2, tokens_in=5, tokens_out=3))
    meter.usage("judge", None)
    assert meter.costs.log_usage == Usage(calls=2, tokens_in=5, tokens_out=3)
    assert meter.costs.judge_usage is None


def test_a_broken_stage_is_recorded_with_what_it_carries() -> None:
    meter = CostMeter()
    meter.usage("log", Usage(calls=1))

    def breaks(result: ExperimentResult) -> ExperimentResult:
        raise Broken("analysis_failed", "timed out", {"costs": meter.costs})

    result = run_stages(make_result(FaultType.SIGKILL, 1), breaks)
    assert (result.broken, result.reason) == ("analysis_failed", "timed out")
    assert result.costs == meter.costs
