"""Run settings, resolved once: command line > environment > env file > ini > defaults.

Every setting is one field of :class:`Settings`: its type, default and validator, and its row
(:class:`Setting`) naming it in each source — the seed's environment name, a
``faultloop_<name>`` ini key and, where a user would want one, a ``--faultloop-*`` option.
:mod:`pytest_faultloop.plugin.options` registers the rows with pytest.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Protocol, Union, get_args, get_origin

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from pytest_faultloop.analyzers.kinds import fr_kind, log_kind
from pytest_faultloop.inputs.envfile import EnvValue, read_env_file
from pytest_faultloop.inputs.perturb.catalogue import compositions
from pytest_faultloop.jobs.backends.registry import backend_choice
from pytest_faultloop.models.analysis import FrScopeLimit
from pytest_faultloop.models.errors import ConfigError
from pytest_faultloop.models.setting_types import (
    DEFAULT_FAULT_DELAY_S,
    DEFAULT_TIME,
    FaultDelay,
    RanksPerNode,
    SlurmTime,
)
from pytest_faultloop.store.session_dir import TSV_UNFIT, fits_the_tsv

DEFAULT_ENV_FILE = Path("scripts/user.env")
SESSION_NAMES = ("session", "compare")
"""Settings naming a session: an empty one given on the command line is an error, never a
silent new session (an empty environment variable counts as unset, as everywhere)."""


def _log_analyzer_spec(spec: str) -> str:
    log_kind(spec)  # ValueError naming the kinds
    return spec


def _backend_name(name: str) -> str:
    backend_choice(name)  # ValueError naming the backends
    return name


def _fr_analyzer_spec(spec: str) -> str:
    fr_kind(spec)
    return spec


def _tsv_cell(path: Path) -> Path:
    if not fits_the_tsv(path):
        raise ValueError(TSV_UNFIT)
    return path


SettingKind = Literal["flag", "list", "int", "float", "string"]

GROUPS = {
    "run": "faultloop: what runs (pools, workload, jobs)",
    "slurm": "faultloop: Slurm",
    "analyzers": "faultloop: analyzers",
    "judge": "faultloop: judge and pass rule",
    "session": "faultloop: session and reports",
}
"""Help group -> its heading in ``pytest --help``, in this order."""


@dataclass(frozen=True)
class Setting:
    """How one setting is named in each source and told in ``pytest --help``. It is attached to
    its field of :class:`Settings` (``Annotated[type, Setting(...)] = default``), which gives it
    its type, default and validator; :data:`SETTINGS` reads the rows back with ``field``,
    ``kind`` and the help (``{default}`` rendered from the field's default) filled in."""

    env: str | None
    """The seed's environment variable (also read from the env file)."""
    option: str | None
    """The ``--faultloop-*`` option, where a user would want one."""
    help: str
    metavar: str | None = None
    group: str = "run"
    per_experiment: bool = False
    """A Python test may choose it for one experiment (``faultloop.run(entry, time=...)``):
    :class:`~pytest_faultloop.models.Overrides` has a field of the same type."""
    field: str = ""
    kind: SettingKind = "string"
    """How the command line and the ini file take it: a flag, a repeatable list, a number or
    a string."""

    @property
    def dest(self) -> str:
        """The option's attribute on ``config.option`` (and the ini key)."""
        return f"faultloop_{self.field}"


def _row(
    env: str | None,
    option: str | None,
    help: str,
    metavar: str | None = None,
    *,
    group: str = "run",
    per_experiment: bool = False,
) -> Setting:
    return Setting(env, option, help, metavar, group, per_experiment)


class Settings(BaseModel):
    """The resolved configuration of one pytest run, one field per setting: its type, default,
    validator and names (the :class:`Setting` row). Holds no secrets (keys are read from the
    environment or key files only where they are used)."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    # -- what runs --
    pools: Annotated[
        list[str],
        _row(
            None,
            "--faultloop-pool",
            "pool(s) to run, from experiments/<name>.pool; repeat or comma-separate "
            "(default pool: {default})",
            "NAME",
        ),
    ] = ["default"]
    pool_override: Annotated[
        str | None, _row("POOL", None, "space-separated entries that replace the pool")
    ] = None
    workload: Annotated[
        str,
        _row(
            "WORKLOAD",
            "--faultloop-workload",
            "registered workload (experiments/workloads.toml; default {default})",
            "NAME",
            per_experiment=True,
        ),
    ] = "tiny_gloo"
    workloads_file: Annotated[
        Path | None,
        _row(
            "FAULTLOOP_WORKLOADS",
            "--faultloop-workloads",
            "workload registry file (default: workloads.toml beside the pools)",
            "FILE",
        ),
    ] = None
    backend: Annotated[
        str,
        AfterValidator(_backend_name),
        _row(
            "FAULTLOOP_BACKEND",
            "--faultloop-backend",
            "where jobs run: local (processes here) or slurm (sbatch); default {default}",
            "NAME",
        ),
    ] = "local"
    gpus_per_node: Annotated[
        RanksPerNode,
        _row(
            "GPUS_PER_NODE",
            "--faultloop-gpus-per-node",
            "GPUs (ranks) per node (default {default})",
            "N",
            per_experiment=True,
        ),
    ] = 4
    time: Annotated[
        SlurmTime | None,
        _row(
            "TIME",
            "--faultloop-time",
            "per-job wall-clock limit, Slurm format (default: the workload's, else "
            f"{DEFAULT_TIME})",
            "LIMIT",
            per_experiment=True,
        ),
    ] = None
    fault_delay: Annotated[
        FaultDelay | None,
        _row(
            "FAULT_DELAY",
            "--faultloop-fault-delay",
            "seconds from the iteration anchor to the fault (default: the workload's, else "
            f"{DEFAULT_FAULT_DELAY_S:g})",
            "S",
            per_experiment=True,
        ),
    ] = None
    sbatch_script: Annotated[
        Path | None,
        _row(
            "SBATCH_SCRIPT",
            "--faultloop-sbatch-script",
            "job script to submit (default: the workload's)",
            "FILE",
            group="slurm",
            per_experiment=True,
        ),
    ] = None
    launcher: Annotated[
        Literal["fork", "torchrun"] | None,
        _row(
            "FAULTLOOP_LAUNCHER",
            "--faultloop-launcher",
            "how a CPU workload's nodes start their ranks: fork (fast) or torchrun (PyTorch's "
            "elastic agent) (default: the workload's)",
            "NAME",
        ),
    ] = None
    batch_size: Annotated[
        int,
        Field(ge=1),
        _row(
            "BATCH_SIZE",
            "--faultloop-batch-size",
            "most jobs in flight at once, for the whole run (default {default})",
            "N",
        ),
    ] = 2
    schedule: Annotated[
        Literal["window", "pairs"],
        _row(
            "FAULTLOOP_SCHEDULE",
            "--faultloop-schedule",
            "window (next job as soon as a slot frees) or pairs (the seed's batches); "
            "default {default}",
            "MODE",
        ),
    ] = "window"
    poll_interval: Annotated[
        float,
        Field(gt=0),
        _row(
            "POLL_INTERVAL",
            "--faultloop-poll-interval",
            "longest seconds between queue polls (default {default})",
            "S",
        ),
    ] = 30.0
    trials: Annotated[
        int,
        Field(ge=1),
        _row(
            "FAULTLOOP_TRIALS",
            "--faultloop-trials",
            "run each experiment N times (N jobs; a pool entry may say its own: ENTRY*N); an "
            "item passes when its pass rate reaches --faultloop-min-pass-rate (default "
            "{default})",
            "N",
        ),
    ] = 1
    retries_invalid: Annotated[
        int,
        Field(ge=0),
        _row(
            "FAULTLOOP_RETRIES_INVALID",
            "--faultloop-retries-invalid",
            "resubmit a job that ended before its fault fired up to K more times, each "
            "attempt in the TSV and report, its files kept in attempts/<JOB_ID>/ (default "
            "{default}; never a failed control)",
            "K",
        ),
    ] = 1
    keep_jobs: Annotated[
        bool,
        _row(
            "FAULTLOOP_KEEP_JOBS",
            "--faultloop-keep-jobs",
            "on interrupt, leave jobs in flight running (recorded)",
        ),
    ] = False
    env_file: Annotated[
        Path | None,
        _row(
            None,
            "--faultloop-env-file",
            "the seed's user.env (default scripts/user.env when present)",
            "FILE",
        ),
    ] = None

    # -- Slurm --
    local_cluster: Annotated[
        int | None,
        Field(ge=1),
        _row(
            "FAULTLOOP_LOCAL_CLUSTER",
            "--faultloop-local-cluster",
            "start the local Slurm cluster with N nodes for this run and stop it at the end "
            "(unless one is reachable); the backend defaults to slurm",
            "N",
            group="slurm",
        ),
    ] = None
    account: Annotated[
        str | None, _row("ACCOUNT", "--faultloop-account", "SLURM account", "NAME", group="slurm")
    ] = None
    partition: Annotated[
        str | None,
        _row("PARTITION", "--faultloop-partition", "SLURM partition", "NAME", group="slurm"),
    ] = None
    slurm_gres: Annotated[
        bool,
        _row(
            "FAULTLOOP_SLURM_GRES",
            "--faultloop-slurm-gres",
            "pass --gpus-per-node to sbatch (clusters with GPU GRES)",
            group="slurm",
        ),
    ] = False
    megatron_repo_host_path: Annotated[
        str | None, _row("MEGATRON_REPO_HOST_PATH", None, "Megatron checkout", group="slurm")
    ] = None
    shared_tmp_base_dir: Annotated[
        str | None,
        _row("SHARED_TMP_BASE_DIR", None, "shared tmp on the cluster", group="slurm"),
    ] = None
    workspace_host_path: Annotated[
        str | None, _row("WORKSPACE_HOST_PATH", None, "host path of /workspace", group="slurm")
    ] = None
    container_image: Annotated[
        str | None,
        _row("CONTAINER_IMAGE", None, "container image of GB200 scripts", group="slurm"),
    ] = None

    # -- analyzers --
    log_analyzer: Annotated[
        str,
        AfterValidator(_log_analyzer_spec),
        _row(
            "FAULTLOOP_LOG_ANALYZER",
            "--faultloop-log-analyzer",
            "builtin, naive (the baseline: Root Cause rank, else the first rank on an error "
            "line), llm, or 'cmd:COMMAND {log}' (default {default})",
            "SPEC",
            group="analyzers",
        ),
    ] = "builtin"
    fr_analyzer: Annotated[
        str,
        AfterValidator(_fr_analyzer_spec),
        _row(
            "FAULTLOOP_FR_ANALYZER",
            "--faultloop-fr-analyzer",
            "builtin or 'cmd:COMMAND {fr_dir}' (default {default})",
            "SPEC",
            group="analyzers",
        ),
    ] = "builtin"
    fr_jobs: Annotated[
        int | None,
        Field(ge=1),
        _row(
            "FAULTLOOP_FR_JOBS",
            "--faultloop-fr-jobs",
            "processes that decode flight-recorder dumps; the answer is the same for any N "
            "(default: one per core, each given 32 dumps or more)",
            "N",
            group="analyzers",
        ),
    ] = None
    analyzer_timeout: Annotated[
        float,
        Field(gt=0),
        _row(
            "FAULTLOOP_ANALYZER_TIMEOUT",
            "--faultloop-analyzer-timeout",
            "seconds an external or LLM analyzer may take (default {default})",
            "S",
            group="analyzers",
        ),
    ] = 600.0
    nvrx_llm_model: Annotated[
        str,
        _row(
            "NVRX_LLM_MODEL",
            "--faultloop-llm-model",
            "model of the LLM log analyzer (default {default})",
            "MODEL",
            group="analyzers",
        ),
    ] = "nvidia/nemotron-3-super-120b-a12b"
    nvrx_llm_base_url: Annotated[
        str,
        _row(
            "NVRX_LLM_BASE_URL",
            "--faultloop-llm-base-url",
            "OpenAI-compatible endpoint of the LLM log analyzer (default {default})",
            "URL",
            group="analyzers",
        ),
    ] = "https://integrate.api.nvidia.com/v1"
    llm_api_key_file: Annotated[
        Path | None,
        _row("LLM_API_KEY_FILE", None, "file with the log-analysis key", group="analyzers"),
    ] = None

    # -- judge and pass rule --
    judge: Annotated[
        Literal["deterministic", "llm", "hybrid"],
        _row(
            "FAULTLOOP_JUDGE",
            "--faultloop-judge",
            "deterministic, llm or hybrid (default {default})",
            "NAME",
            group="judge",
        ),
    ] = "deterministic"
    judge_model: Annotated[
        str,
        _row(
            "JUDGE_MODEL",
            "--faultloop-judge-model",
            "model of the LLM judge (default {default})",
            "MODEL",
            group="judge",
        ),
    ] = "qwen/qwen3.5-397b-a17b"
    judge_base_url: Annotated[
        str,
        _row(
            "JUDGE_BASE_URL",
            "--faultloop-judge-base-url",
            "OpenAI-compatible endpoint of the LLM judge (default {default})",
            "URL",
            group="judge",
        ),
    ] = "https://integrate.api.nvidia.com/v1"
    judge_api_key_file: Annotated[
        Path | None, _row("JUDGE_API_KEY_FILE", None, "file with the judge's key", group="judge")
    ] = None
    fr_scope: Annotated[
        FrScopeLimit,
        _row(
            "FAULTLOOP_FR_SCOPE",
            "--faultloop-fr-scope",
            "coarsest FR answer that still passes: rank (only the exact rank), node (the "
            "culprit's node) or segment; default {default}",
            "SCOPE",
            group="judge",
        ),
    ] = "rank"
    fr_segment_size: Annotated[
        int,
        Field(ge=1),
        _row(
            "FR_SEGMENT_SIZE",
            "--faultloop-segment-size",
            "ranks per segment for coarse FR scoring (default {default})",
            "N",
            group="judge",
        ),
    ] = 32
    accept_partial: Annotated[
        bool,
        _row(
            "FAULTLOOP_ACCEPT_PARTIAL",
            "--faultloop-accept-partial",
            "count 'partial' rank_primary/fault_described as a pass",
            group="judge",
        ),
    ] = False
    min_pass_rate: Annotated[
        float,
        Field(gt=0, le=1),
        _row(
            "FAULTLOOP_MIN_PASS_RATE",
            "--faultloop-min-pass-rate",
            "share of an experiment's trials that must pass a dimension (default {default}: all)",
            "RATE",
            group="judge",
        ),
    ] = 1.0
    max_false_stop: Annotated[
        float | None,
        Field(ge=0, le=1),
        _row(
            "FAULTLOOP_MAX_FALSE_STOP",
            "--faultloop-max-false-stop",
            "fail the run when the upper bound of the false-STOP rate's Wilson interval (STOP "
            "where RESTART or CONTINUE was right: a job killed that would have resumed) exceeds "
            "this share, e.g. 0.1 (default: no gate)",
            "RATE",
            group="judge",
        ),
    ] = None
    restart_policy: Annotated[
        Path | None,
        _row(
            "FAULTLOOP_RESTART_POLICY",
            "--faultloop-restart-policy",
            "TOML file: expected restart decision per fault type",
            "FILE",
            group="judge",
        ),
    ] = None

    # -- session and reports --
    base_experiments_dir: Annotated[
        Path,
        AfterValidator(Path.expanduser),
        AfterValidator(_tsv_cell),
        _row(
            "BASE_EXPERIMENTS_DIR",
            "--faultloop-base-dir",
            "root of all output (default {default})",
            "DIR",
            group="session",
        ),
    ] = Path("~/nvrx-attr-experiments")
    session: Annotated[
        str | None,
        _row(
            "FAULTLOOP_SESSION",
            "--faultloop-session",
            "continue a session: its directory or 'last'",
            "DIR",
            group="session",
        ),
    ] = None
    reanalyze: Annotated[
        bool,
        _row(
            "FAULTLOOP_REANALYZE",
            "--faultloop-reanalyze",
            "only re-analyze and re-judge a session's stored artifacts (no jobs)",
            group="session",
        ),
    ] = False
    perturb: Annotated[
        str | None,
        _row(
            "FAULTLOOP_PERTURB",
            "--faultloop-perturb",
            "also score each replayed case (and, with --faultloop-reanalyze, each stored "
            "experiment) under these perturbations of its artifacts: catalogue names, + to "
            "compose (ts+ansi), comma-separated, or all; python -m pytest_faultloop perturb "
            "--list",
            "NAMES",
            group="session",
        ),
    ] = None
    compare: Annotated[
        str | None,
        _row(
            "FAULTLOOP_COMPARE",
            "--faultloop-compare",
            "after the run, paired comparison (improved/regressed per dimension, McNemar p) "
            "with 'last' (the previous history record; after a re-analysis, the revision it "
            "re-scored), 'previous' (that revision), a revision (NAME, SESSION@NAME) or a "
            "session dir",
            "SESSION",
            group="session",
        ),
    ] = None


def _kind(annotation: Any) -> SettingKind:
    """How a field's type is given on the command line and in the ini file."""
    if get_origin(annotation) in (Union, UnionType):  # ``X | None``: the X
        annotation = next(t for t in get_args(annotation) if t is not type(None))
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if annotation is bool:
        return "flag"
    if get_origin(annotation) is list:
        return "list"
    if annotation is int:
        return "int"
    if annotation is float:
        return "float"
    return "string"


def _shown(default: Any) -> str:
    if isinstance(default, list):
        return ",".join(str(v) for v in default)
    if isinstance(default, float):
        return f"{default:g}"
    return str(default)


def _rows() -> tuple[Setting, ...]:
    rows = []
    for name, info in Settings.model_fields.items():
        row = next(m for m in info.metadata if isinstance(m, Setting))
        help = row.help.replace("{default}", _shown(info.default))
        rows.append(replace(row, field=name, kind=_kind(info.annotation), help=help))
    return tuple(rows)


SETTINGS = _rows()
"""Every setting's row, in the order of ``pytest --help``."""
BY_FIELD = {s.field: s for s in SETTINGS}


class OptionValues(Protocol):
    """The values a run was started with on its command line and in its ini file (pytest's
    config, adapted by the pytest face)."""

    @property
    def rootpath(self) -> Path: ...

    def option(self, dest: str) -> Any:
        """The command line's value (None where not given)."""

    def ini(self, dest: str) -> Any:
        """The ini file's value; ValueError or TypeError where it has the wrong type."""


@dataclass(frozen=True)
class Resolved:
    settings: Settings
    sources: dict[str, str]
    """Field -> where its value came from (for messages)."""


def resolve(given: OptionValues, environ: dict[str, str] | None = None) -> Resolved:
    """Resolve every setting; a bad value raises ConfigError naming the setting and source."""
    environ = dict(os.environ) if environ is None else environ
    env_path, env_values = _env_file(given, environ)
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for s in SETTINGS:
        if s.field == "env_file":
            continue
        found = _lookup(given, s, environ, env_path, env_values)
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
    for field in SESSION_NAMES:
        named = getattr(settings, field)
        if named is not None and not named.strip():
            raise ConfigError(
                f"{BY_FIELD[field].option}={named!r} (from {sources[field]}): empty; give a "
                "session directory or 'last', or leave the option out for a new session"
            )
    if settings.perturb is not None:
        compositions(settings.perturb, _name(BY_FIELD["perturb"]), sources["perturb"])
    if settings.local_cluster is not None and "backend" not in sources:
        settings = settings.model_copy(update={"backend": "slurm"})
        sources["backend"] = sources["local_cluster"]
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
    given: OptionValues, field: str, environ: dict[str, str] | None = None
) -> tuple[Any, str] | None:
    """One setting, validated, and where it came from (None: not given anywhere); for what
    must be known before the rest is needed (ConfigError when bad)."""
    environ = dict(os.environ) if environ is None else environ
    env_path, env_values = _env_file(given, environ)
    s = BY_FIELD[field]
    found = _lookup(given, s, environ, env_path, env_values)
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
    given: OptionValues, environ: dict[str, str]
) -> tuple[Path | None, dict[str, EnvValue]]:
    named = given.option("faultloop_env_file")
    if named is not None:
        path = Path(named)
        return path, read_env_file(path)
    default = given.rootpath / DEFAULT_ENV_FILE
    if default.is_file():
        return default, read_env_file(default)
    return None, {}


