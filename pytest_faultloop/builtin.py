"""The built-in stage implementations, registered ``trylast`` so any conftest hook wins."""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import TypeVar

import pytest
from pydantic import SecretStr

from pytest_faultloop import analyzers
from pytest_faultloop.artifacts import collect_artifacts
from pytest_faultloop.backends.local import LocalBackend
from pytest_faultloop.backends.protocol import Backend, JobSpec
from pytest_faultloop.backends.slurm import SlurmBackend
from pytest_faultloop.fingerprint import (
    FR_SOURCES,
    LLM_SOURCES,
    LOG_SOURCES,
    NAIVE_SOURCES,
    STAGE_HOOKS,
    analyzer_label,
    analyzer_part,
    implementation_label,
    implementations,
)
from pytest_faultloop.job_runner import BackendJobRunner
from pytest_faultloop.llm_client import resolve_api_key
from pytest_faultloop.models import (
    Artifacts,
    Experiment,
    FrAnalysis,
    Job,
    LogAnalysis,
    Verdict,
)
from pytest_faultloop.run_session import RUN_SESSION_KEY
from pytest_faultloop.scoring.judges import Judge, JudgeCase
from pytest_faultloop.scoring.judges.deterministic import DeterministicJudge
from pytest_faultloop.scoring.judges.hybrid import HybridJudge
from pytest_faultloop.scoring.judges.llm import LlmJudge
from pytest_faultloop.scoring.restart_policy import RestartPolicy, load_policy
from pytest_faultloop.settings import Settings

PLUGIN_NAME = "faultloop-builtin"
Answer = TypeVar("Answer", LogAnalysis, FrAnalysis, Verdict)


