"""The one ``NO LOGS`` analysis: no log to read, or nothing in it that could be analysed."""

from __future__ import annotations

from pytest_faultloop.analyzers.log.text_forms import attribution_text
from pytest_faultloop.models import Decision, LogAnalysis

NO_LOG_EXPLANATION = "the job left no main_workload log"


def no_log_analysis(analyzer: str, explanation: str = NO_LOG_EXPLANATION) -> LogAnalysis:
    """``NO LOGS`` (decision UNKNOWN) from ``analyzer``; ``explanation`` says why."""
    return LogAnalysis(
        analyzer=analyzer,
        decision=Decision.UNKNOWN,
        decision_text=Decision.UNKNOWN.text,
        explanation=explanation,
        attribution_text=attribution_text([], []),
    )
