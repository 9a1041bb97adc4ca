"""Which of many keyworded items a line holds a keyword of, without testing every keyword.

Each keyword is filed under its rarest character (rarest in a sample of real log lines); a line
is tested only for the keywords filed under characters it holds. The catalogue's entries hold
about 270 keywords, and a line that holds any (every line the scanner reads) used to be tested
for all of them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Generic, TypeVar

from pytest_faultloop.analyzers.log.fast_search import FastPattern

Item = TypeVar("Item")


class KeywordIndex(Generic[Item]):
    """Items, each with its keywords, in the order they are to be tried."""

    def __init__(self, items: Sequence[tuple[Item, Sequence[str]]], sample: str) -> None:
        """``sample``: text whose character counts say which characters are rare."""
        counts = Counter(sample)
        self._items = [item for item, _ in items]
        self._always = frozenset(at for at, (_, keywords) in enumerate(items) if not keywords)
        holders: dict[str, set[int]] = {}
        for at, (_, keywords) in enumerate(items):
            for keyword in keywords:
                holders.setdefault(keyword, set()).add(at)
        self._filed: dict[str, list[tuple[str, frozenset[int]]]] = {}
        for keyword, places in sorted(holders.items()):
            rarest = min(keyword, key=lambda char: (counts[char], char))
            self._filed.setdefault(rarest, []).append((keyword, frozenset(places)))
        self._characters = frozenset(self._filed)
        self._any = FastPattern("|".join(map(re.escape, sorted(holders)))) if holders else None
        """Whether a text holds any keyword, at native speed: most lines read hold none."""
        self._keywordless = [self._items[at] for at in sorted(self._always)]

    def holders(self, text: str) -> list[Item]:
        """The items with a keyword in ``text`` (and those without keywords), in order."""
        # the native search reads no lone surrogate (JSON's "\udc80"): trusted on ASCII alone
        if self._any is None or (text.isascii() and not self._any.contains(text)):
            return list(self._keywordless)
        found = set(self._always)
        for character in self._characters.intersection(text):
            for keyword, places in self._filed[character]:
                if keyword in text:
                    found |= places
        return [self._items[at] for at in sorted(found)]
