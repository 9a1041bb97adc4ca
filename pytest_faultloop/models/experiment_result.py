"""Everything known about one experiment, stored as its ``result.json``."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from pytest_faultloop.models.analysis import FrAnalysis, LogAnalysis, Verdict
from pytest_faultloop.models.analysis_costs import AnalysisCosts
from pytest_faultloop.models.errors import FaultloopError
from pytest_faultloop.models.experiment import Experiment, ImmutableModel, Model
from pytest_faultloop.models.job import Artifacts, Job
from pytest_faultloop.models.schema_version import refuse_newer

# --- Result ----------------------------------------------------------------------------------

BrokenKind = Literal["infrastructure", "run_invalid", "analysis_failed", "judge_failed"]


AttemptKind = Literal["run_invalid", "infrastructure", "unreadable_result"]
RESULT_SCHEMA_VERSION = 1
"""The ``result.json`` format this code writes and reads (and every earlier one)."""


class Attempt(Model):
    """An earlier job of the experiment whose files were set aside before it ran again: it
    ended before its fault fired (``run_invalid``), the infrastructure ended it (refused,
    cancelled, its end unknown: ``infrastructure``), or its stored result could not be read
    (``unreadable_result``)."""

    job: Job
    reason: str
    kind: AttemptKind = "run_invalid"
    moved_to: Path
    """Where that attempt's files were set aside, inside the experiment directory."""


class ExperimentResult(Model):
    """Everything known about one experiment; stored as ``result.json`` in its directory."""

    schema_version: int = Field(default=RESULT_SCHEMA_VERSION, ge=1)
    """The format it was stored in (:mod:`pytest_faultloop.models.schema_version`)."""
    experiment: Experiment
    attempts: list[Attempt] = []
    """Earlier, invalid attempts (``--faultloop-retries-invalid``), oldest first."""
    job: Job | None = None
    artifacts: Artifacts | None = None
    log_analysis: LogAnalysis | None = None
    fr_analysis: FrAnalysis | None = None
    verdict: Verdict | None = None
    broken: BrokenKind | None = None
    """Set when the experiment produced no valid run to score: its items ERROR, never FAIL."""
    reason: str | None = None
    policy_hash: str | None = None
    fingerprint: str | None = None
    costs: AnalysisCosts | None = None
    """What the analyses and the judge cost (absent in results stored before it existed)."""

    @model_validator(mode="before")
    @classmethod
    def _known_version(cls, data: object) -> object:
        return refuse_newer(data, RESULT_SCHEMA_VERSION)

    @property
    def run_valid(self) -> bool:
        return self.broken not in ("infrastructure", "run_invalid")

    @property
    def analyses(self) -> Analyses:
        """What the attribution modules said: ``result.analyses.log.primary``."""
        return Analyses(log=self.log_analysis, fr=self.fr_analysis)


class Analyses(ImmutableModel):
    """The log and FR analyses of one experiment (``None`` where that stage did not run)."""

    log: LogAnalysis | None
    fr: FrAnalysis | None


class UnreadableResult(FaultloopError):
    """A stored ``result.json`` that exists but cannot be read or parsed."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"{path}: {why}")
        self.path = path
        self.why = why
