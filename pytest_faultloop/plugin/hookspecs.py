"""Hooks through which backends, analyzers and judges plug in.

Each ``firstresult`` hook has a built-in implementation registered last; a ``conftest.py`` or
plugin that returns a non-None value replaces it for that experiment.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from pytest_faultloop.jobs.backends.protocol import JobSpec
    from pytest_faultloop.models import (
        Artifacts,
        Experiment,
        ExperimentResult,
        FrAnalysis,
        Job,
        LogAnalysis,
        Verdict,
    )


@pytest.hookspec(firstresult=True)
def pytest_faultloop_run_job(
    config: pytest.Config, spec: JobSpec, submitted: Callable[[Job], None]
) -> Job | None:
    """Run one experiment's job to its end and return the finished job.

    Called with a scheduler slot held, so at most BATCH_SIZE calls run at once across the whole
    run. The built-in implementation submits to the selected backend (local or slurm) and polls.
    ``submitted``: call it with the job once it has an id, and the run records it at once (its
    TSV row, and the job in ``result.json`` for a later run to re-attach to); a job returned
    without that call is recorded when it returns.
    """


@pytest.hookspec(firstresult=True)
def pytest_faultloop_collect_artifacts(
    config: pytest.Config, experiment: Experiment, job: Job, experiment_dir: Path
) -> Artifacts | None:
    """Locate the finished job's log, FR dumps and fault marker."""


@pytest.hookspec(firstresult=True)
def pytest_faultloop_analyze_log(
    config: pytest.Config, experiment: Experiment, artifacts: Artifacts
) -> LogAnalysis | None:
    """Attribute the failure from the job's log (the log-analysis module under test)."""


@pytest.hookspec(firstresult=True)
def pytest_faultloop_analyze_fr(
    config: pytest.Config, experiment: Experiment, artifacts: Artifacts
) -> FrAnalysis | None:
    """Attribute the failure from the flight-recorder dumps (the FR module under test)."""


@pytest.hookspec(firstresult=True)
def pytest_faultloop_judge(
    config: pytest.Config,
    experiment: Experiment,
    artifacts: Artifacts,
    log_analysis: LogAnalysis,
    fr_analysis: FrAnalysis,
) -> Verdict | None:
    """Score both analyses against the injected ground truth.

    Raise ``pytest_faultloop.scoring.judges.JudgeError`` to make the experiment's items ERROR with
    ``judge_failed: reason``.
    """


@pytest.hookspec
def pytest_faultloop_experiment_finished(config: pytest.Config, result: ExperimentResult) -> None:
    """Called once per experiment and run, in the process that produced the result."""
