"""The stages through pytest's hooks: the built-in stages registered as each stage hook's last
answer (``trylast``: a conftest's or plugin's implementation answers first), the pipeline's
calls through the hooks, and the labels and fingerprint parts of whichever code answers."""

from __future__ import annotations

import hashlib
import inspect
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from pluggy import HookImpl

from pytest_faultloop.engine.builtin import BuiltinStages, stamped
from pytest_faultloop.engine.fingerprint import STAGE_HOOKS
from pytest_faultloop.engine.run_session import SessionChoice
from pytest_faultloop.inputs.settings import Settings
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

PLUGIN_NAME = "faultloop-builtin"


class BuiltinHooks:
    """The built-in stages as hook implementations, registered ``trylast``."""

    def __init__(self, stages: BuiltinStages) -> None:
        self.stages = stages

    @pytest.hookimpl(trylast=True)
    def pytest_faultloop_run_job(
        self, config: pytest.Config, spec: JobSpec, submitted: Callable[[Job], None]
    ) -> Job | None:
        return self.stages.run_job(spec, submitted)

    @pytest.hookimpl(trylast=True)
    def pytest_faultloop_collect_artifacts(
        self, config: pytest.Config, experiment: Experiment, job: Job, experiment_dir: Path
    ) -> Artifacts:
        return self.stages.collect_artifacts(experiment, job, experiment_dir)

    @pytest.hookimpl(trylast=True)
    def pytest_faultloop_analyze_log(
        self, experiment: Experiment, artifacts: Artifacts
    ) -> LogAnalysis:
        return self.stages.analyze_log(experiment, artifacts)

    @pytest.hookimpl(trylast=True)
    def pytest_faultloop_analyze_fr(
        self, experiment: Experiment, artifacts: Artifacts
    ) -> FrAnalysis:
        return self.stages.analyze_fr(experiment, artifacts)

    @pytest.hookimpl(trylast=True)
    def pytest_faultloop_judge(
        self,
        experiment: Experiment,
        artifacts: Artifacts,
        log_analysis: LogAnalysis,
        fr_analysis: FrAnalysis,
    ) -> Verdict:
        return self.stages.judge(experiment, artifacts, log_analysis, fr_analysis)


def install_builtin_stages(
    config: pytest.Config, settings: Settings, stop: threading.Event, sessions: SessionChoice
) -> BuiltinStages:
    """Register the built-in stages, once per process (a conftest's hooks run before them)."""
    pm = config.pluginmanager
    hooks = pm.get_plugin(PLUGIN_NAME)
    if hooks is None:

        def session_events(line: str) -> None:  # opened before any job runs, not before this
            sessions.opened.directory.event(line)

        hooks = BuiltinHooks(BuiltinStages(settings, stop, session_events))
        pm.register(hooks, PLUGIN_NAME)
    assert isinstance(hooks, BuiltinHooks)
    return hooks.stages


def builtin_stages(config: pytest.Config) -> BuiltinStages:
    """The built-in stages registered for this run (``install_builtin_stages``)."""
    hooks = config.pluginmanager.get_plugin(PLUGIN_NAME)
    assert isinstance(hooks, BuiltinHooks)
    return hooks.stages


def stage_labels(config: pytest.Config) -> dict[str, str]:
    """Each stage's label: its hook implementations in a conftest or plugin
    (``conftest.py:pytest_faultloop_analyze_log``), else the built-in one's setting."""
    stages = builtin_stages(config)
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
        return stamped(result, self.builtin, parts)


def implementations(config: pytest.Config, hook: str, builtin: str) -> list[HookImpl]:
    """The implementations of ``hook`` other than the plugin ``builtin``'s (wrappers left
    out), first called first."""
    impls = getattr(config.hook, hook).get_hookimpls()
    return [
        i for i in reversed(impls) if i.plugin_name != builtin and not (i.hookwrapper or i.wrapper)
    ]


def implementation_label(impl: HookImpl, root: Path) -> str:
    """``conftest.py:pytest_faultloop_analyze_log`` (its path from ``root``) or the plugin's
    name."""
    file = getattr(impl.plugin, "__file__", None)
    if file is None or Path(file).name != "conftest.py":
        return impl.plugin_name
    path = Path(file).resolve()
    shown = path.relative_to(root) if path.is_relative_to(root) else path
    return f"{shown}:{impl.function.__name__}"


def implementation_part(impl: HookImpl, root: Path) -> str:
    """The label and the hash of the implementing function's source."""
    try:
        source = inspect.getsource(impl.function).encode()
    except (OSError, TypeError):
        file = getattr(impl.plugin, "__file__", None)
        source = Path(file).read_bytes() if file else impl.function.__qualname__.encode()
    return f"{implementation_label(impl, root)} {hashlib.sha256(source).hexdigest()[:16]}"
