"""The built-in stage implementations: the backend, artifact locator, analyzers and judge the
settings choose. The pytest face offers them as the stage hooks' last answer; the leaderboard
calls them directly."""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import TypeVar

from pydantic import SecretStr

from pytest_faultloop import analyzers
from pytest_faultloop.analyzers.kinds import AnalyzerRun, fr_kind, log_kind, no_log
from pytest_faultloop.analyzers.llm_client import resolve_api_key
from pytest_faultloop.engine.fingerprint import STAGE_HOOKS, analyzer_part, fingerprint
from pytest_faultloop.engine.job_runner import BackendJobRunner
from pytest_faultloop.inputs.settings import Settings
from pytest_faultloop.jobs.backends.protocol import Backend, JobSpec
from pytest_faultloop.jobs.backends.registry import BackendOptions, backend_choice
from pytest_faultloop.models import (
    Artifacts,
    Experiment,
    ExperimentResult,
    FrAnalysis,
    Job,
    LogAnalysis,
    Verdict,
)
from pytest_faultloop.scoring.judges import Judge, JudgeCase
from pytest_faultloop.scoring.judges.deterministic import DeterministicJudge
from pytest_faultloop.scoring.judges.hybrid import HybridJudge
from pytest_faultloop.scoring.judges.llm import LlmJudge
from pytest_faultloop.scoring.restart_policy import RestartPolicy, load_policy
from pytest_faultloop.store.artifacts import collect_artifacts

Answer = TypeVar("Answer", LogAnalysis, FrAnalysis, Verdict)


def make_backend(settings: Settings) -> Backend:
    return backend_choice(settings.backend).make(BackendOptions(slurm_gres=settings.slurm_gres))


def make_judge(settings: Settings, policy: RestartPolicy) -> Judge:
    deterministic = DeterministicJudge(policy)
    if settings.judge == "deterministic":
        return deterministic
    llm = LlmJudge(
        policy,
        settings.judge_model,
        settings.judge_base_url,
        resolve_api_key("judge", _key_env(settings)),
        timeout=settings.analyzer_timeout,
    )
    return llm if settings.judge == "llm" else HybridJudge(deterministic, llm)


def _key_env(settings: Settings) -> dict[str, str]:
    """The environment plus key-file settings that came from the env file or ini."""
    env = dict(os.environ)
    for name in ("llm_api_key_file", "judge_api_key_file"):
        value = getattr(settings, name)
        if value is not None:
            env.setdefault(name.upper(), str(value))
    return env


class BuiltinStages:
    """Backend, artifact locator, analyzers and judge chosen by the settings: the pipeline's
    stages (``pipeline.StageCalls``) without pytest (the leaderboard, the corpus scorecard), and
    behind the stage hooks' last answer in a pytest run (``plugin.stage_hooks``). ``events``:
    where a job's runner writes its event lines (the session's event log)."""

    def __init__(
        self,
        settings: Settings,
        stop: threading.Event,
        events: Callable[[str], None] = lambda line: None,
    ) -> None:
        self.settings = settings
        self.stop = stop
        self.events = events
        self.policy = load_policy(self.settings.restart_policy)
        self.judging = make_judge(self.settings, self.policy)
        self.log_kind = log_kind(settings.log_analyzer)
        self.fr_kind = fr_kind(settings.fr_analyzer)
        self.analyzer_run = AnalyzerRun(
            timeout=settings.analyzer_timeout,
            fr_jobs=settings.fr_jobs,
            llm_model=settings.nvrx_llm_model,
            llm_base_url=settings.nvrx_llm_base_url,
            llm_key=_resolve_analyzer_key(settings) if self.log_kind.needs_llm else None,
        )
        self._answers: dict[str, weakref.WeakValueDictionary[int, object]] = {
            stage: weakref.WeakValueDictionary() for stage in STAGE_HOOKS
        }

    @cached_property
    def backend(self) -> Backend:
        return make_backend(self.settings)

    def run_job(self, spec: JobSpec, submitted: Callable[[Job], None]) -> Job | None:
        """Run the job on the settings' backend."""
        runner = BackendJobRunner(
            self.backend,
            self.settings.poll_interval,
            self.stop,
            self.settings.keep_jobs,
            submitted,
            self.events,
        )
        return runner.run(spec)

    def collect_artifacts(
        self, experiment: Experiment, job: Job, experiment_dir: Path
    ) -> Artifacts:
        return collect_artifacts(experiment_dir, job.job_id)

    def analyze_log(self, experiment: Experiment, artifacts: Artifacts) -> LogAnalysis:
        return self._answered("log_analyzer", self._analyze_log(artifacts.log))

    def _analyze_log(self, log: Path | None) -> LogAnalysis:
        if log is None:
            return no_log(self.log_kind)
        return self.log_kind.analyze(log, self.analyzer_run)

    def analyze_fr(self, experiment: Experiment, artifacts: Artifacts) -> FrAnalysis:
        analysis = self.fr_kind.analyze(artifacts.fr_dir, self.analyzer_run)
        return self._answered("fr_analyzer", analysis)

    def judge(
        self,
        experiment: Experiment,
        artifacts: Artifacts,
        log_analysis: LogAnalysis,
        fr_analysis: FrAnalysis,
    ) -> Verdict:
        case = JudgeCase(
            experiment=experiment,
            log_analysis=log_analysis,
            fr_analysis=fr_analysis,
            log_tail=analyzers.log_tail(artifacts.log) if artifacts.log else "",
            gpus_per_node=experiment.gpus_per_node,
            segment_size=self.settings.fr_segment_size,
            node_host=artifacts.marker.host if artifacts.marker else None,
            node_hosts=artifacts.node_hosts if artifacts.rank_markers else {},
        )
        return self._answered("judge", self.judging.judge(case))

    def stamp(self, result: ExperimentResult) -> ExperimentResult:
        return stamped(result, self, self.parts)

    def _answered(self, stage: str, answer: Answer) -> Answer:
        self._answers[stage][id(answer)] = answer
        return answer

    def answered(self, stage: str, answer: object) -> bool:
        """Whether this object's built-in ``stage`` returned ``answer``."""
        return answer is not None and self._answers[stage].get(id(answer)) is answer

    @cached_property
    def parts(self) -> dict[str, str]:
        """Each built-in stage's fingerprint part (see :mod:`pytest_faultloop.engine.fingerprint`)."""
        s = self.settings
        log = analyzer_part(self.log_kind)
        model = f" {s.judge_model}" if s.judge != "deterministic" else ""
        return {
            "judge": s.judge + model,
            "log_analyzer": log + (f" {s.nvrx_llm_model}" if self.log_kind.needs_llm else ""),
            "fr_analyzer": analyzer_part(self.fr_kind),
        }

    @property
    def labels(self) -> dict[str, str]:
        """Each built-in stage as the header names it."""
        s = self.settings
        return {
            "judge": s.judge,
            "log_analyzer": self.log_kind.label,
            "fr_analyzer": self.fr_kind.label,
        }


def _resolve_analyzer_key(settings: Settings) -> SecretStr:
    return resolve_api_key("analyzer", _key_env(settings))


def stamped(
    result: ExperimentResult, builtin: BuiltinStages, stage_parts: dict[str, str]
) -> ExperimentResult:
    """The result with the restart policy's hash and the fingerprint of it and the stages'
    parts."""
    policy_hash = builtin.policy.policy_hash
    digest = fingerprint({"restart_policy": policy_hash, **stage_parts})
    return result.model_copy(update={"policy_hash": policy_hash, "fingerprint": digest})
