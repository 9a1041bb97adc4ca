"""Run settings, resolved once: command line > environment > env file > ini > defaults.

Every setting of the seed keeps its own environment name and default; each also has an
``faultloop_<name>`` ini key and, where a user would want one, a ``--faultloop-*`` option.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pytest_faultloop.envfile import EnvValue, read_env_file
from pytest_faultloop.errors import ConfigError

DEFAULT_ENV_FILE = Path("scripts/user.env")


class Settings(BaseModel):
    """The resolved configuration of one pytest run. Holds no secrets (keys are read from
    the environment or key files only where they are used)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pools: list[str] = ["default"]
    pool_override: str | None = None
    workload: str = "tiny_gloo"
    workloads_file: Path | None = None
    backend: Literal["local", "slurm"] = "local"
    local_cluster: int | None = Field(None, ge=1)
    account: str | None = None
    partition: str | None = None
    gpus_per_node: int = Field(4, ge=1)
    time: str | None = None
    batch_size: int = Field(2, ge=1)
    poll_interval: float = Field(30.0, gt=0)
    base_experiments_dir: Path = Path("~/nvrx-attr-experiments").expanduser()
    megatron_repo_host_path: str | None = None
    shared_tmp_base_dir: str | None = None
    workspace_host_path: str | None = None
    container_image: str | None = None
    llm_api_key_file: Path | None = None
    judge_api_key_file: Path | None = None
    nvrx_llm_model: str = "nvidia/nemotron-3-super-120b-a12b"
    nvrx_llm_base_url: str = "https://integrate.api.nvidia.com/v1"
    judge_model: str = "qwen/qwen3.5-397b-a17b"
    judge_base_url: str = "https://integrate.api.nvidia.com/v1"
    fr_segment_size: int = Field(32, ge=1)
    sbatch_script: Path | None = None
    fault_delay: float | None = Field(None, ge=0)
    slurm_gres: bool = False
    judge: Literal["deterministic", "llm", "hybrid"] = "deterministic"
    log_analyzer: str = "builtin"
    fr_analyzer: str = "builtin"
    analyzer_timeout: float = Field(600.0, gt=0)
    schedule: Literal["window", "pairs"] = "window"
    accept_partial: bool = False
    fr_scope: Literal["rank", "node", "segment"] = "rank"
    session: str | None = None
    reanalyze: bool = False
    keep_jobs: bool = False
    retries_invalid: int = Field(1, ge=0)
    restart_policy: Path | None = None
    compare: str | None = None
    env_file: Path | None = None


@dataclass(frozen=True)
class Setting:
    """How one field is named in each source."""

    field: str
    env: str | None
    option: str | None
    help: str
    metavar: str | None = None
    flag: bool = False
    repeat: bool = False


