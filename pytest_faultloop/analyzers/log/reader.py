"""Read logs of any size in bounded memory: blocks of whole lines, over-long lines cut short."""

from __future__ import annotations

import os
import re
from collections import deque
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from pytest_faultloop.analyzers.log.harness_filter import filter_harness_lines
from pytest_faultloop.analyzers.log.line_forms import line_form
from pytest_faultloop.analyzers.log.line_wrappers import opening, opens_with

BLOCK_BYTES = 4 << 20
MAX_LINE_BYTES = 64 << 10
"""Longer lines are cut to this length (the rest of the line is skipped, never held)."""
TRUNCATED_MARK = b" [...line truncated]"
MIN_WRAP_WIDTH = 60
"""The narrowest hard wrap read as one (terminals, mailers and forums wrap at 72 to 132)."""
MIN_WRAPS = 2
"""How many cuts inside a word or a number (of lines of different shapes) the first block must
show to be read as wrapped."""
OPENING_SAMPLE = 2000
"""Lines that surely start a record, read for the wrapper kinds the log's records start with."""
_DRAWN = frozenset("|+=-*#~_\u2500\u2502\u2501\u2503\u2550\u2551\u254b\u253c")
"""Characters tables, boxes and rules are drawn with: rows starting alike are a table's."""
SAME_START = 4
"""A line that starts with the same characters as the one before is the next record of a
kind (a rank's next message, a table's next row, a progress bar's next update)."""
_TRACEBACK = "Traceback (most recent call last):"


def iter_blocks(stream: BinaryIO, block_bytes: int = BLOCK_BYTES) -> Iterator[bytes]:
    """Yield blocks of whole lines, each ending in ``\\n``; lines over MAX_LINE_BYTES are cut.

    Memory stays below ``block_bytes + MAX_LINE_BYTES`` whatever the line lengths.
    """
    return blocks_of_lines(read_chunks(stream, block_bytes))


def read_chunks(stream: BinaryIO, block_bytes: int = BLOCK_BYTES) -> Iterator[bytes]:
    """The stream's bytes, ``block_bytes`` at a time."""
    while chunk := stream.read(block_bytes):
        yield chunk


