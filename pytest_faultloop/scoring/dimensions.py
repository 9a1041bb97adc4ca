"""The scoring dimensions, declared once: one entry per dimension says its labels, which of them
pass, how the deterministic judge scores it, what a failing cell shows and how the LLM judge is
asked about it.

The verdict holds one field per entry (:class:`pytest_faultloop.models.DimensionLabels`, whose
type lists the labels); the judges, the pass rule, the items and the reports read the entries
here, in this order. A new dimension is one entry here and its field there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, get_args

from pytest_faultloop.models import ExperimentResult, FrAnalysis, LogAnalysis, Truth
from pytest_faultloop.models.analysis import FR_SCOPES, Binary, FrScope, FrScopeLimit, Graded
from pytest_faultloop.scoring.judges import named, rules
from pytest_faultloop.scoring.judges.judge import JudgeCase
from pytest_faultloop.scoring.truth import truth_of


class PassPredicate(Protocol):
    """Whether a (known, not ``N/A``) label passes under the pass rule's options."""

    def __call__(self, value: str, *, accept_partial: bool, fr_scope: FrScopeLimit) -> bool: ...


class ExpectedText(Protocol):
    """The labels that pass under the pass rule's options, as a failure message states them."""

    def __call__(self, *, accept_partial: bool, fr_scope: FrScopeLimit) -> str: ...


Named = Callable[[ExperimentResult, LogAnalysis, FrAnalysis, Truth], tuple[str, str]]
"""What the analyses said that a dimension scores, and what the truth expects."""


@dataclass(frozen=True)
class Scale:
    """The labels a dimension takes, best first, and which of them pass."""

    values: tuple[str, ...]
    passes: PassPredicate
    expected: ExpectedText


def _or(values: Sequence[str]) -> str:
    """``rank``, ``rank or node``, ``rank, node or segment``."""
    return " or ".join(filter(None, [", ".join(values[:-1]), values[-1]]))


def _true(value: str, *, accept_partial: bool, fr_scope: FrScopeLimit) -> bool:
    return value == "true"


def _true_text(*, accept_partial: bool, fr_scope: FrScopeLimit) -> str:
    return "true"


def _graded(value: str, *, accept_partial: bool, fr_scope: FrScopeLimit) -> bool:
    return value == "true" or (accept_partial and value == "partial")


def _graded_text(*, accept_partial: bool, fr_scope: FrScopeLimit) -> str:
    return "true" + (" or partial" if accept_partial else "")


def _scoped(value: str, *, accept_partial: bool, fr_scope: FrScopeLimit) -> bool:
    return value in FR_SCOPES and FR_SCOPES.index(value) <= FR_SCOPES.index(fr_scope)


def _scoped_text(*, accept_partial: bool, fr_scope: FrScopeLimit) -> str:
    return _or(FR_SCOPES[: FR_SCOPES.index(fr_scope) + 1])


BINARY = Scale(get_args(Binary), _true, _true_text)
GRADED = Scale(get_args(Graded), _graded, _graded_text)
"""``partial`` passes only when the rule accepts it."""
SCOPED = Scale(get_args(FrScope), _scoped, _scoped_text)
"""A scope passes when it is at least as narrow as the rule's (rank < node < segment);
``false`` and ``no_dumps`` fail."""


