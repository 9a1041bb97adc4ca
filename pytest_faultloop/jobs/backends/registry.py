"""The backends a run may name (``FAULTLOOP_BACKEND``), declared once: each is a name, how it
is made from the run's backend options, what the run checks on this machine before its first
job, and whether its job scripts must name the node launcher this machine starts. A new
backend is its class and one line in ``BACKENDS``."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from pytest_faultloop.jobs.backends.host_files import open_shared
from pytest_faultloop.jobs.backends.local import LocalBackend, job_id_counter
from pytest_faultloop.jobs.backends.ports import lease_directory
from pytest_faultloop.jobs.backends.protocol import Backend
from pytest_faultloop.jobs.backends.slurm import SlurmBackend, cluster_reachable
from pytest_faultloop.models.errors import ConfigError


@dataclass(frozen=True)
class BackendOptions:
    """What the run's settings say of its backend."""

    slurm_gres: bool = False


@dataclass(frozen=True)
class BackendChoice:
    name: str
    make: Callable[[BackendOptions], Backend]
    check: Callable[[], None]
    """Raise ConfigError when this machine cannot run the backend's jobs."""
    starts_launchers: bool
    """It starts each node's launcher itself (the job script names the launcher module)."""


def check_host_files() -> None:
    """The local backend's port leases and job-id counter, shared by every user's runs on this
    host, are usable by this one."""
    try:
        lease_directory()
        os.close(open_shared(job_id_counter(), os.O_RDWR, 0o666))
    except OSError as exc:
        raise ConfigError(str(exc)) from None


def check_slurm() -> None:
    reason = cluster_reachable()
    if reason is not None:
        raise ConfigError(f"the slurm backend cannot reach Slurm: {reason}")


BACKENDS = {
    choice.name: choice
    for choice in (
        BackendChoice("local", lambda _: LocalBackend(), check_host_files, starts_launchers=True),
        BackendChoice(
            "slurm", lambda o: SlurmBackend(gres=o.slurm_gres), check_slurm, starts_launchers=False
        ),
    )
}
"""Every backend by name; the first is the default."""


def backend_choice(name: str) -> BackendChoice:
    """The backend ``name`` names; ValueError naming the choices."""
    try:
        return BACKENDS[name]
    except KeyError:
        raise ValueError(f"expected one of {', '.join(map(repr, BACKENDS))}") from None
