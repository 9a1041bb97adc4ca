"""Which of many keyworded items a line holds a keyword of, without testing every keyword.

Each keyword is filed under its rarest character (rarest in a sample of real log lines); a line
is tested only for the keywords filed under characters it holds. The catalogue's entries hold
about 270 keywords, and a line that holds any (every line the scanner reads) used to be tested
for all of them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Generic, TypeVar

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

    def holders(self, text: str) -> list[Item]:
        """The items with a keyword in ``text`` (and those without keywords), in order."""
        found = set(self._always)
        for character in self._characters.intersection(text):
            for keyword, places in self._filed[character]:
                if keyword in text:
                    found |= places
        return [self._items[at] for at in sorted(found)]
