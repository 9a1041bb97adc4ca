"""NUL bytes in a log: holes in its text, or the sign of a file that is not text at all.

A text log can hold runs of NUL bytes where nothing was written. ``copytruncate`` log rotation
truncates the file while the writer keeps its offset, so the writer's next line lands past a
run of NULs as long as the file was; a node that crashed mid-write leaves the pages it never
flushed as NULs, and the requeued job appends after them. Such a file is text around its holes
and is read as that text. A binary file (a core dump, an executable, UTF-16 text, a pickle)
has NULs too, but scattered among short pieces that are no text; it stays unread.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import BinaryIO

SAMPLE_BYTES = 64 << 10
"""How much of a log (after a leading hole) decides whether it is text."""
MIN_PIECE_BYTES = 64
"""The least text between holes, on average, of a log with holes: a binary file's NULs are
scattered among a few bytes each (UTF-16 text: one)."""
MIN_HOLE_BYTES = 16
"""The fewest NULs inside a line read as a hole: fewer are a program's own (a C string printed
with its terminator), kept as written."""
_NUL_RUN = re.compile(rb"\x00+")
_CONTROL = re.compile(rb"[\x01-\x06\x0e-\x1a\x1c-\x1f\x7f]")
"""Control bytes a text log does not hold (tab, line ends, form feed, bell, backspace and the
terminal's escape excepted)."""
_NEWLINE = ord("\n")


def binary_reason(stream: BinaryIO) -> str | None:
    """Why the log ``stream`` reads is not text (binary data), or None where it is text.

    Judged on SAMPLE_BYTES from the first byte past a leading hole (a copytruncate's, of any
    length). Where the sample holds no NUL: binary when over a tenth of it is not UTF-8. Where
    it does, its NUL runs must be holes (MIN_PIECE_BYTES of text between them on average) and
    the text between them must be text: UTF-8 as above, and no more than one control byte in a
    thousand."""
    leading = 0
    while chunk := stream.read(SAMPLE_BYTES):
        text_at = len(chunk) - len(chunk.lstrip(b"\x00"))
        leading += text_at
        if text_at < len(chunk):
            sample = chunk[text_at:] + stream.read(text_at)
            return _sample_reason(sample, leading)
    return None


def _sample_reason(sample: bytes, offset: int) -> str | None:
    runs = list(_NUL_RUN.finditer(sample))
    text = _NUL_RUN.sub(b"", sample) if runs else sample
    if runs and len(text) < len(runs) * MIN_PIECE_BYTES:
        return f"binary data (NUL byte at offset {offset + runs[0].start()})"
    bad = len(text) - len(text.decode("utf-8", "ignore").encode("utf-8"))
    if bad > len(text) // 10:
        return f"binary data ({bad} of the first {len(sample)} bytes are not UTF-8)"
    controls = len(_CONTROL.findall(text)) if runs else 0
    if controls > len(text) // 1000:
        return f"binary data ({controls} control bytes among NUL bytes in the first {len(sample)})"
    return None


def without_holes(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """The chunks of a log with its holes taken out (a text log: see ``binary_reason``).

    A hole at the start of the file or of a line is dropped: the text after it starts a line
    where the hole stood (line numbers as in the file). A hole inside a line (a crash's unwritten
    page cut the line, and the next run's output follows) ends that line: the text after it is
    a line of its own, never glued to the cut one, and lines after it count one more than an
    editor shows. Fewer than MIN_HOLE_BYTES NULs inside a line are no hole and stay as written."""
    holes = _Holes()
    for chunk in chunks:
        if holes.held or b"\x00" in chunk:
            filled = holes.fill(chunk)
        else:
            filled = chunk
            holes.last = chunk[-1]
        if filled:
            yield filled


class _Holes:
    """The holes of a log read chunk by chunk: a hole may span chunks, and only the bytes on
    both sides of it say what it was."""

    def __init__(self) -> None:
        self.last = _NEWLINE
        """The last byte given out (the file starts as a line does)."""
        self.held = 0
        """How many NULs the chunks so far end in: what they are waits for the next byte."""

    def fill(self, chunk: bytes) -> bytes:
        """``chunk`` with its holes taken out; the NULs it ends in are held."""
        pieces: list[bytes] = []
        start = 0
        for run in _NUL_RUN.finditer(chunk):
            self._text(chunk[start : run.start()], pieces)
            self.held += run.end() - run.start()  # one hole with the NULs held, if no text came
            start = run.end()
        self._text(chunk[start:], pieces)
        return b"".join(pieces)

    def _text(self, text: bytes, pieces: list[bytes]) -> None:
        """Text after the held NULs: they end the line where both sides of them are text."""
        if not text:
            return
        held, self.held = self.held, 0
        if held and self.last != _NEWLINE and text[0] != _NEWLINE:
            pieces.append(b"\n" if held >= MIN_HOLE_BYTES else b"\x00" * held)
        pieces.append(text)
        self.last = text[-1]
