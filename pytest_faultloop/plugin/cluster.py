"""The run's Slurm cluster: ``--faultloop-local-cluster N`` starts the package's local cluster
for this run (stopped at its end, Ctrl-C and SIGTERM included) unless one is reachable; the
``slurm_cluster`` fixture describes it."""

from __future__ import annotations

import pytest

from pytest_faultloop.inputs.settings import resolve_one
from pytest_faultloop.jobs.backends.slurm import cluster_reachable
from pytest_faultloop.jobs.backends.slurm_cluster import (
    SlurmCluster,
    cluster_for_run,
    describe_reachable,
)
from pytest_faultloop.plugin.keys import CLUSTER_KEY
from pytest_faultloop.plugin.options import ConfigValues
from pytest_faultloop.plugin.signals import interrupt_on_stop_signals


class ClusterHooks:
    """``--faultloop-local-cluster N``: the run's cluster, said in the report header."""

    def __init__(self, cluster: SlurmCluster) -> None:
        self.cluster = cluster

    def pytest_report_header(self) -> str:
        cluster = self.cluster
        how = "started for this run" if cluster.started else "already running, used as is"
        return (
            f"faultloop: Slurm cluster {how}: {cluster.nodes} node(s) "
            f"({','.join(cluster.node_names)}), SLURM_CONF={cluster.conf}"
        )


def start_for_run(config: pytest.Config) -> None:
    """When ``--faultloop-local-cluster N`` is given (controller or single process): get the
    run its cluster (workers inherit ``SLURM_CONF``). Raises ConfigError."""
    found = resolve_one(ConfigValues(config), "local_cluster")
    if found is None:
        return
    interrupt_on_stop_signals(config)
    cluster = cluster_for_run(found[0], config.add_cleanup)
    config.stash[CLUSTER_KEY] = cluster
    config.pluginmanager.register(ClusterHooks(cluster), "faultloop-cluster")


@pytest.fixture(scope="session")
def slurm_cluster(request: pytest.FixtureRequest) -> SlurmCluster:
    """The run's Slurm cluster (``conf``, ``node_names``, ``partition``); skips when none is
    reachable, saying how to start one."""
    cluster = request.config.stash.get(CLUSTER_KEY, None)
    if cluster is not None:
        return cluster
    reason = cluster_reachable()
    if reason is not None:
        pytest.skip(f"no Slurm cluster reachable: {reason}")
    return describe_reachable()
