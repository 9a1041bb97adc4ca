"""End to end with faults on several ranks and lost nodes: real tiny_gloo jobs through pytest on
the local backend (one cheap run in CI, the whole multi pool with ``-m slow``) and on the local
Slurm cluster (``-m "slurm and slow"``)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.processes import live_processes_with_env
from support.sessions import only_session

from pytest_faultloop.models import ExperimentResult

REPO = Path(__file__).resolve().parents[1]
CHEAP = "GPU_ERROR:1+2:5:2 NODE_KILL:1:5:2"


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copytree(REPO / "experiments", pytester.path / "experiments")
    shutil.copytree(
        REPO / "sbatch", pytester.path / "sbatch", ignore=shutil.ignore_patterns("local-cluster")
    )
    base = pytester.path / "out"
    monkeypatch.setenv("BASE_EXPERIMENTS_DIR", str(base))
    return base


def stored(base: Path) -> dict[str, ExperimentResult]:
    session = only_session(base)
    results = (
        ExperimentResult.model_validate_json(p.read_text()) for p in session.glob("*/result.json")
    )
    return {r.experiment.key: r for r in results}


def check_cheap_pair(base: Path, backend: str) -> None:
    results = stored(base)
    two = results["GPU_ERROR:1+2:5:2"]
    assert two.job is not None and two.job.backend == backend
    assert two.artifacts is not None and two.artifacts.marker is not None
    assert [m.rank for m in two.artifacts.markers] == [1, 2]
    assert all(m.fired for m in two.artifacts.markers)
    lost = results["NODE_KILL:1:5:2"]
    assert lost.artifacts is not None and lost.artifacts.marker is not None
    assert (lost.artifacts.marker.node, lost.artifacts.rank_markers) == (0, [])
    assert lost.fr_analysis is not None and lost.fr_analysis.dumps_read == 4  # node 1's only
    for result in (two, lost):
        assert result.job is not None
        assert live_processes_with_env("EXPERIMENT_DIR", str(result.job.experiment_dir)) == []
    session = only_session(base)
    report = (session / "experiments_report.md").read_text()
    assert (
        "| GPU_ERROR | 2 | 1+2 | 5 |" in report and "| NODE_KILL | 2 | 1 (node 0) | 5 |" in report
    )


def test_two_ranks_on_one_node_and_a_lost_node_on_the_local_backend(
    pytester: pytest.Pytester, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CI run: every listed rank fires (one marker each), a lost node takes its launcher
    and ranks with it, and the built-in analyzers pass every cell of both."""
    monkeypatch.setenv("POOL", CHEAP)
    run = pytester.runpytest_subprocess("experiments/", "-p", "no:cacheprovider", timeout=300)
    run.assert_outcomes(passed=10)
    run.stdout.fnmatch_lines(["*submitted: GPU_ERROR rank=1+2 iter=5 nodes=2 -> job=*"])
    check_cheap_pair(project, "local")


@pytest.mark.slow
def test_the_multi_pool_on_the_local_backend(pytester: pytest.Pytester, project: Path) -> None:
    run = pytester.runpytest_subprocess(
        "experiments/", "--faultloop-pool=multi", "-p", "no:cacheprovider", timeout=600
    )
    run.stdout.fnmatch_lines(["*faultloop: 7 experiment(s): 7 scored*"])
    run.assert_outcomes(passed=35)


@pytest.mark.slow
@pytest.mark.slurm
def test_two_ranks_and_a_lost_node_on_slurm(
    pytester: pytest.Pytester,
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
    slurm_cluster: object,
) -> None:
    monkeypatch.setenv("POOL", CHEAP)
    run = pytester.runpytest_subprocess(
        "experiments/",
        "--faultloop-backend=slurm",
        "--faultloop-poll-interval=5",
        "-p",
        "no:cacheprovider",
        timeout=600,
    )
    run.assert_outcomes(passed=10)
    check_cheap_pair(project, "slurm")
