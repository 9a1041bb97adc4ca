"""The one settings table: each setting's environment name (the seed's), ``--faultloop-*``
option and ``faultloop_<name>`` ini key, its help group, and their registration with pytest."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import pytest

GROUPS = {
    "run": "faultloop: what runs (pools, workload, jobs)",
    "slurm": "faultloop: Slurm",
    "analyzers": "faultloop: analyzers",
    "judge": "faultloop: judge and pass rule",
    "session": "faultloop: session and reports",
}
"""Help group -> its heading in ``pytest --help``, in this order."""

IniType = Literal["string", "int", "float"]


@dataclass(frozen=True)
class Setting:
    """How one field is named in each source; ``group`` is its section of ``pytest --help``,
    ``ini`` the ini key's type (flags are bool, repeatable options linelist)."""

    field: str
    env: str | None
    option: str | None
    help: str
    metavar: str | None = None
    flag: bool = False
    repeat: bool = False
    group: str = "run"
    ini: IniType = "string"


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "pools",
        None,
        "--faultloop-pool",
        "pool(s) to run, from experiments/<name>.pool; repeat or comma-separate (default: default)",
        "NAME",
        repeat=True,
    ),
    Setting("pool_override", "POOL", None, "space-separated entries that replace the pool"),
    Setting(
        "workload",
        "WORKLOAD",
        "--faultloop-workload",
        "registered workload (experiments/workloads.toml; default tiny_gloo)",
        "NAME",
    ),
    Setting(
        "workloads_file",
        "FAULTLOOP_WORKLOADS",
        "--faultloop-workloads",
        "workload registry file (default: workloads.toml beside the pools)",
        "FILE",
    ),
    Setting(
        "backend",
        "FAULTLOOP_BACKEND",
        "--faultloop-backend",
        "where jobs run: local (processes here, default) or slurm (sbatch)",
        "NAME",
    ),
    Setting(
        "local_cluster",
        "FAULTLOOP_LOCAL_CLUSTER",
        "--faultloop-local-cluster",
        "start the local Slurm cluster with N nodes for this run and stop it at the end "
        "(unless one is reachable); the backend defaults to slurm",
        "N",
        group="slurm",
        ini="int",
    ),
    Setting("account", "ACCOUNT", "--faultloop-account", "SLURM account", "NAME", group="slurm"),
    Setting(
        "partition", "PARTITION", "--faultloop-partition", "SLURM partition", "NAME", group="slurm"
    ),
    Setting(
        "gpus_per_node",
        "GPUS_PER_NODE",
        "--faultloop-gpus-per-node",
        "GPUs (ranks) per node (default 4)",
        "N",
        ini="int",
    ),
    Setting(
        "time",
        "TIME",
        "--faultloop-time",
        "per-job wall-clock limit, Slurm format (default: the workload's, else 00:30:00)",
        "LIMIT",
    ),
    Setting(
        "batch_size",
        "BATCH_SIZE",
        "--faultloop-batch-size",
        "most jobs in flight at once, for the whole run (default 2)",
        "N",
        ini="int",
    ),
    Setting(
        "poll_interval",
        "POLL_INTERVAL",
        "--faultloop-poll-interval",
        "longest seconds between queue polls (default 30)",
        "S",
        ini="float",
    ),
    Setting(
        "base_experiments_dir",
        "BASE_EXPERIMENTS_DIR",
        "--faultloop-base-dir",
        "root of all output (default ~/nvrx-attr-experiments)",
        "DIR",
        group="session",
    ),
    Setting(
        "megatron_repo_host_path",
        "MEGATRON_REPO_HOST_PATH",
        None,
        "Megatron checkout",
        group="slurm",
    ),
    Setting(
        "shared_tmp_base_dir",
        "SHARED_TMP_BASE_DIR",
        None,
        "shared tmp on the cluster",
        group="slurm",
    ),
    Setting(
        "workspace_host_path", "WORKSPACE_HOST_PATH", None, "host path of /workspace", group="slurm"
    ),
    Setting(
        "container_image",
        "CONTAINER_IMAGE",
        None,
        "container image of GB200 scripts",
        group="slurm",
    ),
    Setting(
        "log_analyzer",
        "FAULTLOOP_LOG_ANALYZER",
        "--faultloop-log-analyzer",
        "builtin (default), naive (the baseline: Root Cause rank, else the first rank on an "
        "error line), llm, or 'cmd:COMMAND {log}'",
        "SPEC",
        group="analyzers",
    ),
    Setting(
        "fr_analyzer",
        "FAULTLOOP_FR_ANALYZER",
        "--faultloop-fr-analyzer",
        "builtin (default) or 'cmd:COMMAND {fr_dir}'",
        "SPEC",
        group="analyzers",
    ),
    Setting(
        "llm_api_key_file",
        "LLM_API_KEY_FILE",
        None,
        "file with the log-analysis key",
        group="analyzers",
    ),
    Setting(
        "judge",
        "FAULTLOOP_JUDGE",
        "--faultloop-judge",
        "deterministic (default), llm or hybrid",
        "NAME",
        group="judge",
    ),
    Setting(
        "judge_api_key_file", "JUDGE_API_KEY_FILE", None, "file with the judge's key", group="judge"
    ),
    Setting(
        "nvrx_llm_model",
        "NVRX_LLM_MODEL",
        "--faultloop-llm-model",
        "model of the LLM log analyzer",
        "MODEL",
        group="analyzers",
    ),
    Setting(
        "nvrx_llm_base_url",
        "NVRX_LLM_BASE_URL",
        "--faultloop-llm-base-url",
        "OpenAI-compatible endpoint of the LLM log analyzer",
        "URL",
        group="analyzers",
    ),
    Setting(
        "judge_model",
        "JUDGE_MODEL",
        "--faultloop-judge-model",
        "model of the LLM judge",
        "MODEL",
        group="judge",
    ),
    Setting(
        "judge_base_url",
        "JUDGE_BASE_URL",
        "--faultloop-judge-base-url",
        "OpenAI-compatible endpoint of the LLM judge",
        "URL",
        group="judge",
    ),
    Setting(
        "fr_segment_size",
        "FR_SEGMENT_SIZE",
        "--faultloop-segment-size",
        "ranks per segment for coarse FR scoring (default 32)",
        "N",
        group="judge",
        ini="int",
    ),
    Setting(
        "sbatch_script",
        "SBATCH_SCRIPT",
        "--faultloop-sbatch-script",
        "job script to submit (default: the workload's)",
        "FILE",
        group="slurm",
    ),
    Setting(
        "fault_delay",
        "FAULT_DELAY",
        "--faultloop-fault-delay",
        "seconds from the iteration anchor to the fault (default: the workload's)",
        "S",
        ini="float",
    ),
    Setting(
        "launcher",
        "FAULTLOOP_LAUNCHER",
        "--faultloop-launcher",
        "how a CPU workload's nodes start their ranks: fork (fast) or torchrun (PyTorch's "
        "elastic agent) (default: the workload's)",
        "NAME",
    ),
    Setting(
        "slurm_gres",
        "FAULTLOOP_SLURM_GRES",
        "--faultloop-slurm-gres",
        "pass --gpus-per-node to sbatch (clusters with GPU GRES)",
        flag=True,
        group="slurm",
    ),
    Setting(
        "trials",
        "FAULTLOOP_TRIALS",
        "--faultloop-trials",
        "run each experiment N times (N jobs; a pool entry may say its own: ENTRY*N); an item "
        "passes when its pass rate reaches --faultloop-min-pass-rate (default 1)",
        "N",
        ini="int",
    ),
    Setting(
        "min_pass_rate",
        "FAULTLOOP_MIN_PASS_RATE",
        "--faultloop-min-pass-rate",
        "share of an experiment's trials that must pass a dimension (default 1.0: all)",
        "RATE",
        group="judge",
        ini="float",
    ),
    Setting(
        "retries_invalid",
        "FAULTLOOP_RETRIES_INVALID",
        "--faultloop-retries-invalid",
        "resubmit an experiment whose job failed before its fault fired up to K more times "
        "before it counts as run_invalid (default 1)",
        "K",
        ini="int",
    ),
    Setting(
        "analyzer_timeout",
        "FAULTLOOP_ANALYZER_TIMEOUT",
        "--faultloop-analyzer-timeout",
        "seconds an external or LLM analyzer may take (default 600)",
        "S",
        group="analyzers",
        ini="float",
    ),
    Setting(
        "schedule",
        "FAULTLOOP_SCHEDULE",
        "--faultloop-schedule",
        "window (next job as soon as a slot frees, default) or pairs (the seed's batches)",
        "MODE",
    ),
    Setting(
        "accept_partial",
        "FAULTLOOP_ACCEPT_PARTIAL",
        "--faultloop-accept-partial",
        "count 'partial' rank_primary/fault_described as a pass",
        flag=True,
        group="judge",
    ),
    Setting(
        "fr_scope",
        "FAULTLOOP_FR_SCOPE",
        "--faultloop-fr-scope",
        "coarsest FR answer that still passes: rank (default: only the exact rank), node (the culprit's node) or segment",
        "SCOPE",
        group="judge",
    ),
    Setting(
        "session",
        "FAULTLOOP_SESSION",
        "--faultloop-session",
        "continue a session: its directory or 'last'",
        "DIR",
        group="session",
    ),
    Setting(
        "reanalyze",
        "FAULTLOOP_REANALYZE",
        "--faultloop-reanalyze",
        "only re-analyze and re-judge a session's stored artifacts (no jobs)",
        flag=True,
        group="session",
    ),
    Setting(
        "perturb",
        "FAULTLOOP_PERTURB",
        "--faultloop-perturb",
        "also score each replayed case (and, with --faultloop-reanalyze, each stored "
        "experiment) under these perturbations of its artifacts: catalogue names, + to "
        "compose (ts+ansi), comma-separated, or all; python -m pytest_faultloop perturb --list",
        "NAMES",
        group="session",
    ),
    Setting(
        "keep_jobs",
        "FAULTLOOP_KEEP_JOBS",
        "--faultloop-keep-jobs",
        "on interrupt, leave jobs in flight running (recorded)",
        flag=True,
    ),
    Setting(
        "restart_policy",
        "FAULTLOOP_RESTART_POLICY",
        "--faultloop-restart-policy",
        "TOML file: expected restart decision per fault type",
        "FILE",
        group="judge",
    ),
    Setting(
        "compare",
        "FAULTLOOP_COMPARE",
        "--faultloop-compare",
        "after the run, paired comparison (improved/regressed per dimension, McNemar p) with 'last' (the previous history record) or a session dir",
        "SESSION",
        group="session",
    ),
    Setting(
        "env_file",
        None,
        "--faultloop-env-file",
        "the seed's user.env (default scripts/user.env when present)",
        "FILE",
    ),
)

BY_FIELD = {s.field: s for s in SETTINGS}


def add_options(parser: pytest.Parser) -> None:
    groups = {name: parser.getgroup(f"faultloop-{name}", title) for name, title in GROUPS.items()}
    for s in SETTINGS:
        if s.field != "env_file":
            kind: Literal["linelist", "bool", "string", "int", "float"] = (
                "linelist" if s.repeat else ("bool" if s.flag else s.ini)
            )
            parser.addini(f"faultloop_{s.field}", s.help, type=kind, default=None)
        if s.option is None:
            continue
        group = groups[s.group]
        env_note = f" [env {s.env}]" if s.env else ""
        if s.flag:
            group.addoption(
                s.option, action="store_true", default=None, dest=dest(s), help=s.help + env_note
            )
        else:
            group.addoption(
                s.option,
                action="append" if s.repeat else "store",
                default=None,
                dest=dest(s),
                metavar=s.metavar,
                help=s.help + env_note,
            )


def dest(s: Setting) -> str:
    """The option's attribute on ``config.option``."""
    return f"faultloop_{s.field}"
