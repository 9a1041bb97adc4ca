"""Read logs of any size in bounded memory: blocks of whole lines, over-long lines cut short."""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from pytest_faultloop.analyzers.log.harness_filter import filter_harness_lines

BLOCK_BYTES = 4 << 20
MAX_LINE_BYTES = 64 << 10
"""Longer lines are cut to this length (the rest of the line is skipped, never held)."""
TRUNCATED_MARK = b" [...line truncated]"


def iter_blocks(stream: BinaryIO, block_bytes: int = BLOCK_BYTES) -> Iterator[bytes]:
    """Yield blocks of whole lines, each ending in ``\\n``; lines over MAX_LINE_BYTES are cut.

    Memory stays below ``block_bytes + MAX_LINE_BYTES`` whatever the line lengths.
    """
    head = b""  # the start of a line not yet ended, at most MAX_LINE_BYTES long
    skipping = False  # inside the unread tail of a cut line: drop bytes until the next newline
    while chunk := stream.read(block_bytes):
        if skipping:
            newline = chunk.find(b"\n")
            if newline < 0:
                continue
            chunk = chunk[newline + 1 :]
            skipping = False
            yield head + TRUNCATED_MARK + b"\n"
            head = b""
        last = chunk.rfind(b"\n")
        if last < 0:
            head += chunk
        else:
            yield head + chunk[: last + 1]
            head = chunk[last + 1 :]
        if len(head) > MAX_LINE_BYTES:
            head = head[:MAX_LINE_BYTES]
            skipping = True
    if head or skipping:
        yield head + (TRUNCATED_MARK if skipping else b"") + b"\n"


def decode_line(raw: bytes, limit: int = 2000) -> str:
    """A line as text for reports: undecodable bytes replaced, cut to ``limit`` characters."""
    text = raw[: limit * 4].decode("utf-8", "replace").rstrip("\r\n")
    return text if len(text) <= limit else text[:limit] + " [...]"


def log_tail(path: Path, n: int = 400) -> str:
    """The last ``n`` lines of a log without the harness's lines (the judge's view of the log).

    Reads backwards in growing windows, so a multi-GB log costs a few MB.
    """
    with open(path, "rb") as stream:
        size = stream.seek(0, os.SEEK_END)
        window = max(n, 1) * 512
        while True:
            start = max(0, size - window)
            lines = _filtered_lines_from(stream, start, n)
            if len(lines) >= n or start == 0:
                return "\n".join(lines)
            window *= 4


def _filtered_lines_from(stream: BinaryIO, start: int, n: int) -> deque[str]:
    lines: deque[str] = deque(maxlen=n)
    stream.seek(start)
    first = start > 0  # the window starts inside a line: drop that partial line
    for block in iter_blocks(stream):
        text = block.decode("utf-8", "replace").split("\n")[:-1]
        if first:
            text, first = text[1:], False
        lines.extend(filter_harness_lines(text))
    return lines
