"""The end of a run: the session report re-rendered, the run recorded in the history, and the
lines the terminal summary prints (counts, judge agreement, comparison, stop condition)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pytest_faultloop.models import ExperimentResult
from pytest_faultloop.models.errors import ConfigError
from pytest_faultloop.report.aggregate import GroupRates, pass_rates
from pytest_faultloop.report.agreement import agreement_lines
from pytest_faultloop.report.decision_errors import DecisionErrors
from pytest_faultloop.report.history import (
    HistoryRecord,
    StopCondition,
    append_history,
    find_record,
    history_path,
    previous_record,
    read_history,
    record_from_results,
    records_before,
    stop_condition,
)
from pytest_faultloop.report.html import summary_matrix
from pytest_faultloop.report.markdown import write_session_report
from pytest_faultloop.report.paired import mixed_line, paired_by_version
from pytest_faultloop.report.robustness import robustness_line, split
from pytest_faultloop.report.trials import flaky_lines, trial_cells
from pytest_faultloop.report.versions import version_lines
from pytest_faultloop.scoring.dimensions import DIMENSION_NAMES
from pytest_faultloop.scoring.pass_rule import PassRule
from pytest_faultloop.store.revisions import (
    Reanalysis,
    SessionRevisions,
    revision_results,
    session_path,
    split_target,
)
from pytest_faultloop.store.session_dir import tsv_problems


class RunSummary:
    """What one run produced, told once it ends (on the controller or single process)."""

    def __init__(
        self,
        rule: PassRule,
        base_experiments_dir: Path,
        compare_with: str | None,
        max_false_stop: float | None = None,
    ) -> None:
        self.rule = rule
        self.max_false_stop = max_false_stop
        """The false-STOP gate: the largest upper bound of the rate a run may show."""
        self.base_experiments_dir = base_experiments_dir
        self.compare_with = compare_with
        self.session: Path | None = None
        self.results: list[ExperimentResult] = []
        self.unfinished = 0
        """Experiments this run started that have no final result (an interrupt)."""
        self.cells: Mapping[str, set[str]] | None = None
        """The cells the run selected (experiment -> dimensions); None: every cell."""
        self.stop: StopCondition | None = None
        """The seed's stop condition after this run (None: the run added no history record)."""
        self._notes: list[str] = []

    def record(
        self,
        session: Path,
        keys: set[str],
        unfinished: int = 0,
        reanalysis: Reanalysis | None = None,
        cells: Mapping[str, set[str]] | None = None,
    ) -> None:
        """Re-render the session's report; keep a re-analysis' results as the revision it
        writes; add the run's finished experiments (``keys``) to the history and say what that
        means for the loop."""
        self.session = session
        self.unfinished = unfinished
        self.cells = cells
        if reanalysis is not None:
            self._publish(session, reanalysis)
        try:
            path, unreadable = write_session_report(session, self.rule)
        except OSError as exc:
            self._notes.append(
                f"faultloop: report not re-rendered ({exc.strerror}); the stored results are "
                f"kept: python -m pytest_faultloop report {session} renders it"
            )
        else:
            self._notes.append(f"faultloop: report {path}")
            self._notes.extend(f"faultloop: unreadable result {u}" for u in unreadable)
        self._notes.extend(
            f"faultloop: {problem} (kept as it is)" for problem in tsv_problems(session)
        )
        stored = SessionRevisions(session).current()
        self._notes.extend(f"faultloop: {line}" for line in version_lines(stored, session))
        self.results = [r for r in stored if r.experiment.key in keys]
        if not any(r.fingerprint for r in self.results):
            return
        record = record_from_results(
            str(session),
            self.results,
            revision=reanalysis.writes if reanalysis else None,
            rescored=reanalysis.rescored if reanalysis else None,
        )
        history_file = history_path(self.base_experiments_dir)
        try:
            append_history(history_file, record)
        except OSError as exc:
            self._notes.append(f"faultloop: run not added to {history_file} ({exc.strerror})")
            return
        unreadable_history: list[str] = []
        history = read_history(history_file, unreadable=unreadable_history)
        self._notes.extend(
            f"faultloop: unreadable history record {u} (skipped, kept as it is)"
            for u in unreadable_history
        )
        self._notes.extend(self._comparison_lines(history, record))
        self.stop = stop_condition(history, self.rule, record.cells)

    def _publish(self, session: Path, reanalysis: Reanalysis) -> None:
        """Make what the re-analysis wrote aside the session's newest revision and results."""
        try:
            revision = SessionRevisions(session).publish(reanalysis)
        except OSError as exc:
            staging = SessionRevisions(session).staging(reanalysis)
            self._notes.append(
                f"faultloop: revision {reanalysis.writes} not published ({exc.strerror}); what "
                f"this re-analysis re-scored stays in {staging}, the session's results are "
                "unchanged: make room, then run the re-analysis again"
            )
            return
        if revision is not None:
            self._notes.append(
                f"faultloop: revision {session}@{revision.name} (re-scored {revision.rescored})"
            )

    def _comparison_lines(self, history: list[HistoryRecord], record: HistoryRecord) -> list[str]:
        if not self.compare_with:
            return []
        try:
            previous = self._baseline(self.compare_with, history, record)
        except ConfigError as exc:
            return [f"faultloop: --faultloop-compare {self.compare_with}: {exc}"]
        lines = [line for r in (previous, record) if (line := mixed_line(r))]
        for comparison in paired_by_version(previous, record, self.rule):
            lines += comparison.describe()
        return [f"faultloop: {line}" for line in lines]

    def _baseline(
        self, wanted: str, history: list[HistoryRecord], record: HistoryRecord
    ) -> HistoryRecord:
        """What ``--faultloop-compare`` pairs this run with (ConfigError: nothing)."""
        assert self.session is not None
        if wanted == "previous" or (wanted == "last" and record.rescored is not None):
            if record.rescored is None:
                raise ConfigError("this run re-scored no revision (it is no re-analysis)")
            return self._revision_record(self.session, record.rescored, record)
        target, name = split_target(wanted)
        if name is not None:
            return self._revision_record(
                session_path(target, self.base_experiments_dir), name, record
            )
        if SessionRevisions(self.session).named(wanted) is not None:
            return self._revision_record(self.session, wanted, record)
        if wanted == "last":
            previous = previous_record(history, record)
            missing = "the history has no record before this run's"
        else:
            previous = find_record(records_before(history, record), wanted)
            missing = "no record of that session in the history other than this run's"
        if previous is None:
            raise ConfigError(missing)
        return previous

    def _revision_record(self, session: Path, name: str, record: HistoryRecord) -> HistoryRecord:
        """A revision's verdicts of the cells this run scored."""
        kept = revision_results(session, name, f"{session}@{name}")
        results = [r for r in kept if r.experiment.key in record.cells]
        return record_from_results(f"{session}@{name}", results, revision=name)

    def lines(self, verbose: bool = False) -> list[str]:
        """The summary; the stop condition only when it is met or ``verbose`` (-v)."""
        if self.session is None:
            return []
        results, perturbed = split(self.results)
        broken = [r for r in results if r.broken]
        kinds = sorted({r.broken for r in broken if r.broken})
        counts = ", ".join(f"{sum(r.broken == k for r in broken)} {k}" for k in kinds)
        copies = f"; {len(perturbed)} perturbed cop{'y' if len(perturbed) == 1 else 'ies'}"
        lines = [
            f"faultloop: session {self.session}",
            f"faultloop: {len(results) + self.unfinished} experiment(s): "
            f"{len(results) - len(broken)} scored"
            + (f", {len(broken)} without a valid score ({counts})" if broken else "")
            + (f", {self.unfinished} unfinished" if self.unfinished else "")
            + (copies if perturbed else ""),
        ]
        lines += [f"faultloop: {line}" for line in rate_lines(self.results, self.rule, self.cells)]
        lines += [f"faultloop: {line}" for line in agreement_lines(results)]
        lines += self._notes
        if self.stop is not None and (self.stop.met or verbose):
            lines.append(f"faultloop: {self.stop.describe()}")
        return lines

    def gate_failure(self) -> str | None:
        """Why this run's restart decisions fail the false-STOP gate (None: they pass)."""
        results, _ = split(self.results)
        return DecisionErrors.of(results).gate(self.max_false_stop)

    def resume_hint(self, continued: bool) -> str:
        """How to go on after an interrupt: the same session, its finished experiments kept
        (``continued``: the run was given its session)."""
        if continued:
            how = f"run the same command again (it continues session {self.session})"
        else:
            how = f"add --faultloop-session last (or --faultloop-session {self.session})"
        return f"faultloop: interrupted; to continue, {how}: finished experiments are kept, the rest run"

    def matrix_html(self) -> str:
        return summary_matrix(self.results, self.rule) if self.results else ""


