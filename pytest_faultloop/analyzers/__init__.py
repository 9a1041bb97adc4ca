"""Attribution modules: built-in log and flight-recorder analyzers, adapters for external ones.

``log/``: the rule-based and LLM log analyzers; ``fr/``: the flight-recorder analyzer;
``external/``: analyzers run as commands. Code outside this package imports from here only.
"""

from __future__ import annotations

from pytest_faultloop.analyzers.cause_policy import (
    DEFAULT_POLICY,
    DecisionPolicy,
    parse_policy,
)
from pytest_faultloop.analyzers.external.commands import run_fr_command, run_log_command
from pytest_faultloop.analyzers.failure import AnalyzerError
from pytest_faultloop.analyzers.fr.dumps import dump_files
from pytest_faultloop.analyzers.fr.fr_analyzer import analyze_fr
from pytest_faultloop.analyzers.log.harness_filter import filter_harness_lines
from pytest_faultloop.analyzers.log.llm_analyzer import analyze_log_llm
from pytest_faultloop.analyzers.log.log_analyzer import analyze_log
from pytest_faultloop.analyzers.log.naive_analyzer import analyze_log_naive
from pytest_faultloop.analyzers.log.no_logs import no_log_analysis
from pytest_faultloop.analyzers.log.reader import log_tail
from pytest_faultloop.analyzers.log.signatures import catalogue_table
from pytest_faultloop.analyzers.log.text_forms import five_field_text

__all__ = [
    "DEFAULT_POLICY",
    "AnalyzerError",
    "DecisionPolicy",
    "analyze_fr",
    "analyze_log",
    "analyze_log_llm",
    "analyze_log_naive",
    "catalogue_table",
    "dump_files",
    "filter_harness_lines",
    "five_field_text",
    "log_tail",
    "no_log_analysis",
    "parse_policy",
    "run_fr_command",
    "run_log_command",
]
