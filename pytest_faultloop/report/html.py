"""pytest-html pieces as HTML strings: the summary matrix and each experiment's extras."""

from __future__ import annotations

import os
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Literal

from pytest_faultloop.models import ExperimentResult
from pytest_faultloop.report.aggregate import Rate, WorkloadRates, by_workload, pass_rates, tally
from pytest_faultloop.report.decision_errors import DecisionErrors
from pytest_faultloop.report.robustness import changes, split
from pytest_faultloop.report.svg_chart import rate_chart
from pytest_faultloop.scoring.dimensions import DIMENSION_NAMES, DIMENSIONS
from pytest_faultloop.scoring.pass_rule import DEFAULT_RULE, PassRule, scored_verdict, unscored_note
from pytest_faultloop.store.stored_files import LinkRefused, open_nofollow, refuse_links

Colour = Literal["pass", "fail", "partial", "error"]
COLOURS: dict[Colour, str] = {
    "pass": "#c8e6c9",
    "fail": "#ffcdd2",
    "partial": "#ffe0b2",
    "error": "#e0e0e0",
}
_TAIL_BYTES = 256 * 1024
STYLE = (
    "<style>"
    ".faultloop-summary, .faultloop-verdict, .faultloop-fr table "
    "{border-collapse: collapse; margin: 6px 0}"
    ".faultloop-summary th, .faultloop-summary td, .faultloop-verdict th, .faultloop-verdict td, "
    ".faultloop-fr th, .faultloop-fr td {border: 1px solid #e6e6e6; padding: 4px 8px; "
    "text-align: left; color: black}"
    ".faultloop-summary caption {caption-side: top; text-align: left; color: black; "
    "padding-bottom: 4px}"
    ".faultloop-extras pre {white-space: pre-wrap}"
    ".faultloop-extras, .extras-row .log {overflow-wrap: anywhere}"
    "</style>"
)
"""Cell borders and padding for the tables below (pytest-html styles only its own); the
extras' log lines, analyses and captured sections wrap inside their cell, even a line without
a space (an unwrapped one widened the results table past the window, its columns out of
view)."""


def summary_matrix(results: Sequence[ExperimentResult], rule: PassRule = DEFAULT_RULE) -> str:
    """Pass rates by fault type and dimension (of the experiments as run), by workload when
    they ran on several, the restart decisions' errors, then what the perturbations changed.

    Green: all passed; red: none; amber: some; grey: nothing scored.
    """
    everything, (results, _) = results, split(results)
    rates = pass_rates(results, lambda r: r.experiment.columns.fault, rule)
    header = "".join(f"<th>{escape(h)}</th>" for h in ("FAULT_TYPE", "scored", *DIMENSION_NAMES))
    rows = "".join(
        f"<tr><td>{escape(fault)}</td><td>{g.scored}/{g.experiments}</td>"
        f"{''.join(_rate_cell(g.rates[d]) for d in DIMENSION_NAMES)}</tr>"
        for fault, g in rates.items()
    )
    counts = tally(results)
    caption = (
        f"{counts.scored} of {counts.total} experiments scored; "
        f"invalid runs {len(counts.invalid_runs)}, analysis failures "
        f"{len(counts.analysis_failures)}, judge errors {len(counts.judge_errors)}, "
        f"attribution misses {len(counts.attribution_misses)}"
    )
    return (
        '<table class="faultloop-summary">'
        f"<caption>{escape(caption)}</caption><tr>{header}</tr>{rows}</table>"
        + rate_chart(rates)
        + workload_table(by_workload(results, rule))
        + DecisionErrors.of(results).html()
        + robustness_table(everything, rule)
    )


def workload_table(workloads: dict[str, WorkloadRates]) -> str:
    """Pass rates by workload and dimension, with each workload's median job time ('' for
    one workload)."""
    if not workloads:
        return ""
    heads = ("WORKLOAD", "scored", *DIMENSION_NAMES, "median job s")
    header = "".join(f"<th>{escape(h)}</th>" for h in heads)
    rows = "".join(
        f"<tr><td>{escape(name)}</td><td>{w.rates.scored}/{w.rates.experiments}</td>"
        f"{''.join(_rate_cell(w.rates.rates[d]) for d in DIMENSION_NAMES)}"
        f"<td>{escape(w.median_job)}</td></tr>"
        for name, w in workloads.items()
    )
    caption = "By workload: the framework each job ran on"
    return (
        f'<table class="faultloop-summary"><caption>{caption}</caption>'
        f"<tr>{header}</tr>{rows}</table>"
    )