SETTINGS: tuple[Setting, ...] = (
    Setting("pools", None, "--faultloop-pool", "pool(s) to run, from experiments/<name>.pool; "
            "repeat or comma-separate (default: default)", "NAME", repeat=True),
    Setting("pool_override", "POOL", None, "space-separated entries that replace the pool"),
    Setting("workload", "WORKLOAD", "--faultloop-workload",
            "registered workload (experiments/workloads.toml; default tiny_gloo)", "NAME"),
    Setting("workloads_file", "FAULTLOOP_WORKLOADS", "--faultloop-workloads",
            "workload registry file (default: workloads.toml beside the pools)", "FILE"),
    Setting("backend", "FAULTLOOP_BACKEND", "--faultloop-backend",
            "where jobs run: local (processes here, default) or slurm (sbatch)", "NAME"),
    Setting("local_cluster", "FAULTLOOP_LOCAL_CLUSTER", "--faultloop-local-cluster",
            "start the local Slurm cluster with N nodes for this run and stop it at the end "
            "(unless one is reachable); the backend defaults to slurm", "N"),
    Setting("account", "ACCOUNT", "--faultloop-account", "SLURM account", "NAME"),
    Setting("partition", "PARTITION", "--faultloop-partition", "SLURM partition", "NAME"),
    Setting("gpus_per_node", "GPUS_PER_NODE", "--faultloop-gpus-per-node",
            "GPUs (ranks) per node (default 4)", "N"),
    Setting("time", "TIME", "--faultloop-time",
            "per-job wall-clock limit, Slurm format (default: the workload's, else 00:30:00)",
            "LIMIT"),
    Setting("batch_size", "BATCH_SIZE", "--faultloop-batch-size",
            "most jobs in flight at once, for the whole run (default 2)", "N"),
    Setting("poll_interval", "POLL_INTERVAL", "--faultloop-poll-interval",
            "longest seconds between queue polls (default 30)", "S"),
    Setting("base_experiments_dir", "BASE_EXPERIMENTS_DIR", "--faultloop-base-dir",
            "root of all output (default ~/nvrx-attr-experiments)", "DIR"),
    Setting("megatron_repo_host_path", "MEGATRON_REPO_HOST_PATH", None, "Megatron checkout"),
    Setting("shared_tmp_base_dir", "SHARED_TMP_BASE_DIR", None, "shared tmp on the cluster"),
    Setting("workspace_host_path", "WORKSPACE_HOST_PATH", None, "host path of /workspace"),
    Setting("container_image", "CONTAINER_IMAGE", None, "container image of GB200 scripts"),
    Setting("llm_api_key_file", "LLM_API_KEY_FILE", None, "file with the log-analysis key"),
    Setting("judge_api_key_file", "JUDGE_API_KEY_FILE", None, "file with the judge's key"),
    Setting("nvrx_llm_model", "NVRX_LLM_MODEL", "--faultloop-llm-model",
            "model of the LLM log analyzer", "MODEL"),
    Setting("nvrx_llm_base_url", "NVRX_LLM_BASE_URL", "--faultloop-llm-base-url",
            "OpenAI-compatible endpoint of the LLM log analyzer", "URL"),
    Setting("judge_model", "JUDGE_MODEL", "--faultloop-judge-model", "model of the LLM judge",
            "MODEL"),
    Setting("judge_base_url", "JUDGE_BASE_URL", "--faultloop-judge-base-url",
            "OpenAI-compatible endpoint of the LLM judge", "URL"),
    Setting("fr_segment_size", "FR_SEGMENT_SIZE", "--faultloop-segment-size",
            "ranks per segment for coarse FR scoring (default 32)", "N"),
    Setting("sbatch_script", "SBATCH_SCRIPT", "--faultloop-sbatch-script",
            "job script to submit (default: the workload's)", "FILE"),
    Setting("fault_delay", "FAULT_DELAY", "--faultloop-fault-delay",
            "seconds from the iteration anchor to the fault (default: the workload's)", "S"),
    Setting("slurm_gres", "FAULTLOOP_SLURM_GRES", "--faultloop-slurm-gres",
            "pass --gpus-per-node to sbatch (clusters with GPU GRES)", flag=True),
    Setting("judge", "FAULTLOOP_JUDGE", "--faultloop-judge",
            "deterministic (default), llm or hybrid", "NAME"),
    Setting("log_analyzer", "FAULTLOOP_LOG_ANALYZER", "--faultloop-log-analyzer",
            "builtin (default), llm, or 'cmd:COMMAND {log}'", "SPEC"),
    Setting("fr_analyzer", "FAULTLOOP_FR_ANALYZER", "--faultloop-fr-analyzer",
            "builtin (default) or 'cmd:COMMAND {fr_dir}'", "SPEC"),
    Setting("retries_invalid", "FAULTLOOP_RETRIES_INVALID", "--faultloop-retries-invalid",
            "resubmit an experiment whose job failed before its fault fired up to K more times "
            "before it counts as run_invalid (default 1)", "K"),
    Setting("analyzer_timeout", "FAULTLOOP_ANALYZER_TIMEOUT", "--faultloop-analyzer-timeout",
            "seconds an external or LLM analyzer may take (default 600)", "S"),
    Setting("schedule", "FAULTLOOP_SCHEDULE", "--faultloop-schedule",
            "window (next job as soon as a slot frees, default) or pairs (the seed's batches)",
            "MODE"),
    Setting("accept_partial", "FAULTLOOP_ACCEPT_PARTIAL", "--faultloop-accept-partial",
            "count 'partial' rank_primary/fault_described as a pass", flag=True),
    Setting("fr_scope", "FAULTLOOP_FR_SCOPE", "--faultloop-fr-scope",
            "narrowest FR answer that passes: rank (default), node or segment", "SCOPE"),
    Setting("session", "FAULTLOOP_SESSION", "--faultloop-session",
            "continue a session: its directory or 'last'", "DIR"),
    Setting("reanalyze", "FAULTLOOP_REANALYZE", "--faultloop-reanalyze",
            "only re-analyze and re-judge a session's stored artifacts (no jobs)", flag=True),
    Setting("keep_jobs", "FAULTLOOP_KEEP_JOBS", "--faultloop-keep-jobs",
            "on interrupt, leave jobs in flight running (recorded)", flag=True),
    Setting("restart_policy", "FAULTLOOP_RESTART_POLICY", "--faultloop-restart-policy",
            "TOML file: expected restart decision per fault type", "FILE"),
    Setting("compare", "FAULTLOOP_COMPARE", "--faultloop-compare",
            "after the run, list regressions/improvements against 'last' or a session dir",
            "SESSION"),
    Setting("env_file", None, "--faultloop-env-file",
            "the seed's user.env (default scripts/user.env when present)", "FILE"),
)

_BY_FIELD = {s.field: s for s in SETTINGS}


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("faultloop", "fault-injection attribution benchmark")
    for s in SETTINGS:
        if s.field != "env_file":
            parser.addini(f"faultloop_{s.field}", s.help,
                          type="linelist" if s.repeat else ("bool" if s.flag else "string"),
                          default=None)
        if s.option is None:
            continue
        env_note = f" [env {s.env}]" if s.env else ""
        if s.flag:
            group.addoption(s.option, action="store_true", default=None, dest=_dest(s),
                            help=s.help + env_note)
        else:
            group.addoption(s.option, action="append" if s.repeat else "store", default=None,
                            dest=_dest(s), metavar=s.metavar, help=s.help + env_note)


