"""What the workload reads from its environment: node and rank identity, timings, paths.

Slurm (or the local backend's emulation of it) provides ``SLURM_JOB_ID``, ``SLURM_NODEID``,
``SLURM_NNODES``/``SLURM_JOB_NUM_NODES``, ``SLURMD_NODENAME``, ``SLURM_RESTART_COUNT``; the job
script provides ``MASTER_ADDR``, ``MASTER_PORT``, ``GPUS_PER_NODE`` and ``EXPERIMENT_DIR``.
"""

from __future__ import annotations

import os
import shlex
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pytest_faultloop.jobs.workload.envparse import env_int
from pytest_faultloop.jobs.workload.job_knobs import (
    COLLECTIVE_TIMEOUT,
    EXIT_MARGIN,
    FAULT_DELAY_IN_JOB,
    FR_STALL,
    ITER_PERIOD,
    JOB_KNOBS,
    KILL_GRACE,
    STARTUP_TIMEOUT,
)
from pytest_faultloop.models.errors import ConfigError
from pytest_faultloop.models.layout import ExperimentLayout

TORCHRUN_ARGS_VAR = "FAULTLOOP_TORCHRUN_ARGS"
"""Extra torchrun arguments (the torchrun launcher), split as a shell would."""


def _required(env: Mapping[str, str], name: str, meaning: str) -> str:
    value = env.get(name, "").strip()
    if not value:
        raise ConfigError(f"{name} is not set: the workload needs {meaning}")
    return value


def experiment_dir_from(env: Mapping[str, str]) -> Path:
    path = Path(_required(env, "EXPERIMENT_DIR", "the experiment's output directory"))
    if not path.is_dir():
        raise ConfigError(f"EXPERIMENT_DIR={str(path)!r} is not an existing directory")
    return path


@dataclass(frozen=True)
class NodeSpec:
    """One emulated node of the job, as its launcher sees it."""

    job_id: str
    restart: int
    node: int
    nnodes: int
    gpus_per_node: int
    host: str
    experiment_dir: Path

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> NodeSpec:
        nodes_var = "SLURM_NNODES" if env.get("SLURM_NNODES") else "SLURM_JOB_NUM_NODES"
        nnodes = env_int(env, nodes_var, 1, minimum=1)
        node = env_int(env, "SLURM_NODEID", 0, minimum=0)
        if node >= nnodes:
            raise ConfigError(f"SLURM_NODEID={node} is outside the job's {nnodes} node(s)")
        _required(env, "MASTER_ADDR", "the address of rank 0's rendezvous store")
        env_int(env, "MASTER_PORT", 0, minimum=1)
        return cls(
            job_id=_required(env, "SLURM_JOB_ID", "the Slurm job id (it names the log file)"),
            restart=env_int(env, "SLURM_RESTART_COUNT", 0, minimum=0),
            node=node,
            nnodes=nnodes,
            gpus_per_node=env_int(env, "GPUS_PER_NODE", 4, minimum=1),
            host=env.get("SLURMD_NODENAME") or socket.gethostname(),
            experiment_dir=experiment_dir_from(env),
        )

    @property
    def world_size(self) -> int:
        return self.nnodes * self.gpus_per_node

    def global_rank(self, local_rank: int) -> int:
        return self.node * self.gpus_per_node + local_rank

    @property
    def log_path(self) -> Path:
        """The seed's ``logs/slurm/<JOB_ID>.<RESTART>.1.main_workload.log``."""
        return ExperimentLayout(self.experiment_dir).workload_log(self.job_id, self.restart)


@dataclass(frozen=True)
class RankIdentity:
    """Who this process is in the job: torchrun-style variables, else Slurm's per-task ones."""

    rank: int
    local_rank: int
    world_size: int
    gpus_per_node: int
    host: str

    @property
    def node(self) -> int:
        return self.rank // self.gpus_per_node

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> RankIdentity:
        if env.get("RANK"):
            rank = env_int(env, "RANK", 0, minimum=0)
            local_rank = env_int(env, "LOCAL_RANK", 0, minimum=0)
            world = env_int(env, "WORLD_SIZE", 1, minimum=1)
            per_node = env_int(env, "LOCAL_WORLD_SIZE", 1, minimum=1)
        else:
            rank = env_int(env, "SLURM_PROCID", 0, minimum=0)
            local_rank = env_int(env, "SLURM_LOCALID", 0, minimum=0)
            world = env_int(env, "SLURM_NTASKS", 1, minimum=1)
            per_node = env_int(env, "GPUS_PER_NODE", world, minimum=1)
        if rank >= world:
            raise ConfigError(f"rank {rank} is outside the world of {world} rank(s)")
        return cls(
            rank, local_rank, world, per_node, env.get("SLURMD_NODENAME") or socket.gethostname()
        )


