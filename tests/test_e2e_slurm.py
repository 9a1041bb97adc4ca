"""End to end on the real local Slurm cluster: pytest submits real tiny_gloo jobs with sbatch
from two xdist workers, never more than two in flight."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slurm


def test_smoke_pool_on_slurm_with_two_workers(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, slurm_cluster: object
) -> None:
    shutil.copytree(REPO / "experiments", pytester.path / "experiments")
    shutil.copytree(
        REPO / "sbatch", pytester.path / "sbatch", ignore=shutil.ignore_patterns("local-cluster")
    )
    base = pytester.path / "out"
    monkeypatch.setenv("BASE_EXPERIMENTS_DIR", str(base))
    monkeypatch.setenv("POOL", "SIGKILL:1:5:2 WORKLOAD_EXC:3:5:2 NONE:0:5:2")
    result = pytester.runpytest_subprocess(
        "experiments/",
        "--faultloop-backend=slurm",
        "-n",
        "2",
        "--dist",
        "loadscope",
        "--faultloop-poll-interval=5",
        "-p",
        "no:cacheprovider",
        timeout=600,
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("error", 0) == 0, result.stdout.str()
    assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == 15
    (session,) = (base / "fault_injection").glob("2*")
    rows = [r.split("\t") for r in (session / "experiments.tsv").read_text().splitlines()[1:]]
    assert sorted(r[1] for r in rows) == ["NONE", "SIGKILL", "WORKLOAD_EXC"]
    assert len({r[0] for r in rows}) == 3
    spans = []
    for row in rows:
        stored = json.loads((Path(row[5]) / "result.json").read_text())
        assert stored["job"]["backend"] == "slurm" and stored["job"]["job_id"] == row[0]
        spans.append((stored["job"]["started_at"], stored["job"]["ended_at"]))
        assert list((Path(row[5]) / "logs" / "slurm").glob(f"{row[0]}.*.1.main_workload.log"))
    starts = sorted(s for s, _ in spans)
    # Slurm times have 1 s resolution: the third job starts no earlier than the first end.
    assert starts[2] >= min(e for _, e in spans) - 1
