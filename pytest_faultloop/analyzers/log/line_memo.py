"""Pure per-line work memoised by the line's exact text.

Real logs repeat their lines heavily (NCCL's init lines, a failure table printed at every
restart, the frames of a stack dumped again and again): a line seen before costs a dictionary
lookup. Memory stays bounded: at most ``MEMO_LINES`` lines are kept (least recently used go
first), and lines longer than ``MEMO_CHARS`` are never kept (a progress bar can be MBs).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache, update_wrapper
from typing import TypeVar

MEMO_LINES = 1 << 14
MEMO_CHARS = 1000
Line = TypeVar("Line", str, bytes)
Result = TypeVar("Result")


def by_line(function: Callable[[Line], Result]) -> Callable[[Line], Result]:
    """``function`` memoised by its one argument, a line. Its results are shared between
    calls: they must never be changed (copy one before changing it)."""
    cached = lru_cache(maxsize=MEMO_LINES)(function)

    def lookup(line: Line) -> Result:
        return cached(line) if len(line) <= MEMO_CHARS else function(line)

    return update_wrapper(lookup, function)