def make_backend(settings: Settings) -> Backend:
    if settings.backend == "slurm":
        return SlurmBackend(gres=settings.slurm_gres)
    return LocalBackend()


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
    """Backend, artifact locator, analyzers and judge chosen by the settings."""

    def __init__(self, settings: Settings, stop: threading.Event) -> None:
        self.settings = settings
        self.stop = stop
        self.policy = load_policy(self.settings.restart_policy)
        self.judge = make_judge(self.settings, self.policy)
        self.llm_key = (
            _resolve_analyzer_key(self.settings) if self.settings.log_analyzer == "llm" else None
        )
        self._answers: dict[str, weakref.WeakValueDictionary[int, object]] = {
            stage: weakref.WeakValueDictionary() for stage in STAGE_HOOKS
        }

    @cached_property
    def backend(self) -> Backend:
        return make_backend(self.settings)

    @pytest.hookimpl(trylast=True)
    def pytest_faultloop_run_job(
        self, config: pytest.Config, spec: JobSpec, submitted: Callable[[Job], None]
    ) -> Job | None:
        session = config.stash[RUN_SESSION_KEY].directory  # opened before any job runs
        runner = BackendJobRunner(
            self.backend,
            self.settings.poll_interval,
            self.stop,
            self.settings.keep_jobs,
            submitted,
            session.event,
        )
        return runner.run(spec)

    @pytest.hookimpl(trylast=True)
    def pytest_faultloop_collect_artifacts(
        self, config: pytest.Config, experiment: Experiment, job: Job, experiment_dir: Path
    ) -> Artifacts:
        return collect_artifacts(experiment_dir, job.job_id)

    @pytest.hookimpl(trylast=True)
    def pytest_faultloop_analyze_log(
        self, experiment: Experiment, artifacts: Artifacts
    ) -> LogAnalysis:
        return self._answered("log_analyzer", self._analyze_log(artifacts.log))

    def _analyze_log(self, log: Path | None) -> LogAnalysis:
        spec = self.settings.log_analyzer
        if log is None:
            return analyzers.no_log_analysis(spec if not spec.startswith("cmd:") else "cmd")
        if spec.startswith("cmd:"):
            return analyzers.run_log_command(spec[4:], log, self.settings.analyzer_timeout)
        if spec == "naive":
            return analyzers.analyze_log_naive(log)
        evidence = analyzers.analyze_log(log)
        if spec == "builtin":
            return evidence
        assert self.llm_key is not None
        return analyzers.analyze_log_llm(
            log,
            model=self.settings.nvrx_llm_model,
            base_url=self.settings.nvrx_llm_base_url,
            api_key=self.llm_key,
            evidence=evidence,
            timeout=self.settings.analyzer_timeout,
        )

    @pytest.hookimpl(trylast=True)
    def pytest_faultloop_analyze_fr(
        self, experiment: Experiment, artifacts: Artifacts
    ) -> FrAnalysis:
        spec = self.settings.fr_analyzer
        if spec.startswith("cmd:"):
            analysis = analyzers.run_fr_command(
                spec[4:], artifacts.fr_dir, self.settings.analyzer_timeout
            )
        else:
            analysis = analyzers.analyze_fr(artifacts.fr_dir, jobs=self.settings.fr_jobs)
        return self._answered("fr_analyzer", analysis)

    @pytest.hookimpl(trylast=True)
    def pytest_faultloop_judge(
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
        return self._answered("judge", self.judge.judge(case))

    def _answered(self, stage: str, answer: Answer) -> Answer:
        self._answers[stage][id(answer)] = answer
        return answer

    def answered(self, stage: str, answer: object) -> bool:
        """Whether this object's built-in ``stage`` returned ``answer``."""
        return answer is not None and self._answers[stage].get(id(answer)) is answer

    @cached_property
    def parts(self) -> dict[str, str]:
        """Each built-in stage's fingerprint part (see :mod:`pytest_faultloop.fingerprint`)."""
        s = self.settings
        llm = s.log_analyzer == "llm"
        sources = {"llm": LLM_SOURCES, "naive": NAIVE_SOURCES}.get(s.log_analyzer, LOG_SOURCES)
        log = analyzer_part(s.log_analyzer, sources)
        model = f" {s.judge_model}" if s.judge != "deterministic" else ""
        return {
            "judge": s.judge + model,
            "log_analyzer": log + (f" {s.nvrx_llm_model}" if llm else ""),
            "fr_analyzer": analyzer_part(s.fr_analyzer, FR_SOURCES),
        }

    @property
    def labels(self) -> dict[str, str]:
        """Each built-in stage as the header names it."""
        s = self.settings
        return {
            "judge": s.judge,
            "log_analyzer": analyzer_label(s.log_analyzer),
            "fr_analyzer": analyzer_label(s.fr_analyzer),
        }


def _resolve_analyzer_key(settings: Settings) -> SecretStr:
    return resolve_api_key("analyzer", _key_env(settings))


def install_builtin_stages(
    config: pytest.Config, settings: Settings, stop: threading.Event
) -> BuiltinStages:
    """Register the built-in stages, once per process (a conftest's hooks run before them)."""
    pm = config.pluginmanager
    stages = pm.get_plugin(PLUGIN_NAME)
    if stages is None:
        stages = BuiltinStages(settings, stop)
        pm.register(stages, PLUGIN_NAME)
    assert isinstance(stages, BuiltinStages)
    return stages


def stage_labels(config: pytest.Config) -> dict[str, str]:
    """Each stage's label: its hook implementations in a conftest or plugin
    (``conftest.py:pytest_faultloop_analyze_log``), else the built-in one's setting."""
    stages = config.pluginmanager.get_plugin(PLUGIN_NAME)
    assert isinstance(stages, BuiltinStages)
    labels = {}
    for stage, hook in STAGE_HOOKS.items():
        own = implementations(config, hook, PLUGIN_NAME)
        label = ",".join(implementation_label(i, config.rootpath) for i in own)
        labels[stage] = label or stages.labels[stage]
    return labels


def stage_labels_line(config: pytest.Config) -> str:
    """``judge=deterministic log_analyzer=conftest.py:pytest_faultloop_analyze_log
    fr_analyzer=builtin`` (the report header's)."""
    return " ".join(f"{stage}={label}" for stage, label in stage_labels(config).items())
