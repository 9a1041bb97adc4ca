"""The job scripts: they parse, and the GB200 templates print their launch under DRY_RUN=1."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

SBATCH = Path(__file__).resolve().parent.parent / "sbatch"


@pytest.mark.parametrize("script", ["tiny_gloo.sh", "l4_gb200_reduced.sh", "n3_super_gb200_fi.sh"])
def test_job_script_parses(script: str) -> None:
    subprocess.run(["bash", "-n", str(SBATCH / script)], check=True)


@pytest.mark.parametrize(
    ("script", "entry", "nodes"),
    [
        ("l4_gb200_reduced.sh", "pretrain_gpt.py", 2),
        ("n3_super_gb200_fi.sh", "pretrain_mamba.py", 8),
    ],
)
def test_gb200_template_dry_run_prints_the_launch(
    tmp_path: Path, script: str, entry: str, nodes: int
) -> None:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "DRY_RUN": "1",
        "FAULTLOOP_REPO": str(tmp_path),  # no scripts/user.env there
        "FAULT_TYPE": "SIGKILL",
        "FAULT_RANK": "3",
        "EXPERIMENT_DIR": str(tmp_path / "exp"),
    }
    result = subprocess.run(
        ["bash", str(SBATCH / script)], env=env, capture_output=True, text=True, check=True
    )
    out = result.stdout
    assert "srun --label --container-mounts" in out and entry in out
    assert "--fault-injector-fault-types" in out
    assert "export FAULT_TYPE=SIGKILL" in out and "export FAULT_RANK=3" in out
    assert f"--ntasks={nodes * 4}" in out
    assert f"{tmp_path}/exp/logs/slurm/DRYRUN.0.1.main_workload.log" in out
    assert not (tmp_path / "exp").exists(), "a dry run created directories"


def test_tiny_gloo_script_declares_its_local_launcher() -> None:
    text = (SBATCH / "tiny_gloo.sh").read_text()
    assert "# faultloop-local-launcher: pytest_faultloop.workload.launcher" in text
    assert "srun" in text and "FAULTLOOP_PYTHON" in text