def _dest(s: Setting) -> str:
    return f"faultloop_{s.field}"


@dataclass(frozen=True)
class Resolved:
    settings: Settings
    sources: dict[str, str]
    """Field -> where its value came from (for messages)."""


def resolve(config: pytest.Config, environ: dict[str, str] | None = None) -> Resolved:
    """Resolve every setting; a bad value raises ConfigError naming the setting and source."""
    environ = dict(os.environ) if environ is None else environ
    env_path, env_values = _env_file(config, environ)
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for s in SETTINGS:
        if s.field == "env_file":
            continue
        found = _lookup(config, s, environ, env_path, env_values)
        if found is not None:
            values[s.field] = _prepare(s, *found)
            sources[s.field] = found[1]
    if env_path is not None:
        values["env_file"] = env_path
    try:
        settings = Settings.model_validate(values)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = str(err["loc"][0])
        s = _BY_FIELD[field]
        raise ConfigError(
            f"{_name(s)}={values[field]!r} (from {sources[field]}): {_describe(err)}"
        ) from None
    if settings.time is not None:
        time_limit_seconds(settings.time, sources["time"])
    if settings.local_cluster is not None and "backend" not in sources:
        settings = settings.model_copy(update={"backend": "slurm"})
        sources["backend"] = sources["local_cluster"]
    settings = settings.model_copy(
        update={"base_experiments_dir": settings.base_experiments_dir.expanduser()}
    )
    return Resolved(settings, sources)


def resolve_one(config: pytest.Config, field: str,
                environ: dict[str, str] | None = None) -> tuple[Any, str] | None:
    """One setting, validated, and where it came from (None: not given anywhere); for what
    must be known before the rest is needed (ConfigError when bad)."""
    environ = dict(os.environ) if environ is None else environ
    env_path, env_values = _env_file(config, environ)
    s = _BY_FIELD[field]
    found = _lookup(config, s, environ, env_path, env_values)
    if found is None:
        return None
    value = _prepare(s, *found)
    try:
        checked = Settings.model_validate({field: value})
    except ValidationError as exc:
        raise ConfigError(f"{_name(s)}={value!r} (from {found[1]}): "
                          f"{_describe(exc.errors()[0])}") from None
    return getattr(checked, field), found[1]


def _env_file(config: pytest.Config, environ: dict[str, str]) -> tuple[Path | None, dict[str, EnvValue]]:
    given = config.getoption("faultloop_env_file")
    if given is not None:
        path = Path(given)
        return path, read_env_file(path)
    default = config.rootpath / DEFAULT_ENV_FILE
    if default.is_file():
        return default, read_env_file(default)
    return None, {}


def _lookup(config: pytest.Config, s: Setting, environ: dict[str, str],
            env_path: Path | None, env_values: dict[str, EnvValue]) -> tuple[Any, str] | None:
    if s.option is not None:
        cli = config.getoption(_dest(s))
        if cli is not None:
            return cli, s.option
    if s.env is not None:
        if environ.get(s.env, "") != "":
            return environ[s.env], f"environment variable {s.env}"
        if s.env in env_values and env_values[s.env].value != "":
            return env_values[s.env].value, f"{env_path}:{env_values[s.env].line} ({s.env})"
    ini = config.getini(f"faultloop_{s.field}")
    if ini not in (None, [], ""):
        return ini, f"ini option faultloop_{s.field}"
    return None


def _prepare(s: Setting, raw: Any, source: str) -> Any:
    if s.repeat and isinstance(raw, str):
        return raw.replace(",", " ").split()
    if s.flag and isinstance(raw, str):
        lowered = raw.strip().lower()
        if lowered not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
            raise ConfigError(f"{_name(s)}={raw!r} (from {source}): expected true or false")
        return lowered in ("1", "true", "yes", "on")
    return raw


def _name(s: Setting) -> str:
    return s.env or s.option or s.field


def _describe(err: Any) -> str:
    msg = str(err["msg"])
    ctx = err.get("ctx") or {}
    if "expected" in ctx:
        return f"expected one of {ctx['expected']}"
    return msg[0].lower() + msg[1:]


_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


def time_limit_seconds(text: str, source: str = "TIME") -> int:
    """Slurm's time formats: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S."""
    match = _TIME.match(text.strip())
    if not match:
        raise ConfigError(
            f"TIME={text!r} (from {source}): not a Slurm time limit; use HH:MM:SS, MM:SS, "
            "minutes, or D-HH:MM:SS"
        )
    days, a, b, c = match.groups()
    if days is not None:
        hours, minutes, seconds = int(a), int(b or 0), int(c or 0)
        total = int(days) * 86400 + hours * 3600 + minutes * 60 + seconds
    elif c is not None:
        total = int(a) * 3600 + int(b) * 60 + int(c)
    elif b is not None:
        total = int(a) * 60 + int(b)
    else:
        total = int(a) * 60
    if total <= 0:
        raise ConfigError(f"TIME={text!r} (from {source}): must be longer than zero")
    return total

