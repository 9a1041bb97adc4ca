"""Data crossing stage boundaries: Pool -> Experiment -> Job -> Artifacts -> Analyses -> Verdict.

Every model is plain pydantic and JSON-serialisable, so results can be stored in
``result.json`` and attached to reports that travel between xdist workers. Import them from
here: ``from pytest_faultloop.models import ExperimentResult``.
"""

from pytest_faultloop.models.analysis import (
    Binary,
    DimensionLabels,
    Evidence,
    FrAnalysis,
    FrGroup,
    FrScope,
    FrSuspect,
    Graded,
    Issue,
    LogAnalysis,
    RestartCorrect,
    Verdict,
)
from pytest_faultloop.models.analysis_costs import COST_STAGES, AnalysisCosts, CostStage, Usage
from pytest_faultloop.models.experiment import (
    DECISION_TEXT,
    Case,
    Decision,
    Experiment,
    ImmutableModel,
    Model,
    Overrides,
    PoolEntry,
    Truth,
)
from pytest_faultloop.models.experiment_result import (
    Analyses,
    Attempt,
    BrokenKind,
    ExperimentResult,
    UnreadableResult,
)
from pytest_faultloop.models.job import Artifacts, FaultMarker, Job, JobState

__all__ = [
    "COST_STAGES",
    "DECISION_TEXT",
    "Analyses",
    "AnalysisCosts",
    "Artifacts",
    "Attempt",
    "Binary",
    "BrokenKind",
    "Case",
    "CostStage",
    "Decision",
    "DimensionLabels",
    "Evidence",
    "Experiment",
    "ExperimentResult",
    "FaultMarker",
    "FrAnalysis",
    "FrGroup",
    "FrScope",
    "FrSuspect",
    "Graded",
    "ImmutableModel",
    "Issue",
    "Job",
    "JobState",
    "LogAnalysis",
    "Model",
    "Overrides",
    "PoolEntry",
    "RestartCorrect",
    "Truth",
    "UnreadableResult",
    "Usage",
    "Verdict",
]
