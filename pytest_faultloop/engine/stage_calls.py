"""How the pipeline reaches each stage: through a run's pytest hooks (a conftest or plugin may
answer any of them before the built-in stages), or straight to the built-in stages (the
leaderboard, which runs no pytest session)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_faultloop.engine.builtin import PLUGIN_NAME, BuiltinStages
from pytest_faultloop.engine.fingerprint import (
    STAGE_HOOKS,
    fingerprint,
    implementation_part,
    implementations,
)
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
from pytest_faultloop.store.artifacts import collect_artifacts


class HookCalls:
    """Each stage through its ``pytest_faultloop_*`` hook; results are stamped with the
    fingerprint of the implementations that answered (a conftest's, or the built-in one)."""

    def __init__(self, config: pytest.Config, builtin: BuiltinStages) -> None:
        self.config = config
        self.builtin = builtin
        self._own_parts = {
            stage: " + ".join(implementation_part(i, config.rootpath) for i in own)
            for stage, hook in STAGE_HOOKS.items()
            if (own := implementations(config, hook, PLUGIN_NAME))
        }
        """A conftest's or plugin's implementations, hashed once, as the built-in stages'
        parts are: the code this run loaded answers every experiment, whatever its file says
        by the time one is stamped."""
        builtin.parts  # noqa: B018 (hashed now, not at the first stamp)

    def run_job(self, spec: JobSpec, submitted: Callable[[Job], None]) -> Job | None:
        return self.config.hook.pytest_faultloop_run_job(  # type: ignore[no-any-return]
            config=self.config, spec=spec, submitted=submitted
        )

    def collect_artifacts(
        self, experiment: Experiment, job: Job, experiment_dir: Path
    ) -> Artifacts | None:
        return self.config.hook.pytest_faultloop_collect_artifacts(  # type: ignore[no-any-return]
            config=self.config, experiment=experiment, job=job, experiment_dir=experiment_dir
        )

    def analyze_log(self, experiment: Experiment, artifacts: Artifacts) -> LogAnalysis | None:
        return self.config.hook.pytest_faultloop_analyze_log(  # type: ignore[no-any-return]
            config=self.config, experiment=experiment, artifacts=artifacts
        )

    def analyze_fr(self, experiment: Experiment, artifacts: Artifacts) -> FrAnalysis | None:
        return self.config.hook.pytest_faultloop_analyze_fr(  # type: ignore[no-any-return]
            config=self.config, experiment=experiment, artifacts=artifacts
        )

    def judge(
        self,
        experiment: Experiment,
        artifacts: Artifacts,
        log_analysis: LogAnalysis,
        fr_analysis: FrAnalysis,
    ) -> Verdict | None:
        return self.config.hook.pytest_faultloop_judge(  # type: ignore[no-any-return]
            config=self.config,
            experiment=experiment,
            artifacts=artifacts,
            log_analysis=log_analysis,
            fr_analysis=fr_analysis,
        )

    def stamp(self, result: ExperimentResult) -> ExperimentResult:
        """The policy hash, and the fingerprint of each stage's answering implementation."""
        answers = {
            "judge": result.verdict,
            "log_analyzer": result.log_analysis,
            "fr_analyzer": result.fr_analysis,
        }
        parts = {}
        for stage in STAGE_HOOKS:
            own = self._own_parts.get(stage)
            if own and not self.builtin.answered(stage, answers[stage]):
                parts[stage] = own
            else:
                parts[stage] = self.builtin.parts[stage]
        return _stamped(result, self.builtin, parts)


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
        return collect_artifacts(experiment_dir, job.job_id)

    def analyze_log(self, experiment: Experiment, artifacts: Artifacts) -> LogAnalysis | None:
        return self.builtin.pytest_faultloop_analyze_log(experiment, artifacts)

    def analyze_fr(self, experiment: Experiment, artifacts: Artifacts) -> FrAnalysis | None:
        return self.builtin.pytest_faultloop_analyze_fr(experiment, artifacts)

    def judge(
        self,
        experiment: Experiment,
        artifacts: Artifacts,
        log_analysis: LogAnalysis,
        fr_analysis: FrAnalysis,
    ) -> Verdict | None:
        return self.builtin.pytest_faultloop_judge(experiment, artifacts, log_analysis, fr_analysis)

    def stamp(self, result: ExperimentResult) -> ExperimentResult:
        return _stamped(result, self.builtin, self.builtin.parts)


def _stamped(
    result: ExperimentResult, builtin: BuiltinStages, stage_parts: dict[str, str]
) -> ExperimentResult:
    """The result with the restart policy's hash and the fingerprint of it and the stages'
    parts."""
    policy_hash = builtin.policy.policy_hash
    digest = fingerprint({"restart_policy": policy_hash, **stage_parts})
    return result.model_copy(update={"policy_hash": policy_hash, "fingerprint": digest})
