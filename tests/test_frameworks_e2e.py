"""Every framework workload once, for real, in one run (CI's subset of the frameworks pool):
each framework's own launcher starts the ranks, the fault fires, and the built-in log
analyzer names the culprit and the fault from what that framework printed. The jobs share the
run's two slots, so the six cost about three jobs' time. (Flight-recorder answers are left
out: which victims dump before a launcher's SIGTERM reaches them is a race; the frameworks
pool reports them.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.processes import live_processes_with_env
from support.sessions import only_session

from pytest_faultloop.analyzers import filter_harness_lines
from pytest_faultloop.jobs.workload.frameworks.registry import FRAMEWORKS
from pytest_faultloop.models import ExperimentResult
from pytest_faultloop.scoring.dimensions import DIMENSIONS
from pytest_faultloop.scoring.pass_rule import DEFAULT_RULE

REPO = Path(__file__).resolve().parents[1]
ENTRIES = {
    "spawn": "SIGKILL:1:5:1",
    "mpirun": "SIGKILL:1:5:1",
    "ray_train": "WORKLOAD_EXC:1:3:1",
    "accelerate": "WORKLOAD_EXC:1:5:1",
    "lightning": "WORKLOAD_EXC:1:3:1",
    "deepspeed": "WORKLOAD_EXC:1:3:1",
}
"""The entry each framework runs (2 ranks on one node: rank 1 is its node's second)."""
PRINTED = {
    "spawn": ["ProcessExitedException: process 1 terminated with signal SIGKILL"],
    "mpirun": ["[1,0]<stdout>:", "mpirun noticed that process rank 1 "],
    "ray_train": ["(RayTrainWorker pid=", "[Rank 1 Error Snippet]:"],
    "accelerate": [
        "accelerate/commands/launch.py",
        "ChildFailedError",
        "rank      : 1 (local_rank: 1)",
    ],
    "lightning": ["Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/2", "InjectedException"],
    "deepspeed": ["[launch.py:", "exits with return code = 1", "InjectedException"],
}
"""Lines only the framework's own launcher or loop prints, in the job's log."""
LOG_DIMENSIONS = [d.name for d in DIMENSIONS if d.analysis == "log"]


def test_the_ci_subset_names_every_framework() -> None:
    assert set(ENTRIES) == set(FRAMEWORKS) == set(PRINTED)


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One run of every framework's entry; its session directory."""
    missing = [m for f in FRAMEWORKS.values() if (m := f.missing())]
    if missing:
        pytest.skip(f"the frameworks are not all installed here: {missing[0]}")
    root = tmp_path_factory.mktemp("frameworks")
    shutil.copytree(REPO / "experiments", root / "experiments")
    pool = " ".join(f"{entry}@workload={name}" for name, entry in ENTRIES.items())
    env = {k: v for k, v in os.environ.items() if k not in ("WORKLOAD", "PYTEST_ADDOPTS")}
    env |= {"POOL": pool, "GPUS_PER_NODE": "2", "BASE_EXPERIMENTS_DIR": str(root / "out")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "experiments/", "-p", "no:cacheprovider", "-q",
         "-k", "not fr_rank_correct"],
        cwd=root, env=env, capture_output=True, text=True, timeout=1800, check=False,
    )  # fmt: skip
    assert f"faultloop: {len(ENTRIES)} experiment(s): {len(ENTRIES)} scored" in done.stdout, (
        done.stdout[-4000:]
    )
    return only_session(root / "out")


@pytest.mark.parametrize("framework", sorted(ENTRIES))
def test_the_culprit_is_named_from_what_the_framework_printed(
    session: Path, framework: str
) -> None:
    label = framework.replace("_", "-")  # as the directory writes the variant
    (result_file,) = session.glob(f"n1_*_workload-{label}_*/result.json")
    stored = ExperimentResult.model_validate_json(result_file.read_text())
    assert stored.experiment.workload == framework
    assert stored.job is not None and stored.job.state == "FAILED"
    assert stored.artifacts is not None and stored.artifacts.marker is not None
    assert stored.artifacts.marker.fired and stored.artifacts.marker.rank == 1
    assert stored.verdict is not None, stored.reason
    for dimension in LOG_DIMENSIONS:
        value = stored.verdict.value(dimension)
        assert DEFAULT_RULE.passes(dimension, value), (dimension, value, stored.verdict.notes)
    assert stored.artifacts.log is not None
    lines = stored.artifacts.log.read_text().splitlines()
    for printed in PRINTED[framework]:
        assert any(printed in line for line in lines), (printed, lines[-40:])
    assert not any("FAULT INJECTION" in line for line in filter_harness_lines(lines))
    assert live_processes_with_env("EXPERIMENT_DIR", str(result_file.parent)) == []
