"""Drop the harness's own lines from a log: the analyzers must never see the injected answer.

Like the seed's ``--exclude_nvrx_logs``: ``FAULT INJECTION`` markers and the log records of the
injectors' loggers (ours, ``pytest_faultloop.inject``, and Megatron's ``debug_fault_injection``).
A logger name is a whole word of a record (``[pytest_faultloop.inject]``,
``pytest_faultloop.inject:``); lines that merely mention the module are the job's own output
and stay, e.g. the last line of a traceback, ``pytest_faultloop.inject.SomeError: message``,
or a path under the seed's ``fault_injection/`` session directory.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from pytest_faultloop.analyzers.log.fast_search import FastPattern

_MARKER = r"FAULT[ _-]?INJECTION"
_LOGGERS = r"pytest_faultloop\.inject|debug_fault_injection"
HARNESS_PATTERN = rf"{_MARKER}|(?:{_LOGGERS})(?![\w.])"
"""A marker, or an injector's logger name not followed by more of a dotted name."""
_HARNESS_LINE = re.compile(HARNESS_PATTERN)
_MAYBE_HARNESS = FastPattern(f"{_MARKER}|{_LOGGERS}")
"""A superset for whole blocks (Rust's regex has no lookahead): most blocks hold neither."""
_LINE_AROUND = re.compile(rb"[^\n]*(?:" + HARNESS_PATTERN.encode() + rb")[^\n]*")


def filter_harness_lines(lines: Iterable[str]) -> Iterator[str]:
    """Yield the lines that are not the harness's own."""
    return (line for line in lines if _HARNESS_LINE.search(line) is None)


def blank_harness_lines(block: bytes, text: str) -> bytes:
    """Empty every harness line of a block of whole lines (``text``: its latin-1 decoding)."""
    if not _MAYBE_HARNESS.contains(text):
        return block
    return _LINE_AROUND.sub(b"", block)