def robustness_table(results: Sequence[ExperimentResult], rule: PassRule = DEFAULT_RULE) -> str:
    """Per perturbation and analyzer, the cells lost and gained against the unperturbed
    experiments ('' without perturbed copies); a row with a loss is red."""
    rows = changes(results, rule)
    if not rows:
        return ""
    header = "".join(
        f"<th>{h}</th>" for h in ("perturbation", "analyzer", "cases", "cells", "lost", "gained")
    )
    body = "".join(
        f"<tr>{_cell(r.perturbation, 'fail' if r.lost else 'pass')}<td>{escape(r.analyzer)}</td>"
        f"<td>{len(r.cases)}</td><td>{r.cells}</td>"
        f'<td title="{escape("; ".join(r.lost))}">{len(r.lost)}</td>'
        f'<td title="{escape("; ".join(r.gained))}">{len(r.gained)}</td></tr>'
        for r in rows
    )
    caption = "Robustness: cells a perturbation changed, against the same experiment unperturbed"
    return (
        f'<table class="faultloop-summary"><caption>{caption}</caption>'
        f"<tr>{header}</tr>{body}</table>"
    )


def verdict_table(result: ExperimentResult, rule: PassRule = DEFAULT_RULE) -> str:
    """The five verdict values, coloured; an unscored experiment shows one grey cell saying why."""
    header = "".join(f"<th>{d}</th>" for d in DIMENSION_NAMES)
    verdict = scored_verdict(result)
    if verdict is None:
        body = _cell(unscored_note(result), "error", colspan=len(DIMENSION_NAMES))
    else:
        body = "".join(_value_cell(d, verdict.value(d), rule) for d in DIMENSION_NAMES)
    return f'<table class="faultloop-verdict"><tr>{header}</tr><tr>{body}</tr></table>'


def named_html(result: ExperimentResult) -> str:
    """Per dimension, what the analyzers said beside what was expected ('' without analyses)."""
    pairs = [(d.name, d.named_and_expected(result)) for d in DIMENSIONS]
    rows = "".join(
        f"<tr><td>{d}</td><td>{escape(pair[0])}</td><td>{escape(pair[1])}</td></tr>"
        for d, pair in pairs
        if pair
    )
    if not rows:
        return ""
    head = "<tr><th>dimension</th><th>the analyzers said</th><th>expected</th></tr>"
    return f'<table class="faultloop-named">{head}{rows}</table>'


def notes_html(result: ExperimentResult) -> str:
    """The judge's notes, or why the experiment was not scored."""
    verdict = scored_verdict(result)
    text = unscored_note(result) if verdict is None else verdict.notes
    return f'<p class="faultloop-notes">{escape(text)}</p>'


def attribution_html(result: ExperimentResult) -> str:
    """The log analyzer's decision, explanation and attribution text."""
    analysis = result.log_analysis
    if analysis is None:
        return '<p class="faultloop-attribution">No log analysis.</p>'
    text = "\n".join(
        part
        for part in (analysis.decision_text, analysis.explanation, analysis.attribution_text)
        if part
    )
    return (
        f"<h4>Attribution ({escape(analysis.analyzer)}: {escape(analysis.decision.value)})</h4>"
        f'<pre class="faultloop-attribution">{escape(text)}</pre>'
    )


def fr_html(result: ExperimentResult) -> str:
    """The flight-recorder analysis: its table (or groups), suspects and unreadable dumps."""
    fr = result.fr_analysis
    if fr is None:
        return '<p class="faultloop-fr">No FR analysis.</p>'
    if fr.no_dumps:
        body = "<p>No FR dumps were read.</p>"
    elif fr.table:
        body = f"<pre>{escape(fr.table)}</pre>"
    else:
        head = ("PGID", "Process Group Desc", "Op Type", "Size", "Dtype", "Missing Ranks")
        rows = "".join(
            "<tr>"
            + "".join(
                f"<td>{escape(v)}</td>"
                for v in (g.pg_id, g.desc, g.op, g.size, g.dtype, _ranks(g.missing_ranks))
            )
            + "</tr>"
            for g in fr.groups
        )
        body = f"<table><tr>{''.join(f'<th>{h}</th>' for h in head)}</tr>{rows}</table>"
    suspects = f"<p>Suspects: {escape(_ranks(fr.suspects) or 'none')}</p>"
    unreadable = "".join(f"<li>{escape(u)}</li>" for u in fr.unreadable)
    unreadable = f"<p>Unreadable dumps:</p><ul>{unreadable}</ul>" if unreadable else ""
    return (
        f'<div class="faultloop-fr"><h4>FR analysis ({escape(fr.analyzer)}, '
        f"{fr.dumps_read} dumps)</h4>{body}{suspects}{unreadable}</div>"
    )


