"""Every key under which the pytest face keeps an object on pytest's config (``config.stash``)
or hands one to xdist workers, in one place: what a hook can reach, and who owns it.

Only the face reads them; the objects they hold are passed down to the core from here."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # the owners' types only: their modules build the objects
    from pytest_faultloop.jobs.backends.slurm_cluster import SlurmCluster
    from pytest_faultloop.plugin.state import Faultloop

RUN_KEY: pytest.StashKey[Faultloop] = pytest.StashKey()
"""The run in this process (``state.Faultloop``), set once when it is built (``activation``):
its configuration, session, runner and collection."""
RUNDIR_KEY: pytest.StashKey[Path] = pytest.StashKey()
"""This run's directory in this process (``run_dir``)."""
CLUSTER_KEY: pytest.StashKey[SlurmCluster] = pytest.StashKey()
"""The Slurm cluster ``--faultloop-local-cluster`` got the run (``cluster``)."""
CURRENT_ITEM_KEY: pytest.StashKey[pytest.Item] = pytest.StashKey()
"""The Python test running now, for the ``faultloop`` fixture's experiments (``fixtures``)."""
SIGNALS_KEY: pytest.StashKey[bool] = pytest.StashKey()
"""Whether SIGTERM (and a worker's ignored SIGINT) interrupt the run now (``signals``)."""
WORKERINPUT_KEY = "faultloop_rundir"
"""The run directory in the input xdist's controller hands each worker (``workers``)."""
WORKER_CRASH = "faultloop_worker_crash"
"""Set on xdist's report of an item whose worker went down, when the item runs again
(``workers``)."""


def is_crash_rerun(report: pytest.TestReport) -> bool:
    """xdist's report of an item whose worker went down and that runs again: no outcome."""
    return hasattr(report, WORKER_CRASH)
