"""Attribution modules: built-in log and flight-recorder analyzers, adapters for external ones."""

from pytest_faultloop.analyzers.errors import AnalyzerError
from pytest_faultloop.analyzers.external import run_fr_command, run_log_command
from pytest_faultloop.analyzers.fr import analyze_fr
from pytest_faultloop.analyzers.harness_filter import (
    filter_harness_lines,
    is_harness_line,
)
from pytest_faultloop.analyzers.log_analyzer import analyze_log
from pytest_faultloop.analyzers.log_reader import log_tail
from pytest_faultloop.analyzers.policy import (
    DEFAULT_POLICY,
    DecisionPolicy,
    parse_policy,
)

__all__ = [
    "DEFAULT_POLICY",
    "AnalyzerError",
    "DecisionPolicy",
    "analyze_fr",
    "analyze_log",
    "filter_harness_lines",
    "is_harness_line",
    "log_tail",
    "parse_policy",
    "run_fr_command",
    "run_log_command",
]