@dataclass(frozen=True)
class Dimension:
    """One scoring dimension: a verdict field, one item per experiment, one report column."""

    name: str
    """The verdict's field, the item's name (``…::rank_primary``) and the report's column."""
    scale: Scale
    analysis: Literal["log", "fr"]
    """The analysis it scores: the log analyzer's answer or the FR analyzer's suspects."""
    score: Callable[[JudgeCase], str]
    """The deterministic judge's rule (:mod:`pytest_faultloop.scoring.judges.rules`)."""
    named: Named
    """What a failing cell shows (:mod:`pytest_faultloop.scoring.judges.named`)."""
    prompt: str
    """What the LLM judge's instructions say of it, after ``- "<name>": ``."""
    rule_only: bool = False
    """Every judge takes the rule's label (exact where reading adds nothing); the LLM judge
    keeps its own as ``extra["llm_<name>"]`` when it differs."""
    needs_reading: bool = False
    """The hybrid judge takes the LLM's label rather than the rule's."""

    @property
    def values(self) -> tuple[str, ...]:
        return self.scale.values

    def passes(self, value: str, *, accept_partial: bool, fr_scope: FrScopeLimit) -> bool | None:
        """Whether ``value`` passes; None when the dimension does not apply (``N/A``)."""
        if value not in self.values:
            raise ValueError(f"{self.name}: unexpected value {value!r}")
        if value == "N/A":
            return None
        return self.scale.passes(value, accept_partial=accept_partial, fr_scope=fr_scope)

    def expected(self, *, accept_partial: bool, fr_scope: FrScopeLimit) -> str:
        return self.scale.expected(accept_partial=accept_partial, fr_scope=fr_scope)

    def named_and_expected(self, result: ExperimentResult) -> tuple[str, str] | None:
        """What the analyzers said that it scores (``named primary rank 3``) and what the
        truth expects (``rank 1``); None without analyses."""
        log, fr = result.log_analysis, result.fr_analysis
        if log is None or fr is None:
            return None
        return self.named(result, log, fr, truth_of(result.experiment, None))

    def named_line(self, result: ExperimentResult) -> str:
        """``named primary rank 3; expected rank 1`` ('' without analyses)."""
        pair = self.named_and_expected(result)
        return f"{pair[0]}; expected {pair[1]}" if pair else ""


DIMENSIONS: tuple[Dimension, ...] = (
    Dimension(
        name="restart_correct",
        scale=BINARY,
        analysis="log",
        score=rules.restart_correct,
        named=named.decision_named,
        prompt=""""true" | "false" | "N/A" - the log analyzer's restart decision equals the
  expected decision. "STOP - DONT RESTART IMMEDIATE" is a STOP decision, never a RESTART.
  UNKNOWN, "NO LOGS" and "LLM FAILURE" are false. "N/A" only when no decision is expected.""",
    ),
    Dimension(
        name="rank_primary",
        scale=GRADED,
        analysis="log",
        score=rules.rank_primary,
        named=named.primary_rank_named,
        prompt=""""true" | "false" | "partial" - the injected rank is among the primary
  issues (true); only its node or a group of ranks holding it is (partial); otherwise false.""",
        needs_reading=True,
    ),
    Dimension(
        name="rank_any",
        scale=BINARY,
        analysis="log",
        score=rules.rank_any,
        named=named.any_rank_named,
        prompt=""""true" | "false" - the injected rank is named anywhere in the attribution.
  "rank 10" does not name rank 1; a range such as "ranks 0-7" does not name a rank.""",
    ),
    Dimension(
        name="fault_described",
        scale=GRADED,
        analysis="log",
        score=rules.fault_described,
        named=named.nature_named,
        prompt=""""true" | "false" | "partial" - the primary issue describes the fault's
  nature (true); a neighbouring nature or only a generic failure (partial); otherwise false.""",
        needs_reading=True,
    ),
    Dimension(
        name="fr_rank_correct",
        scale=SCOPED,
        analysis="fr",
        score=rules.fr_rank_correct,
        named=named.suspects_named,
        prompt=""""rank" | "node" | "segment" | "false" | "no_dumps" - the FR suspects are
  exactly the injected rank (rank); within the GPUS_PER_NODE block holding it (node); within
  the FR_SEGMENT_SIZE block holding it (segment); no dumps were read (no_dumps); else false.""",
        rule_only=True,
    ),
)
DIMENSION_NAMES: tuple[str, ...] = tuple(d.name for d in DIMENSIONS)
_BY_NAME = {d.name: d for d in DIMENSIONS}


def dimension_named(name: str) -> Dimension:
    """The dimension called ``name``; KeyError naming the known ones."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(
            f"unknown dimension {name!r}; expected one of {', '.join(DIMENSION_NAMES)}"
        ) from None
