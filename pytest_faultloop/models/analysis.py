"""What the attribution modules answer (log and FR analyses) and the judge's verdict on it."""

from __future__ import annotations

from typing import Literal, get_args

from pytest_faultloop.models.analysis_costs import Usage
from pytest_faultloop.models.experiment import Decision, Model
from pytest_faultloop.models.faults import Nature

# --- Analyses --------------------------------------------------------------------------------


class Issue(Model):
    rank: int | None = None
    node: str | None = None
    nature: Nature = Nature.NONE
    summary: str = ""


class Evidence(Model):
    line: int
    text: str


class LogAnalysis(Model):
    analyzer: str
    decision: Decision
    decision_text: str
    """The seed's vocabulary: ``RESTART IMMEDIATE``, ``STOP - DONT RESTART IMMEDIATE``, ..."""
    explanation: str = ""
    primary: list[Issue] = []
    secondary: list[Issue] = []
    attribution_text: str = ""
    evidence: list[Evidence] = []
    checkpoint_saved: bool | None = None
    raw_output: str | None = None
    """Verbatim output of an external analyzer, when one ran."""
    cause: str | None = None
    """The primary issue's cause class (a nature, ``gpu_hardware`` or ``node_lost``), which set
    the decision."""
    confidence: float | None = None
    """How far the rule that reached the answer is trusted (0-1); ``None`` when not given."""
    rule: str | None = None
    """Which rule reached the answer (built-in analyzer; ``fallback``: a best guess)."""
    usage: Usage | None = None
    """LLM requests and tokens spent on this analysis (an LLM analyzer only)."""


class FrGroup(Model):
    pg_id: str
    name: str = ""
    desc: str = ""
    op: str = ""
    size: str = ""
    dtype: str = ""
    missing_ranks: list[int] = []
    culprit: bool = False
    """True when the group holds the root cause, False when it is only collateral."""


EvidenceKind = Literal["mismatch", "missing", "no_dump", "unusable_dump"]


class FrSuspect(Model):
    """Why the FR analyzer suspects a rank."""

    rank: int
    evidence: EvidenceKind
    """``mismatch``: entered its group's collective with another operation or other input sizes
    than the other members entered it with at that sequence number (a program bug);
    ``missing``: absent from a collective its group's other members entered;
    ``no_dump``: left no dump while its group stalled, and nothing else explains the stall;
    ``unusable_dump``: its dump cannot be read, its group stalled with no record of it, and
    no other member explains the stall."""
    why: str
    """The groups and sequence numbers the suspicion rests on."""


class FrAnalysis(Model):
    analyzer: str
    suspects: list[int] = []
    reasons: list[FrSuspect] = []
    """One entry per suspect: the evidence against it."""
    unknown: list[int] = []
    """Ranks whose dump could not be used (unknown, never taken as guilty)."""
    groups: list[FrGroup] = []
    dumps_read: int = 0
    unreadable: list[str] = []
    """``file: reason`` for each dump that could not be read."""
    table: str = ""
    raw_output: str | None = None

    @property
    def no_dumps(self) -> bool:
        return self.dumps_read == 0


# --- Verdict ---------------------------------------------------------------------------------

RestartCorrect = Literal["true", "false", "N/A"]
Graded = Literal["true", "false", "partial", "N/A"]
Binary = Literal["true", "false", "N/A"]
FrScopeLimit = Literal["rank", "node", "segment"]
"""How narrowly the FR analysis placed the culprit, narrowest first (the one declaration: the
``--faultloop-fr-scope`` setting, the pass rule and the CLI take it from here)."""
FR_SCOPES: tuple[FrScopeLimit, ...] = get_args(FrScopeLimit)
FrScope = Literal[FrScopeLimit, "false", "no_dumps", "N/A"]


class DimensionLabels(Model):
    """One label per scoring dimension: each field is a dimension, its type the labels it takes
    (the registry, :mod:`pytest_faultloop.scoring.dimensions`, says how each is scored)."""

    restart_correct: RestartCorrect
    rank_primary: Graded
    rank_any: Binary
    fault_described: Graded
    fr_rank_correct: FrScope

    def value(self, dimension: str) -> str:
        if dimension not in DimensionLabels.model_fields:
            raise KeyError(dimension)
        return str(getattr(self, dimension))


class Verdict(DimensionLabels):
    notes: str
    judge: str
    expected_decision: Decision | None = None
    extra: dict[str, str] = {}
    """Judge-specific additions (e.g. the other judge's answers in hybrid mode)."""
    usage: Usage | None = None
    """LLM requests and tokens spent on this verdict (LLM and hybrid judges)."""
