"""A framework workload on the real local Slurm cluster: sbatch submits the job, srun starts
one task per node, and each task execs the framework's own launcher (Lightning's DDP launcher
here, which spans nodes), which starts that node's ranks. The fault fires on the second node's
second rank and the built-in log analyzer names it from what Lightning printed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.processes import live_processes_with_env
from support.sessions import only_session

from pytest_faultloop.jobs.workload.frameworks.registry import FRAMEWORKS
from pytest_faultloop.models import ExperimentResult
from pytest_faultloop.scoring.dimensions import DIMENSIONS
from pytest_faultloop.scoring.pass_rule import DEFAULT_RULE

REPO = Path(__file__).resolve().parents[1]
ENTRY = "WORKLOAD_EXC:3:3:2@workload=lightning"
"""2 nodes x 2 ranks: rank 3 is the second node's second rank (not its launcher)."""

pytestmark = pytest.mark.slurm


def test_lightning_spans_two_slurm_nodes_and_names_the_culprit(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, slurm_cluster: object
) -> None:
    if missing := FRAMEWORKS["lightning"].missing():
        pytest.skip(f"the frameworks extra is not installed here: {missing}")
    shutil.copytree(REPO / "experiments", pytester.path / "experiments")
    shutil.copytree(
        REPO / "sbatch", pytester.path / "sbatch", ignore=shutil.ignore_patterns("local-cluster")
    )
    base = pytester.path / "out"
    for name, value in {
        "BASE_EXPERIMENTS_DIR": str(base),
        "POOL": ENTRY,
        "GPUS_PER_NODE": "2",
    }.items():
        monkeypatch.setenv(name, value)
    result = pytester.runpytest_subprocess(
        "experiments/",
        "--faultloop-backend=slurm",
        "--faultloop-poll-interval=5",
        "-k",
        "not fr_rank_correct",  # which victims dump before the teardown is a race
        "-p",
        "no:cacheprovider",
        timeout=900,
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) == 4 and outcomes.get("error", 0) == 0, result.stdout.str()
    (result_file,) = only_session(base).glob("n2_*_workload-lightning_*/result.json")
    stored = ExperimentResult.model_validate_json(result_file.read_text())
    assert stored.job is not None and stored.job.backend == "slurm"
    assert stored.artifacts is not None and stored.artifacts.marker is not None
    assert stored.artifacts.marker.fired and stored.artifacts.marker.rank == 3
    assert stored.verdict is not None, stored.reason
    for dimension in (d.name for d in DIMENSIONS if d.analysis == "log"):
        value = stored.verdict.value(dimension)
        assert DEFAULT_RULE.passes(dimension, value), (dimension, value, stored.verdict.notes)
    assert stored.artifacts.log is not None
    log = stored.artifacts.log.read_text()
    for rank in range(4):  # Lightning's banner from every rank of both nodes
        assert f"Initializing distributed: GLOBAL_RANK: {rank}, MEMBER: {rank + 1}/4" in log
    slurm_logs = result_file.parent / "logs" / "slurm"
    started = (slurm_logs / f"{stored.job.job_id}.launcher.err").read_text()
    # srun's two tasks, each on its own Slurm node, each exec'ing Lightning's launcher
    assert "node 0 (n" in started and "node 1 (n" in started, started
    assert started.count("starting lightning") == 2, started
    assert live_processes_with_env("EXPERIMENT_DIR", str(result_file.parent)) == []
