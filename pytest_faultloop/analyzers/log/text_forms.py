"""The seed's text forms of a log analysis: the attribution line and the five-field output
(logsage's fields; the last one, a bare ``True``/``False`` there, labelled here)."""

from __future__ import annotations

from pytest_faultloop.models import Issue, LogAnalysis

CHECKPOINT_LABEL = "Checkpoint saved:"
_SAVED = {True: "yes", False: "no", None: "unknown"}


def issue_text(issue: Issue) -> str:
    where = "job" if issue.rank is None else f"rank {issue.rank}"
    if issue.node:
        where += f" (node {issue.node})"
    return f"{where}: {issue.nature.value} - {issue.summary}"


def attribution_text(primary: list[Issue], secondary: list[Issue]) -> str:
    """``Primary issues: [...], Secondary issues: [...]`` as logsage prints it."""
    first = "; ".join(issue_text(i) for i in primary)
    rest = "; ".join(issue_text(i) for i in secondary)
    return f"Primary issues: [{first}], Secondary issues: [{rest}]"


def five_field_text(analysis: LogAnalysis) -> str:
    """Decision, explanation, attribution, detail, ``Checkpoint saved: yes|no|unknown``: one
    per line."""
    detail = analysis.evidence[0].text if analysis.evidence else ""
    if analysis.evidence:
        detail = f"line {analysis.evidence[0].line}: {detail}"
    return "\n".join(
        [
            analysis.decision_text,
            analysis.explanation.replace("\n", " "),
            f"Attribution: {analysis.attribution_text}",
            detail.replace("\n", " "),
            f"{CHECKPOINT_LABEL} {_SAVED[analysis.checkpoint_saved]}",
        ]
    )
