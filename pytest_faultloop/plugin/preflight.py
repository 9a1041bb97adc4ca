"""Checks before the first job is submitted: what the run needs is there, or one line says what
is missing and how to fix it (instead of every cell failing the same way, minutes later)."""

from __future__ import annotations

import os
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

from pytest_faultloop.analyzers.kinds import log_kind
from pytest_faultloop.analyzers.llm_client import shown_url, shown_urls, without_credentials
from pytest_faultloop.engine.job_specs import effective_script
from pytest_faultloop.inputs.settings import Settings
from pytest_faultloop.jobs.backends.local import launcher_module
from pytest_faultloop.jobs.backends.registry import backend_choice
from pytest_faultloop.jobs.workload.environment import check_job_environment
from pytest_faultloop.jobs.workload.registry import Workload
from pytest_faultloop.models import Experiment, Overrides
from pytest_faultloop.models.errors import ConfigError, FaultloopError
from pytest_faultloop.plugin.stage_hooks import PLUGIN_NAME, implementations
from pytest_faultloop.store.session_dir import sessions_root, unwritable_base

ENDPOINT_TIMEOUT_S = 10.0


def job_scripts(
    settings: Settings, workloads: dict[str, Workload], experiments: Iterable[Experiment]
) -> dict[Path, str]:
    """The job script each live experiment (not a replayed case) runs -> what chose it."""
    scripts = {}
    for e in experiments:
        if e.entry is not None and e.case is None:
            chosen = e.overrides or Overrides()
            script = effective_script(settings, workloads[e.workload], chosen)
            scripts[script] = script_chooser(settings, e.workload, chosen)
    return scripts


def check_workloads(
    settings: Settings, workloads: dict[str, Workload], experiments: Iterable[Experiment]
) -> None:
    """What the live experiments' workloads need on this machine (a framework's packages and
    programs): ConfigError naming the first that is missing and how to install it."""
    if settings.reanalyze:
        return
    for name in dict.fromkeys(e.workload for e in experiments if e.entry and e.case is None):
        missing = workloads[name].missing()
        if missing:
            raise ConfigError(missing)


def script_chooser(settings: Settings, workload: str, chosen: Overrides) -> str:
    """Who chose an experiment's job script, and how to change it (for messages)."""
    if chosen.sbatch_script is not None:
        return "given by the test's sbatch_script setting"
    if settings.sbatch_script is not None:
        return "given by SBATCH_SCRIPT (--faultloop-sbatch-script): give the path of a job script"
    return (
        f"workload {workload!r}: fix the workload's script in workloads.toml or set "
        "SBATCH_SCRIPT (--faultloop-sbatch-script)"
    )


def preflight(config: pytest.Config, settings: Settings, scripts: dict[Path, str]) -> None:
    """Raise ConfigError for the first thing the run would fail on. ``scripts``: the job
    scripts it will submit (none: nothing runs a job; a re-analysis submits none). A stage a
    project's own hook implements is the project's business and is not checked."""
    if scripts and not settings.reanalyze:
        check_base_dir(settings.base_experiments_dir)
        if _built_in(config, "pytest_faultloop_run_job"):
            for script, chosen_by in scripts.items():
                check_job_script(script, chosen_by, settings.backend)
            check_job_knobs(config)
            backend_choice(settings.backend).check()
    if settings.judge in ("llm", "hybrid") and _built_in(config, "pytest_faultloop_judge"):
        check_llm("judge", settings.judge_base_url, "JUDGE_BASE_URL (--faultloop-judge-base-url)")
    llm_analyzer = log_kind(settings.log_analyzer).needs_llm
    if llm_analyzer and _built_in(config, "pytest_faultloop_analyze_log"):
        check_llm(
            "log analyzer",
            settings.nvrx_llm_base_url,
            "NVRX_LLM_BASE_URL (--faultloop-llm-base-url)",
        )


@contextmanager
def usage_errors() -> Iterator[None]:
    """A faultloop error stops the run as pytest's one-line ``ERROR:`` (exit status 4)."""
    try:
        yield
    except FaultloopError as exc:
        raise pytest.UsageError(str(exc)) from None


def _built_in(config: pytest.Config, hook: str) -> bool:
    """Whether only the built-in stage implements ``hook``."""
    return not implementations(config, hook, PLUGIN_NAME)


def check_base_dir(base: Path) -> None:
    """Experiments are written under ``BASE_EXPERIMENTS_DIR/fault_injection``."""
    target = sessions_root(base)
    try:
        target.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=target, prefix=".preflight-"):
            pass
    except OSError as exc:
        raise ConfigError(unwritable_base(base, exc)) from None


def check_job_script(script: Path, chosen_by: str, backend: str) -> None:
    if not os.access(script, os.R_OK) or not script.is_file():
        raise ConfigError(
            f"job script {script} cannot be read ({chosen_by}; relative paths start at the "
            "current directory)"
        )
    if backend_choice(backend).starts_launchers:
        try:
            launcher_module(script)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None


def check_job_knobs(
    config: pytest.Config, overrides: Mapping[str, str] | None = None, given_by: str = ""
) -> None:
    """The job knobs in the environment the jobs inherit, and in a test's ``env=`` for its
    experiment (``overrides``, ``given_by`` naming the call), that would stop every job:
    refused before one is submitted. Only the built-in job runner's jobs: what a project's
    own hook runs is its business."""
    if not _built_in(config, "pytest_faultloop_run_job"):
        return
    chosen = overrides or {}
    check_job_environment(
        {**os.environ, **chosen},
        lambda name: given_by if name in chosen else f"environment variable {name}",
    )


def check_llm(purpose: str, base_url: str, url_setting: str) -> None:
    """The endpoint answers HTTP at all (any status: an error status, a missing key included,
    is reported by the first request); asked without the URL's own credentials (urllib takes
    them for part of the host name), and named with them masked."""
    url, _ = without_credentials(base_url)
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/models", timeout=ENDPOINT_TIMEOUT_S):
            pass
    except urllib.error.HTTPError:
        return
    except (urllib.error.URLError, OSError) as exc:
        why = shown_urls(str(getattr(exc, "reason", exc)))
        raise ConfigError(
            f"the LLM {purpose} endpoint {shown_url(base_url)} does not answer ({why}); set "
            f"{url_setting} to a reachable OpenAI-compatible endpoint"
        ) from None