@dataclass(frozen=True)
class TrainSettings:
    """Timings of the training loop (``FAULTLOOP_*`` variables) and where it writes."""

    experiment_dir: Path
    collective_timeout_s: float
    """``FAULTLOOP_COLLECTIVE_TIMEOUT`` (:mod:`pytest_faultloop.jobs.workload.job_knobs`)."""
    fr_stall_s: float
    """``FAULTLOOP_FR_STALL_S``."""
    iter_period_s: float
    """``FAULTLOOP_ITER_PERIOD_S``."""
    anchor_iter: int
    """``FAULT_AT_ITER``: the injector's anchor; training runs past it."""
    run_after_anchor_s: float
    """``FAULT_DELAY`` + ``FAULTLOOP_EXIT_MARGIN_S``: how long training goes on after the anchor."""

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> TrainSettings:
        timeout = COLLECTIVE_TIMEOUT.read(env)
        stall = FR_STALL.read(env, computed=timeout / 2)
        if stall >= timeout:
            raise ConfigError(
                f"FAULTLOOP_FR_STALL_S={stall} must be shorter than "
                f"FAULTLOOP_COLLECTIVE_TIMEOUT={timeout} (dumps must come before the timeout)"
            )
        return cls(
            experiment_dir=experiment_dir_from(env),
            collective_timeout_s=timeout,
            fr_stall_s=stall,
            iter_period_s=ITER_PERIOD.read(env),
            anchor_iter=env_int(env, "FAULT_AT_ITER", 5, minimum=0),
            run_after_anchor_s=FAULT_DELAY_IN_JOB.read(env) + EXIT_MARGIN.read(env),
        )


def startup_timeout_from(env: Mapping[str, str], world_size: int) -> float:
    """``FAULTLOOP_STARTUP_TIMEOUT``: how long a rank may take to join the job. By default it
    grows with the world size and with the machine's load, since every rank imports torch and
    connects while other jobs compete for the CPUs."""
    load = os.getloadavg()[0] / (os.cpu_count() or 1)
    return STARTUP_TIMEOUT.read(env, computed=startup_timeout_default(world_size, load))


def startup_timeout_default(world_size: int, load_per_cpu: float) -> float:
    """``(30 + 2 × world_size) × max(1, load average / CPUs)`` seconds, to 0.1 s."""
    return round((30.0 + 2.0 * world_size) * max(1.0, load_per_cpu), 1)


def kill_grace_from(env: Mapping[str, str]) -> float:
    """``FAULTLOOP_KILL_GRACE_S`` (:mod:`pytest_faultloop.jobs.workload.job_knobs`)."""
    return KILL_GRACE.read(env)


HINTS_VAR = "FAULTLOOP_WORKLOAD_HINTS"

LAUNCHERS = ("fork", "torchrun")
"""How a node starts its ranks: ``fork`` (this package's launcher, fast) or ``torchrun``
(PyTorch's elastic agent, the text real jobs print)."""


def hints_from(env: Mapping[str, str]) -> bool:
    """``FAULTLOOP_WORKLOAD_HINTS=1``: the workload also logs lines real jobs do not print (which
    rank failed in which collective, where its flight recorder dump went). Off by default, so
    analyzers are scored on what a real training job prints."""
    raw = env.get(HINTS_VAR, "").strip().lower()
    if raw in ("", "0", "false", "no", "off"):
        return False
    if raw in ("1", "true", "yes", "on"):
        return True
    raise ConfigError(f"{HINTS_VAR}={raw!r} is not a switch: use 1 or 0")


def launcher_from(env: Mapping[str, str]) -> str:
    """``FAULTLOOP_LAUNCHER``: ``fork`` (default) or ``torchrun``."""
    raw = env.get("FAULTLOOP_LAUNCHER", "").strip() or LAUNCHERS[0]
    if raw not in LAUNCHERS:
        raise ConfigError(f"FAULTLOOP_LAUNCHER={raw!r} is not a launcher; use fork or torchrun")
    return raw


def check_job_environment(env: Mapping[str, str], origin: Callable[[str], str]) -> None:
    """Raise ConfigError for the first variable of ``env`` that would stop every job before
    its fault is armed (a knob that is not a number of seconds at or above its floor, a
    flight-recorder stall not shorter than the collective timeout, a hints switch that is
    neither 1 nor 0): one line naming it, its value, where it came from (``origin(name)``)
    and the fix, so that the run can refuse it before any job is submitted."""
    stops = "every job would stop before its fault is armed"
    for knob in JOB_KNOBS:
        try:
            knob.read(env, computed=knob.minimum)
        except ConfigError:
            raise ConfigError(
                f"{knob.name}={env[knob.name]!r} (from {origin(knob.name)}): not a number of "
                f"seconds of at least {knob.minimum:g}; {stops}: give one, or unset it "
                f"(default: {knob.shown_default})"
            ) from None
    timeout = COLLECTIVE_TIMEOUT.read(env)
    if FR_STALL.read(env, computed=timeout / 2) >= timeout:
        raise ConfigError(
            f"{FR_STALL.name}={env[FR_STALL.name]!r} (from {origin(FR_STALL.name)}): not "
            f"shorter than {COLLECTIVE_TIMEOUT.name}={timeout:g}, so the flight recorder would "
            "not dump before the timeout: lower it, or unset it (default: half the timeout)"
        )
    try:
        hints_from(env)
    except ConfigError:
        raise ConfigError(
            f"{HINTS_VAR}={env[HINTS_VAR]!r} (from {origin(HINTS_VAR)}): not a switch; {stops}: "
            "use 1 or 0, or unset it (default: 0)"
        ) from None
    try:
        torchrun_extra_args(env)
    except ConfigError as exc:
        raise ConfigError(
            f"{exc} (from {origin(TORCHRUN_ARGS_VAR)}); every torchrun job would stop before "
            "it starts: quote it as a shell would, or unset it"
        ) from None


def torchrun_extra_args(env: Mapping[str, str]) -> list[str]:
    """``FAULTLOOP_TORCHRUN_ARGS``, split as a shell would: more arguments for torchrun."""
    try:
        return shlex.split(env.get(TORCHRUN_ARGS_VAR, ""))
    except ValueError as exc:
        raise ConfigError(f"{TORCHRUN_ARGS_VAR}={env[TORCHRUN_ARGS_VAR]!r}: {exc}") from None
