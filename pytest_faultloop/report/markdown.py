"""The seed's ``experiments_report.md``: one row per experiment, then the aggregate section."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pytest_faultloop.models import ExperimentResult
from pytest_faultloop.report.aggregate import aggregate_section
from pytest_faultloop.report.costs import costs_section as costs
from pytest_faultloop.report.mdtable import table, table_row
from pytest_faultloop.report.robustness import robustness_section, split
from pytest_faultloop.report.versions import version_lines
from pytest_faultloop.scoring.dimensions import DIMENSION_NAMES
from pytest_faultloop.scoring.pass_rule import DEFAULT_RULE, PassRule, scored_verdict, unscored_note
from pytest_faultloop.store.results import load_results
from pytest_faultloop.store.session_dir import REPORT_NAME, write_atomic

TITLE = "# Fault Injection Experiment Report"
COLUMNS = (
    "#", "FAULT_TYPE", "NODES", "RANK", "ITER", "JOB_ID", "STATE", "run_valid",
    *DIMENSION_NAMES,
    "judge_notes",
)  # fmt: skip


def report_header() -> str:
    """The title and the table's header and separator, each line ending in a newline."""
    return "\n".join([TITLE, "", *table(COLUMNS, [])]) + "\n"


def render_row(number: int, result: ExperimentResult) -> str:
    """One table row, no newline; ``number`` fills the ``#`` column.

    An unscored experiment shows ``N/A`` in the five dimensions and why in the notes; a
    replayed case shows ``REPLAY`` as its state.
    """
    job = result.job
    verdict = scored_verdict(result)
    if verdict is None:
        values, notes = ["N/A"] * len(DIMENSION_NAMES), unscored_note(result)
    else:
        values, notes = [verdict.value(d) for d in DIMENSION_NAMES], verdict.notes
    state = job.state.value if job else ("REPLAY" if result.experiment.case else "-")
    return table_row(
        [
            number,
            *result.experiment.columns,
            job.job_id if job else "-",
            state,
            str(result.run_valid).lower(),
            *values,
            notes,
        ]
    )


def render_rows(number: int, result: ExperimentResult) -> list[str]:
    """The experiment's rows: one per earlier attempt set aside before it ran again, then its
    own."""
    rows = [
        table_row(
            [
                number,
                *result.experiment.columns,
                attempt.job.job_id,
                attempt.job.state.value,
                "false",
                *(["N/A"] * len(DIMENSION_NAMES)),
                f"{attempt.kind}: {attempt.reason}; resubmitted (files in {attempt.moved_to.name}/)",
            ]
        )
        for attempt in result.attempts
    ]
    return [*rows, render_row(number, result)]


def render_report(
    results: Sequence[ExperimentResult],
    rule: PassRule = DEFAULT_RULE,
    *,
    unreadable: Sequence[str] = (),
) -> str:
    """The whole file: the table in the given order, then the aggregate section (both of the
    experiments as run: perturbed copies have their own section), the robustness section."""
    plain, _ = split(results)
    rows = [
        row for number, result in enumerate(plain, start=1) for row in render_rows(number, result)
    ]
    body = report_header() + "".join(row + "\n" for row in rows)
    body += "".join(f"\n**Note:** {line}\n" for line in version_lines(plain))
    aggregate = aggregate_section(plain, rule, unreadable=unreadable)
    robustness = robustness_section(results, rule)
    return body + "\n" + aggregate + (f"\n{robustness}" if robustness else "") + costs(results)


def write_session_report(
    session_dir: Path, rule: PassRule = DEFAULT_RULE
) -> tuple[Path, list[str]]:
    """Re-render ``<session_dir>/experiments_report.md`` from the stored results.

    Returns the report's path and the unreadable result files (``path: reason``).
    """
    unreadable: list[str] = []
    results = load_results(session_dir, unreadable=unreadable)
    path = Path(session_dir) / REPORT_NAME
    write_atomic(path, render_report(results, rule, unreadable=unreadable))
    return path, unreadable