def rate_lines(
    results: list[ExperimentResult],
    rule: PassRule,
    cells: Mapping[str, set[str]] | None = None,
) -> list[str]:
    """The pass rate per dimension with its 95 % interval (the report's overall rates, of the
    experiments as run; ``cells``: only the dimensions selected of each experiment it names),
    then per corpus split where cases carry one, the flaky cells when there were trials, and
    what perturbations changed."""
    robustness = robustness_line(results, rule)
    results, _ = split(results)
    overall = pass_rates(results, lambda _: "all", rule, cells).get("all")
    if overall is None or not overall.scored:
        return [robustness] if robustness else []
    lines = ["pass rates (95 % interval): " + _rates_text(overall)]
    decisions = DecisionErrors.of(results)
    if decisions.matrix:
        lines.append("restart decisions: " + decisions.summary())
    by_split = pass_rates(results, _split_of, rule, cells)
    for name in ("dev", "test"):
        if name in by_split and by_split[name].scored:
            group = by_split[name]
            lines.append(f"  {name} split ({group.scored} cases): {_rates_text(group)}")
    repeated = trial_cells(results, rule)
    return (
        lines + (flaky_lines(repeated) if repeated else []) + ([robustness] if robustness else [])
    )


def _split_of(result: ExperimentResult) -> str:
    case = result.experiment.case
    return (case.split if case is not None else None) or "-"


def _rates_text(group: GroupRates) -> str:
    parts = []
    for dimension in DIMENSION_NAMES:
        rate = group.rates[dimension]
        if rate.total:
            low, high = rate.interval
            parts.append(
                f"{dimension} {rate.passed}/{rate.total} ({100 * low:.0f}–{100 * high:.0f}%)"
            )
    return ", ".join(parts)
