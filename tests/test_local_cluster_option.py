"""``--faultloop-local-cluster N``: the run starts the local Slurm cluster, its jobs and the
``slurm_cluster`` fixture use it, and the run stops what it started (after Ctrl-C too)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.processes import foreground_sigint

pytestmark = pytest.mark.slurm

NEEDS = "starting a Slurm cluster needs root and Slurm's daemons (sbatch/local-cluster/start.sh)"


@pytest.fixture
def own_cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No cluster reachable; the run's own cluster gets a fresh directory and free ports."""
    if os.geteuid() != 0 or shutil.which("slurmctld") is None:
        pytest.skip(NEEDS)
    directory = tmp_path / "cluster"
    monkeypatch.delenv("SLURM_CONF", raising=False)
    monkeypatch.setenv("LOCAL_CLUSTER_DIR", str(directory))
    monkeypatch.setenv("LOCAL_CLUSTER_PORT", str(free_ports(3)))
    monkeypatch.setenv("BASE_EXPERIMENTS_DIR", str(tmp_path / "out"))
    return directory


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive ports nobody listens on (slurmctld, then slurmds)."""
    for first in range(17000, 19000, 10):
        try:
            for port in range(first, first + count):
                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", port))
        except OSError:
            continue
        return first
    raise AssertionError("no free ports for the cluster")


def daemons_of(directory: Path) -> list[int]:
    """Pids of slurmctld/slurmd processes still running from the cluster's directory."""
    alive = []
    for pid_file in [directory / "ctld" / "slurmctld.pid", *directory.glob("nodes/*/slurmd.pid")]:
        try:
            pid = int(pid_file.read_text())
            if Path(f"/proc/{pid}/comm").read_text().strip() in ("slurmctld", "slurmd"):
                alive.append(pid)
        except (OSError, ValueError):
            continue
    return alive


USES_IT = """
import os

def test_cluster(slurm_cluster):
    assert slurm_cluster.node_names == ("n1", "n2") and slurm_cluster.started
    assert os.environ["SLURM_CONF"] == str(slurm_cluster.conf)

def test_job(faultloop):
    result = faultloop.run("SIGKILL:1:3:2", gpus_per_node=2)
    assert result.job.backend == "slurm"
    result.assert_dimension("rank_primary")
"""


def test_the_run_starts_the_cluster_its_jobs_use_it_and_it_stops_after(
    pytester: pytest.Pytester, own_cluster: Path
) -> None:
    pytester.makepyfile(test_uses_it=USES_IT)
    result = pytester.runpytest_subprocess(
        "test_uses_it.py", "--faultloop-local-cluster", "2", "-p", "no:cacheprovider", timeout=600
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "faultloop: Slurm cluster started for this run: 2 node(s) "
            f"(n1,n2), SLURM_CONF={own_cluster / 'slurm.conf'}"
        ]
    )
    assert (own_cluster / "slurm.conf").is_file()  # it ran from there
    assert daemons_of(own_cluster) == []


def test_an_interrupted_run_stops_the_cluster_it_started(
    pytester: pytest.Pytester, own_cluster: Path, tmp_path: Path
) -> None:
    ready = tmp_path / "ready"
    pytester.makepyfile(
        test_waits=f"""
import time
from pathlib import Path

def test_wait(slurm_cluster):
    Path({str(ready)!r}).write_text("up")
    time.sleep(600)
"""
    )
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "test_waits.py",
            "--faultloop-local-cluster",
            "2",
            "-p",
            "no:cacheprovider",
        ],
        cwd=pytester.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=foreground_sigint,  # noqa: PLW1509 - only sets a signal disposition
    )
    try:
        deadline = time.monotonic() + 300
        while not ready.exists():
            assert process.poll() is None, process.communicate()[0]
            assert time.monotonic() < deadline, "the test never started"
            time.sleep(0.2)
        assert len(daemons_of(own_cluster)) == 3
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=600)  # stop.sh is slow on a loaded machine
    finally:
        if process.poll() is None:
            process.kill()
    assert "KeyboardInterrupt" in output
    assert daemons_of(own_cluster) == []


def test_a_reachable_cluster_is_used_and_no_other_is_started(
    pytester: pytest.Pytester,
    slurm_cluster: object,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("LOCAL_CLUSTER_DIR", str(tmp_path / "unused"))
    pytester.makepyfile(
        test_reuses="def test_it(slurm_cluster):\n    assert not slurm_cluster.started\n"
    )
    result = pytester.runpytest_subprocess(
        "test_reuses.py", "--faultloop-local-cluster", "2", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["faultloop: Slurm cluster already running, used as is: *"])
    assert not (tmp_path / "unused").exists()
