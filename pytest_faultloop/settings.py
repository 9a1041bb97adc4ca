"""Run settings, resolved once: command line > environment > env file > ini > defaults.

Every setting of the seed keeps its own environment name and default; each also has an
``faultloop_<name>`` ini key and, where a user would want one, a ``--faultloop-*`` option
(the table is :mod:`pytest_faultloop.options`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from pytest_faultloop.envfile import EnvValue, read_env_file
from pytest_faultloop.errors import ConfigError
from pytest_faultloop.models.analysis import FrScopeLimit
from pytest_faultloop.options import BY_FIELD, SETTINGS, Setting, dest
from pytest_faultloop.perturb.catalogue import compositions

DEFAULT_ENV_FILE = Path("scripts/user.env")
SESSION_NAMES = ("session", "compare")
"""Settings naming a session: an empty one given on the command line is an error, never a
silent new session (an empty environment variable counts as unset, as everywhere)."""


LOG_ANALYZERS = ("builtin", "naive", "llm")
"""The built-in log analyzers: rules, the one-regex baseline, an LLM (or ``cmd:``)."""


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
    launcher: Literal["fork", "torchrun"] | None = None
    slurm_gres: bool = False
    judge: Literal["deterministic", "llm", "hybrid"] = "deterministic"
    log_analyzer: str = "builtin"
    fr_analyzer: str = "builtin"
    analyzer_timeout: float = Field(600.0, gt=0)
    schedule: Literal["window", "pairs"] = "window"
    accept_partial: bool = False
    fr_scope: FrScopeLimit = "rank"
    session: str | None = None
    reanalyze: bool = False
    perturb: str | None = None
    keep_jobs: bool = False
    retries_invalid: int = Field(1, ge=0)
    trials: int = Field(1, ge=1)
    min_pass_rate: float = Field(1.0, gt=0, le=1)
    restart_policy: Path | None = None
    compare: str | None = None
    env_file: Path | None = None

    @field_validator("log_analyzer")
    @classmethod
    def _log_analyzer_spec(cls, spec: str) -> str:
        if spec not in LOG_ANALYZERS and not spec.startswith("cmd:"):
            raise ValueError("expected builtin, naive, llm or 'cmd:COMMAND {log}'")
        return spec

    @field_validator("fr_analyzer")
    @classmethod
    def _fr_analyzer_spec(cls, spec: str) -> str:
        if spec != "builtin" and not spec.startswith("cmd:"):
            raise ValueError("expected builtin or 'cmd:COMMAND {fr_dir}'")
        return spec


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
        s = BY_FIELD[field]
        raise ConfigError(
            f"{_name(s)}={values[field]!r} (from {sources[field]}): {_describe(err)}"
        ) from None
    if settings.time is not None:
        time_limit_seconds(settings.time, sources["time"])
    for field in SESSION_NAMES:
        given = getattr(settings, field)
        if given is not None and not given.strip():
            raise ConfigError(
                f"{BY_FIELD[field].option}={given!r} (from {sources[field]}): empty; give a "
                "session directory or 'last', or leave the option out for a new session"
            )
    if settings.perturb is not None:
        compositions(settings.perturb, _name(BY_FIELD["perturb"]), sources["perturb"])
    if settings.local_cluster is not None and "backend" not in sources:
        settings = settings.model_copy(update={"backend": "slurm"})
        sources["backend"] = sources["local_cluster"]
    settings = settings.model_copy(
        update={"base_experiments_dir": settings.base_experiments_dir.expanduser()}
    )
    return Resolved(settings, sources)


def replaced(settings: Settings, **values: Any) -> Settings:
    """The settings with these fields replaced and validated again (a CLI's per-run choice,
    such as a leaderboard configuration's analyzers); a bad value raises ConfigError naming the
    CLI option (``--log-analyzer=...``)."""
    try:
        return Settings.model_validate({**settings.model_dump(), **values})
    except ValidationError as exc:
        err = exc.errors()[0]
        field = str(err["loc"][0])
        option = "--" + field.replace("_", "-")
        raise ConfigError(f"{option}={values.get(field)!r}: {_describe(err)}") from None


def resolve_one(
    config: pytest.Config, field: str, environ: dict[str, str] | None = None
) -> tuple[Any, str] | None:
    """One setting, validated, and where it came from (None: not given anywhere); for what
    must be known before the rest is needed (ConfigError when bad)."""
    environ = dict(os.environ) if environ is None else environ
    env_path, env_values = _env_file(config, environ)
    s = BY_FIELD[field]
    found = _lookup(config, s, environ, env_path, env_values)
    if found is None:
        return None
    value = _prepare(s, *found)
    try:
        checked = Settings.model_validate({field: value})
    except ValidationError as exc:
        raise ConfigError(
            f"{_name(s)}={value!r} (from {found[1]}): {_describe(exc.errors()[0])}"
        ) from None
    return getattr(checked, field), found[1]


def _env_file(
    config: pytest.Config, environ: dict[str, str]
) -> tuple[Path | None, dict[str, EnvValue]]:
    given = config.getoption("faultloop_env_file")
    if given is not None:
        path = Path(given)
        return path, read_env_file(path)
    default = config.rootpath / DEFAULT_ENV_FILE
    if default.is_file():
        return default, read_env_file(default)
    return None, {}


def _lookup(
    config: pytest.Config,
    s: Setting,
    environ: dict[str, str],
    env_path: Path | None,
    env_values: dict[str, EnvValue],
) -> tuple[Any, str] | None:
    if s.option is not None:
        cli = config.getoption(dest(s))
        if cli is not None:
            return cli, s.option
    if s.env is not None:
        if environ.get(s.env, "") != "":
            return environ[s.env], f"environment variable {s.env}"
        if s.env in env_values and env_values[s.env].value != "":
            return env_values[s.env].value, f"{env_path}:{env_values[s.env].line} ({s.env})"
    name = f"faultloop_{s.field}"
    try:
        ini = config.getini(name)
    except (pytest.UsageError, TypeError, ValueError):
        ini = _raw_ini(config, name)  # not a number: validated (and reported) like any source
    if ini not in (None, [], ""):
        return ini, f"ini option {name}"
    return None


def _raw_ini(config: pytest.Config, name: str) -> Any:
    """An ini value as written, for one pytest's typed ``getini`` refused (pytest keeps it in
    ``Config._inicfg``)."""
    value = getattr(config, "_inicfg", {}).get(name)
    return getattr(value, "value", value)


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
    msg = str(err["msg"]).removeprefix("Value error, ")
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