def blocks_of_lines(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """The chunks of a log as blocks of whole lines (see ``iter_blocks``)."""
    head = b""  # the start of a line not yet ended, at most MAX_LINE_BYTES long
    skipping = False  # inside the unread tail of a cut line: drop bytes until the next newline
    for chunk in chunks:
        start = 0  # where the chunk's unread part begins
        if skipping:
            newline = chunk.find(b"\n")
            if newline < 0:
                continue
            start = newline + 1
            skipping = False
            yield head + TRUNCATED_MARK + b"\n"
            head = b""
        last = chunk.rfind(b"\n", start)
        if last < 0:
            head += chunk[start:]
        else:
            yield head + chunk[start : last + 1]
            head = chunk[last + 1 :]
        if len(head) > MAX_LINE_BYTES:
            head = head[:MAX_LINE_BYTES]
            skipping = True
    if head or skipping:
        yield head + (TRUNCATED_MARK if skipping else b"") + b"\n"


def rejoin_hard_wraps(blocks: Iterable[bytes]) -> Iterator[bytes]:
    """Blocks of whole lines with the lines a hard wrap cut put back together.

    A log pasted through a terminal, a mailer or a forum that breaks lines at W columns has each
    long line cut into pieces of exactly W characters and a shorter last one. Where the first
    block shows that (``hard_wrap``), every run of W-character lines is joined with the line
    after it while that line continues the record. The whole line takes its first piece's line
    number and blank lines take the other pieces' places, so each line keeps the number it has
    in the file. Any other log passes as it is, at no cost past its first block.
    """
    wrap: HardWrap | None = None
    held = b""  # the block's trailing W-character lines: their record may go on in the next
    for index, block in enumerate(blocks):
        if index == 0:
            wrap = hard_wrap(_text_lines(block))
        if wrap is None:
            yield block
            continue
        lines = _text_lines(held + block)
        if max(map(len, lines)) > wrap.width:  # a longer line: the log is not wrapped there
            wrap = None
            yield held + block
            continue
        open_run = _open_run(lines, wrap.width)
        held = _encode(lines[len(lines) - open_run :])
        if len(held) > MAX_LINE_BYTES:  # bounded memory: a run this long is cut here
            open_run, held = 0, b""
        yield _encode(wrap.rejoin(lines[: len(lines) - open_run]))
    if wrap is not None and held:  # the log ends inside the run
        yield _encode(wrap.rejoin(_text_lines(held)))


class HardWrap:
    """A log's hard wrap: its width and the wrapper kinds its records start with."""

    def __init__(self, width: int, openings: frozenset[re.Pattern[str] | None]) -> None:
        self.width = width
        self.openings = openings

    def continues(self, line: str, following: str) -> bool:
        """Whether ``following`` goes on with the record that ``line`` (W characters) cut."""
        if not following.strip() or following[:2].isspace() or following[0] == "\t":
            return False  # a blank or an indented line (a traceback's frame, a table's field)
        if line.endswith("  "):
            return False  # padded to the width: the record ended before it (a terminal copy)
        if following[:SAME_START] == line[:SAME_START]:
            return False  # starts as this line does: the next record of the same kind
        if following[0] != line[0] and not line.strip(line[0]):
            return False  # a rule (torchrun's table border) ends where its character does
        if following[0] in _DRAWN and following[0] == line[0]:
            return False  # the next row of a drawn table
        if following.startswith(_TRACEBACK):
            return False
        if _right_aligned(line):
            return False  # a borderless table's row (f"{key:<100}{value:>20}"): a layout
        return not opens_with(following, self.openings)  # a record opens the way others do

    def rejoin(self, lines: list[str]) -> list[str]:
        """The lines with each cut record joined (see ``rejoin_hard_wraps``)."""
        joined = lines.copy()
        head = 0  # where the record being joined stands
        for at in _cut(lines, self.width):
            if self.continues(lines[at], lines[at + 1]):
                head = at if joined[at] else head  # a piece joined already is blank now
                joined[head] += lines[at + 1]
                joined[at + 1] = ""
        return joined


def hard_wrap(lines: list[str]) -> HardWrap | None:
    """The hard wrap of a log whose first lines are ``lines``, or None where it has none.

    The width W is the longest line's length (at least MIN_WRAP_WIDTH): no line may pass it. At
    least half of the lines of W characters must be followed by a line that continues their
    record (``HardWrap.continues``), and MIN_WRAPS cuts must fall inside a word or a number. A
    record starts the way the first line and the lines after shorter lines start (those follow
    a whole record). Lines of one length that are whole records (a table's rows, its rules,
    progress bars, the same message from every rank) are followed by records, so the log is
    not taken for wrapped.
    """
    width = max(map(len, lines), default=0)
    cut = _cut(lines, width)
    if width < MIN_WRAP_WIDTH or len(cut) < MIN_WRAPS:
        return None
    starts = [lines[at] for at in range(len(lines)) if at == 0 or len(lines[at - 1]) < width]
    wrap = HardWrap(
        width, frozenset(opening(line) for line in starts[:OPENING_SAMPLE] if line.strip())
    )
    wraps = 0
    in_token: set[str] = set()
    for read, at in enumerate(cut):
        if wraps + len(cut) - read < len(cut) / 2:
            return None  # too few cut lines are left to make half of them wraps
        if not wrap.continues(lines[at], lines[at + 1]):
            continue
        wraps += 1
        # cuts inside a word or number, counted once per line shape: one templated line at the
        # longest length (every process's ``Process 41231: <command>``) is no wrap however often
        if len(in_token) < MIN_WRAPS and lines[at][-1].isalnum() and not lines[at + 1][0].isspace():
            in_token.add(line_form(lines[at]))
        if wraps >= len(cut) / 2 and len(in_token) >= MIN_WRAPS:
            return wrap  # what the cut lines left could say adds to this
    return None


def _cut(lines: list[str], width: int) -> list[int]:
    """Where lines of W characters stand, the last line's place left out (none follows it)."""
    return [at for at, line in enumerate(lines[:-1]) if len(line) == width]


def _right_aligned(line: str) -> bool:
    """Whether ``line`` ends in a value right-aligned after a column's padding (two or more
    spaces after other text), as a borderless table's rows do."""
    head, _, value = line.rpartition(" ")
    return bool(value) and head.endswith(" ") and not head.isspace()


def _text_lines(block: bytes) -> list[str]:
    """A block's lines as text (undecodable bytes kept as they are), each without its end."""
    return [line.rstrip("\r") for line in block.decode("utf-8", "surrogateescape").split("\n")[:-1]]


def _encode(lines: list[str]) -> bytes:
    """Lines as a block (the bytes ``_text_lines`` read them from)."""
    return "\n".join([*lines, ""]).encode("utf-8", "surrogateescape") if lines else b""


def _open_run(lines: list[str], width: int) -> int:
    """How many lines at the end are W characters long (a record that may go on)."""
    run = 0
    while run < len(lines) and len(lines[-1 - run]) == width:
        run += 1
    return run


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
