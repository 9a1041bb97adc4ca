"""Drop the harness's own lines from a log: the analyzers must never see the injected answer.

Like the seed's ``--exclude_nvrx_logs``: fault-injection markers, lines of our injector's logger
(``pytest_faultloop.inject``) and of Megatron's ``debug_fault_injection`` module.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from pytest_faultloop.analyzers.fast_search import FastPattern

HARNESS_PATTERN = r"FAULT[ _-]?INJECT|pytest_faultloop\.inject|debug_fault_injection"
_HARNESS_LINE = re.compile(HARNESS_PATTERN, re.IGNORECASE)
_HARNESS_IN_BLOCK = FastPattern("(?i)" + HARNESS_PATTERN)
_LINE_AROUND = re.compile(
    rb"[^\n]*(?:" + HARNESS_PATTERN.encode() + rb")[^\n]*", re.IGNORECASE
)


def is_harness_line(line: str) -> bool:
    return _HARNESS_LINE.search(line) is not None


def filter_harness_lines(lines: Iterable[str]) -> Iterator[str]:
    """Yield the lines that are not the harness's own."""
    return (line for line in lines if _HARNESS_LINE.search(line) is None)


def blank_harness_lines(block: bytes, text: str) -> bytes:
    """Empty every harness line of a block of whole lines (``text``: its latin-1 decoding)."""
    if not _HARNESS_IN_BLOCK.contains(text):
        return block
    return _LINE_AROUND.sub(b"", block)
