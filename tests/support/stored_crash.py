"""A stored crash of rank 3 (a replayed case): artifacts for tests that drive the pipeline."""

from __future__ import annotations

from pathlib import Path

from test_plugin_replay import SIGKILL_RANK3, write_case

from pytest_faultloop.inputs.cases import load_case
from pytest_faultloop.models import Artifacts, Experiment


def stored_crash(tmp_path: Path) -> tuple[Experiment, Artifacts]:
    """A replayed crash of rank 3, its stored log as the artifacts to score."""
    directory = write_case(
        tmp_path,
        "kill",
        'culprit = [3]\nnature = ["crash", "signal"]\ndecision = "STOP"',
        SIGKILL_RANK3,
    )
    experiment = load_case(directory, "demo", default_gpus_per_node=4)
    artifacts = Artifacts(
        experiment_dir=directory, log=directory / "logs" / "job.log", fr_dir=directory
    )
    return experiment, artifacts