def log_tail_html(result: ExperimentResult, lines: int = 40) -> str:
    """The last ``lines`` lines of the main workload log, escaped."""
    artifacts = result.artifacts
    log = artifacts.log if artifacts else None
    if artifacts is None or log is None:
        return '<p class="faultloop-log">No workload log.</p>'
    try:
        refuse_links(log, artifacts.experiment_dir)  # shown as itself, never through a link
        tail = _tail(log, lines)
    except (OSError, LinkRefused) as exc:
        return f'<p class="faultloop-log">Log unreadable: {escape(str(exc))}</p>'
    return (
        f"<h4>Log tail ({escape(log.name)}, last {lines} lines)</h4>"
        f'<pre class="faultloop-log">{escape(tail)}</pre>'
    )


def experiment_link(result: ExperimentResult, report_dir: Path | None = None) -> str:
    """A link to the experiment directory, relative to ``report_dir`` when given."""
    directory = _experiment_dir(result)
    if directory is None:
        return '<p class="faultloop-link">No experiment directory.</p>'
    if report_dir is None:
        href = Path(os.path.abspath(directory)).as_uri()
    else:
        href = Path(os.path.relpath(directory, report_dir)).as_posix()
    return f'<p class="faultloop-link"><a href="{escape(href)}">{escape(str(directory))}</a></p>'


def item_extras(
    result: ExperimentResult,
    rule: PassRule = DEFAULT_RULE,
    *,
    log_lines: int = 40,
    report_dir: Path | None = None,
    log_shown_with: str | None = None,
) -> str:
    """Everything above for one experiment, in one block; the log tail only where
    ``log_shown_with`` (the cell that shows it) is None."""
    log = (
        log_tail_html(result, log_lines)
        if log_shown_with is None
        else f'<p class="faultloop-log">Log tail: with {escape(log_shown_with)}.</p>'
    )
    parts = (
        verdict_table(result, rule),
        named_html(result),
        notes_html(result),
        attribution_html(result),
        fr_html(result),
        log,
        experiment_link(result, report_dir),
    )
    return f'<div class="faultloop-extras">{"".join(parts)}</div>'


def _cell(text: str, colour: Colour, colspan: int = 1) -> str:
    span = f' colspan="{colspan}"' if colspan > 1 else ""
    return f'<td{span} style="background-color:{COLOURS[colour]}">{escape(text)}</td>'


def _rate_cell(rate: Rate) -> str:
    if rate.total == 0:
        return _cell(str(rate), "error")
    colour: Colour = (
        "pass" if rate.passed == rate.total else "fail" if rate.passed == 0 else "partial"
    )
    return _cell(str(rate), colour)


def _value_cell(dimension: str, value: str, rule: PassRule) -> str:
    passed = rule.passes(dimension, value)
    colour: Colour = "pass" if passed else "fail"
    if passed is None:
        colour = "error"
    elif value == "partial":
        colour = "partial"
    return _cell(value, colour)


def _ranks(ranks: Sequence[int]) -> str:
    return ", ".join(str(r) for r in ranks)


def _experiment_dir(result: ExperimentResult) -> Path | None:
    if result.artifacts is not None:
        return result.artifacts.experiment_dir
    return result.job.experiment_dir if result.job is not None else None


def _tail(path: Path, lines: int) -> str:
    with os.fdopen(open_nofollow(path), "rb") as log:
        log.seek(0, os.SEEK_END)
        log.seek(max(0, log.tell() - _TAIL_BYTES))
        text = log.read().decode("utf-8", errors="replace")
    return "\n".join(text.splitlines()[-lines:])
