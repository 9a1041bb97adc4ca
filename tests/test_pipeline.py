"""The pipeline outside pytest: one exception-to-breakage mapping for every stage, and a
leaderboard configuration's path through the same stages (its costs, its breakage)."""

from __future__ import annotations

import threading
from pathlib import Path

from support.stored_crash import stored_crash

from pytest_faultloop.engine.builtin import BuiltinStages
from pytest_faultloop.engine.pipeline import Pipeline, broken_by
from pytest_faultloop.engine.slots import Interrupted
from pytest_faultloop.inputs.settings import Settings
from pytest_faultloop.models.errors import ConfigError
from pytest_faultloop.scoring.judges import JudgeError


def test_each_stage_maps_an_exception_to_one_broken_kind() -> None:
    interrupted = broken_by("job", Interrupted())
    assert (interrupted.kind, interrupted.reason) == (
        "infrastructure",
        "the run was interrupted before the job started",
    )
    marker = broken_by("artifacts", ConfigError("fault_injection.json: not JSON"))
    assert (marker.kind, marker.reason) == ("analysis_failed", "fault_injection.json: not JSON")
    analyzer = broken_by("analyses", ValueError("no such column"), {"costs": None})
    assert (analyzer.kind, analyzer.reason) == ("analysis_failed", "ValueError: no such column")
    assert analyzer.update == {"costs": None}
    judge = broken_by("judge", JudgeError("the endpoint answered 500"))
    assert (judge.kind, judge.reason) == ("judge_failed", "the endpoint answered 500")


def _pipeline(**settings: str) -> Pipeline:
    stages = BuiltinStages(Settings(**settings), threading.Event())  # type: ignore[arg-type]
    return Pipeline(stages)


def test_stored_artifacts_are_scored_and_stamped_like_a_run(tmp_path: Path) -> None:
    experiment, artifacts = stored_crash(tmp_path)
    result = _pipeline().on_artifacts(experiment, artifacts)
    assert result.broken is None and result.verdict is not None
    assert result.verdict.rank_primary == "true"
    assert result.fingerprint and result.policy_hash
    assert result.costs is not None and result.costs.log_s is not None


def test_a_failing_analyzer_leaves_the_experiment_unscored_with_its_reason(tmp_path: Path) -> None:
    experiment, artifacts = stored_crash(tmp_path)
    result = _pipeline(log_analyzer="cmd:false {log}").on_artifacts(experiment, artifacts)
    assert result.verdict is None and result.broken == "analysis_failed"
    assert result.reason is not None and "false" in result.reason
    assert result.costs is not None and result.costs.log_s is not None  # kept when it broke


def test_a_pipeline_without_a_session_refuses_a_job_with_one_line(tmp_path: Path) -> None:
    experiment, _ = stored_crash(tmp_path)
    result = _pipeline().rescored(experiment, None)
    assert (result.broken, result.reason) == (
        "infrastructure",
        f"--faultloop-reanalyze: no stored job for {experiment.key}",
    )
