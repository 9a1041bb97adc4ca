"""The pass rule: which verdict values count as a pass for each scoring dimension."""

from __future__ import annotations

from dataclasses import dataclass

from pytest_faultloop.models import ExperimentResult, Verdict
from pytest_faultloop.models.analysis import FR_SCOPES, FrScopeLimit
from pytest_faultloop.scoring.dimensions import dimension_named


def dimension_passes(
    dimension: str,
    value: str,
    *,
    accept_partial: bool = False,
    fr_scope: FrScopeLimit = "rank",
) -> bool | None:
    """Whether ``value`` passes ``dimension`` (its registry entry's scale says how); None when
    the dimension does not apply (``N/A``: no expected decision, an unknown culprit, no dumps
    to score).

    ``partial`` passes only with ``accept_partial``; ``fr_rank_correct`` passes when its scope is
    at least as narrow as ``fr_scope`` (rank < node < segment); ``false`` and ``no_dumps`` fail.
    """
    entry = dimension_named(dimension)
    if fr_scope not in FR_SCOPES:
        raise ValueError(f"unknown FR scope {fr_scope!r}; expected one of {', '.join(FR_SCOPES)}")
    return entry.passes(value, accept_partial=accept_partial, fr_scope=fr_scope)


@dataclass(frozen=True)
class TrialsOutcome:
    """A dimension over an experiment's trials: ``k`` of ``n`` scored trials passed."""

    k: int
    n: int
    passed: bool | None
    """None when the dimension applies to no trial."""
    message: str


@dataclass(frozen=True)
class PassRule:
    """The options of :func:`dimension_passes`, carried together through the reports."""

    accept_partial: bool = False
    fr_scope: FrScopeLimit = "rank"
    min_pass_rate: float = 1.0
    """Share of an experiment's scored trials that must pass a dimension."""

    def passes(self, dimension: str, value: str) -> bool | None:
        return dimension_passes(
            dimension, value, accept_partial=self.accept_partial, fr_scope=self.fr_scope
        )

    def describe(self) -> str:
        partial = "counts as a pass" if self.accept_partial else "counts as a fail"
        return f"`partial` {partial}; fr_rank_correct passes at scope `{self.fr_scope}` or narrower"

    def expected(self, dimension: str) -> str:
        """The values that pass ``dimension``, as a failure message states them."""
        return dimension_named(dimension).expected(
            accept_partial=self.accept_partial, fr_scope=self.fr_scope
        )

    def over_trials(self, results: list[ExperimentResult], dimension: str) -> TrialsOutcome:
        """Whether the dimension passes over the trials (broken trials left out): its pass
        rate reaches ``min_pass_rate``; the message gives ``k/n`` and each failing trial."""
        verdicts = [
            (r, self.passes(dimension, r.verdict.value(dimension)))
            for r in results
            if r.broken is None and r.verdict is not None
        ]
        applying = [(r, ok) for r, ok in verdicts if ok is not None]
        k, n = sum(1 for _, ok in applying if ok), len(applying)
        if not n:
            return TrialsOutcome(0, 0, None, "")
        passed = k / n >= self.min_pass_rate
        key = results[0].experiment.base_key
        lines = [f"{key} {dimension} passed {k}/{n} trials (needs {self.min_pass_rate:.0%})"]
        lines += [self.failure_message(r, dimension) for r, ok in applying if not ok]
        return TrialsOutcome(k, n, passed, "\n".join(lines))

    def failure_message(self, result: ExperimentResult, dimension: str) -> str:
        """``GPU_SLEEP:1:5:2 rank_primary = false (expected true)``, what the analyzer named
        beside what was expected, and the judge's notes: what a failing dimension reports, for
        pool items and Python tests alike."""
        assert result.verdict is not None
        value = result.verdict.value(dimension)
        lines = [
            f"{result.experiment.key} {dimension} = {value} (expected {self.expected(dimension)})",
            dimension_named(dimension).named_line(result),
            f"judge notes: {result.verdict.notes}",
        ]
        return "\n".join(line for line in lines if line)


DEFAULT_RULE = PassRule()
"""The strict rule: ``partial`` fails and FR must name the exact rank."""


def scored_verdict(result: ExperimentResult) -> Verdict | None:
    """The verdict that counts towards pass rates: None for broken or unjudged experiments."""
    return None if result.broken is not None else result.verdict


def unscored_note(result: ExperimentResult) -> str:
    """Why a result has no scored verdict, in the report's notes style.

    ``run_invalid: …`` for invalid runs (``run_invalid: infrastructure: …`` when the backend
    failed), ``analysis_failed: …`` or ``judge_failed: …`` otherwise; ``unfinished: …`` for
    what a run recorded before it stopped (a job submitted, an attempt set aside).
    """
    if result.broken is None and result.verdict is None:
        job = result.job
        return (
            "unfinished: "
            + (
                f"job {job.job_id} was {job.state.value} when last recorded"
                if job is not None
                else "the next job was not submitted"
            )
            + "; continue the session (--faultloop-session) to finish it"
        )
    reason = result.reason or "no reason recorded"
    if result.broken == "infrastructure":
        return f"run_invalid: infrastructure: {reason}"
    return f"{result.broken or 'judge_failed'}: {reason}"
