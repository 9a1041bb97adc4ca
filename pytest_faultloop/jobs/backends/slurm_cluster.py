"""A Slurm cluster the run's jobs can use: one already reachable, or the package's local
cluster (``local_cluster/start.sh``) started for a run and stopped at its end."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pytest_faultloop.jobs.backends.slurm import DEFAULT_SLURM_CONF, cluster_reachable
from pytest_faultloop.models.errors import ConfigError

SCRIPTS = Path(__file__).resolve().parent / "local_cluster"
"""start.sh and stop.sh of the local cluster (also reachable as ``sbatch/local-cluster``)."""
_START_TIMEOUT_S = 600
"""start.sh may install Slurm with apt first."""


@dataclass(frozen=True)
class SlurmCluster:
    """A Slurm cluster the run's jobs (and a user's own job scripts) can use."""

    conf: Path
    """Its ``slurm.conf``: clients need ``SLURM_CONF`` set to it."""
    node_names: tuple[str, ...]
    """The responding nodes of the default partition."""
    partition: str
    started: bool = False
    """This run started it, and stops it at the end."""

    @property
    def nodes(self) -> int:
        return len(self.node_names)

    @property
    def ctld_pid_file(self) -> Path:
        """Where start.sh's slurmctld records its pid (exists only for a local cluster)."""
        return self.conf.parent / "ctld" / "slurmctld.pid"


def describe_reachable() -> SlurmCluster:
    """The reachable cluster (``SLURM_CONF``, else the default configuration)."""
    conf = Path(os.environ.get("SLURM_CONF", str(DEFAULT_SLURM_CONF)))
    out = subprocess.run(
        ["sinfo", "-h", "-N", "-r", "-o", "%N %P"], capture_output=True, text=True, check=True
    ).stdout
    default = [line.split() for line in out.splitlines() if line.split()[1].endswith("*")]
    names = tuple(sorted({name for name, _ in default}, key=_natural))
    partition = default[0][1].rstrip("*") if default else ""
    return SlurmCluster(conf=conf, node_names=names, partition=partition)


def _natural(name: str) -> tuple[str, int]:
    digits = name.rstrip("0123456789")
    return digits, int(name[len(digits) :] or 0)


class LocalCluster:
    """``start.sh N`` / ``stop.sh`` on one state directory (``LOCAL_CLUSTER_DIR``)."""

    def __init__(self, nodes: int, directory: Path) -> None:
        self.nodes = nodes
        self.directory = directory
        self.env = dict(os.environ, LOCAL_CLUSTER_DIR=str(directory))
        self.env.pop("SLURM_CONF", None)

    @property
    def conf(self) -> Path:
        return self.directory / "slurm.conf"

    def running(self) -> bool:
        """Whether this directory's slurmctld runs already (then it is not this run's)."""
        try:
            pid = int((self.directory / "ctld" / "slurmctld.pid").read_text())
            return Path(f"/proc/{pid}/comm").read_text().strip() == "slurmctld"
        except (OSError, ValueError):
            return False

    def start(self) -> None:
        """Start it; ConfigError with start.sh's own words when it cannot."""
        try:
            done = subprocess.run(
                ["bash", str(SCRIPTS / "start.sh"), str(self.nodes)],
                check=False,
                env=self.env,
                capture_output=True,
                text=True,
                timeout=_START_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            raise ConfigError(
                f"--faultloop-local-cluster {self.nodes}: start.sh did not finish "
                f"in {_START_TIMEOUT_S} s (state in {self.directory})"
            ) from None
        if done.returncode != 0:
            said = "\n".join(done.stderr.strip().splitlines()[-5:])
            raise ConfigError(
                f"--faultloop-local-cluster {self.nodes}: the local Slurm "
                f"cluster did not start (state in {self.directory}):\n{said}"
            )

    def stop(self) -> None:
        subprocess.run(
            ["bash", str(SCRIPTS / "stop.sh")],
            env=self.env,
            capture_output=True,
            timeout=120,
            check=False,
        )


def cluster_for_run(nodes: int, add_cleanup: Callable[[Callable[[], None]], None]) -> SlurmCluster:
    """The reachable cluster, else the local one started for this run (``add_cleanup`` is
    given what stops it when the run ends); ``SLURM_CONF`` is exported for the backend and
    xdist workers. Raises ConfigError."""
    if cluster_reachable() is None:
        return describe_reachable()
    directory = Path(
        os.environ.get("LOCAL_CLUSTER_DIR")
        or Path(tempfile.gettempdir()) / "faultloop-local-cluster"
    ).resolve()
    local = LocalCluster(nodes, directory)
    ours = not local.running()
    previous = os.environ.get("SLURM_CONF")

    def restore() -> None:
        if ours:
            local.stop()
        if previous is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = previous

    add_cleanup(restore)
    if ours:
        local.start()
    os.environ["SLURM_CONF"] = str(local.conf)
    cluster = describe_reachable()
    return SlurmCluster(
        conf=cluster.conf, node_names=cluster.node_names, partition=cluster.partition, started=ours
    )
