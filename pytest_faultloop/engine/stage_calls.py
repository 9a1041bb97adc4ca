"""The pipeline's stages straight to the built-in implementations (the leaderboard, which runs
no pytest session; a pytest run reaches them through its hooks, ``plugin.stage_hooks``), and
the stamp every result gets: the restart policy's hash and the answering code's fingerprint."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pytest_faultloop.engine.builtin import BuiltinStages
from pytest_faultloop.engine.fingerprint import fingerprint
from pytest_faultloop.jobs.backends.protocol import JobSpec
from pytest_faultloop.models import (
    Artifacts,
    Experiment,
    ExperimentResult,
    FrAnalysis,
    Job,
    LogAnalysis,
    Verdict,
)


class BuiltinCalls:
    """Each scoring stage straight to the built-in implementation the settings choose (no
    hooks, no job: the leaderboard scores stored artifacts)."""

    def __init__(self, builtin: BuiltinStages) -> None:
        self.builtin = builtin

    def run_job(self, spec: JobSpec, submitted: Callable[[Job], None]) -> Job | None:
        return None  # nothing runs a job here: the pipeline reports it as infrastructure

    def collect_artifacts(
        self, experiment: Experiment, job: Job, experiment_dir: Path
    ) -> Artifacts | None:
        return self.builtin.collect_artifacts(experiment, job, experiment_dir)

    def analyze_log(self, experiment: Experiment, artifacts: Artifacts) -> LogAnalysis | None:
        return self.builtin.analyze_log(experiment, artifacts)

    def analyze_fr(self, experiment: Experiment, artifacts: Artifacts) -> FrAnalysis | None:
        return self.builtin.analyze_fr(experiment, artifacts)

    def judge(
        self,
        experiment: Experiment,
        artifacts: Artifacts,
        log_analysis: LogAnalysis,
        fr_analysis: FrAnalysis,
    ) -> Verdict | None:
        return self.builtin.judge(experiment, artifacts, log_analysis, fr_analysis)

    def stamp(self, result: ExperimentResult) -> ExperimentResult:
        return stamped(result, self.builtin, self.builtin.parts)


def stamped(
    result: ExperimentResult, builtin: BuiltinStages, stage_parts: dict[str, str]
) -> ExperimentResult:
    """The result with the restart policy's hash and the fingerprint of it and the stages'
    parts."""
    policy_hash = builtin.policy.policy_hash
    digest = fingerprint({"restart_policy": policy_hash, **stage_parts})
    return result.model_copy(update={"policy_hash": policy_hash, "fingerprint": digest})