def _lookup(
    given: OptionValues,
    s: Setting,
    environ: dict[str, str],
    env_path: Path | None,
    env_values: dict[str, EnvValue],
) -> tuple[Any, str] | None:
    if s.option is not None:
        cli = given.option(s.dest)
        if cli is not None:
            return cli, s.option
    if s.env is not None:
        if environ.get(s.env, "") != "":
            return environ[s.env], f"environment variable {s.env}"
        if s.env in env_values and env_values[s.env].value != "":
            return env_values[s.env].value, f"{env_path}:{env_values[s.env].line} ({s.env})"
    try:
        ini = given.ini(s.dest)
    except (TypeError, ValueError) as exc:  # the ini parser typed the key: refused
        raise ConfigError(
            f"{_name(s)} (from ini option {s.dest}): {exc}; write {_INI_WANTED[s.kind]}"
        ) from None
    if ini not in (None, [], ""):
        return ini, f"ini option {s.dest}"
    return None


_INI_WANTED: dict[SettingKind, str] = {
    "flag": "true or false",
    "list": "one name per line (a list of strings in TOML)",
    "int": "a whole number (unquoted in TOML)",
    "float": "a number (unquoted in TOML)",
    "string": "a string (quoted in TOML)",
}


def _prepare(s: Setting, raw: Any, source: str) -> Any:
    if s.kind == "list" and isinstance(raw, str):
        return raw.replace(",", " ").split()
    if s.kind == "flag" and isinstance(raw, str):
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
