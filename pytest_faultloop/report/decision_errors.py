"""Restart decisions by kind of error: the confusion matrix of expected against decided, and
the two errors that cost a team most, each with its Wilson 95 % interval.

* **false STOP**: STOP where the expected decision is RESTART or CONTINUE — a job killed that
  would have resumed (nvidia-resiliency-ext gates its restart agent on this rate);
* **false RESTART**: RESTART where the expected decision is STOP — a restart that replays the
  failure, a restart loop.

A gate (``--faultloop-max-false-stop``, the leaderboard's ``--max-false-stop``) fails a run
when the false-STOP rate's upper bound exceeds a share: the rate may be below it by chance, its
interval may not.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from pytest_faultloop.models import Decision, ExperimentResult
from pytest_faultloop.report.mdtable import table
from pytest_faultloop.report.stats import rate_text, wilson
from pytest_faultloop.scoring.pass_rule import scored_verdict

RESUMABLE = frozenset({Decision.RESTART, Decision.CONTINUE})
"""Expected decisions under which the job would have gone on: a STOP there is false."""


@dataclass(frozen=True)
class ErrorRate:
    """``errors`` of ``cases`` with the Wilson 95 % interval."""

    errors: int
    cases: int

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(self.errors, self.cases)

    def __str__(self) -> str:
        return rate_text(self.errors, self.cases)


@dataclass(frozen=True)
class DecisionErrors:
    """(expected, decided) counts over scored experiments with both decisions known."""

    matrix: Counter[tuple[Decision, Decision]]

    @classmethod
    def of(cls, results: Sequence[ExperimentResult]) -> DecisionErrors:
        matrix: Counter[tuple[Decision, Decision]] = Counter()
        for result in results:
            verdict = scored_verdict(result)
            if verdict and verdict.expected_decision and result.log_analysis:
                matrix[verdict.expected_decision, result.log_analysis.decision] += 1
        return cls(matrix)

    @property
    def false_stop(self) -> ErrorRate:
        resumable = [(e, d) for e, d in self.matrix.elements() if e in RESUMABLE]
        return ErrorRate(sum(d is Decision.STOP for _, d in resumable), len(resumable))

    @property
    def false_restart(self) -> ErrorRate:
        stops = [d for e, d in self.matrix.elements() if e is Decision.STOP]
        return ErrorRate(sum(d is Decision.RESTART for d in stops), len(stops))

    @property
    def as_expected(self) -> ErrorRate:
        """The decisions that were right, as a rate of all (errors: the right ones)."""
        return ErrorRate(sum(n for (e, d), n in self.matrix.items() if e is d), self.matrix.total())

    def gate(self, max_false_stop: float | None) -> str | None:
        """Why the run fails the false-STOP gate (None: it passes, or no gate is set)."""
        if max_false_stop is None or not self.false_stop.cases:
            return None
        high = self.false_stop.interval[1]
        if high <= max_false_stop:
            return None
        return (
            f"false-STOP rate {self.false_stop}: its upper bound {100 * high:.0f}% exceeds the "
            f"allowed {100 * max_false_stop:g}%"
        )

    def summary(self) -> str:
        """One line: right decisions, false STOPs, false RESTARTs."""
        return (
            f"decided as expected {self.as_expected}; false STOP {self.false_stop}; "
            f"false RESTART {self.false_restart}"
        )

    def markdown(self) -> list[str]:
        if not self.matrix:
            return ["No scored experiment with both an expected and a decided restart decision."]
        expected = [d for d in Decision if any(e is d for e, _ in self.matrix)]
        rows = [(e.value, *(self.matrix[e, d] for d in Decision)) for e in expected]
        return [
            *table(("expected \\ decided", *(d.value for d in Decision)), rows),
            "",
            f"Decided as expected: {self.as_expected}. False STOP (STOP where RESTART or "
            f"CONTINUE was right: a job killed that would have resumed): {self.false_stop}. "
            f"False RESTART (RESTART where STOP was right: a restart loop): "
            f"{self.false_restart}.",
        ]

    def html(self, caption: str = "Restart decision: expected vs decided") -> str:
        if not self.matrix:
            return ""
        expected = [d for d in Decision if any(e is d for e, _ in self.matrix)]
        header = "".join(
            f"<th>{escape(h)}</th>" for h in ("expected \\ decided", *(d.value for d in Decision))
        )
        rows = "".join(
            f"<tr><td>{e.value}</td>"
            + "".join(f"<td>{self.matrix[e, d]}</td>" for d in Decision)
            + "</tr>"
            for e in expected
        )
        note = escape(self.summary())
        return (
            f'<table class="faultloop-summary"><caption>{escape(caption)}; {note}</caption>'
            f"<tr>{header}</tr>{rows}</table>"
        )
