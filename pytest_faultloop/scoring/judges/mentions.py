"""Ranks and nodes named in attribution text.

``rank 1``, ``Rank1``, ``[rank1]:``, ``rank=1``, ``"rank": "1"`` name one rank; ``ranks 1, 3
and 5``, ``rank(s) [1, 3]`` name several; ``ranks 0-3`` names a group (a range), which locates
a failure without naming the rank. Numbers are read whole: ``rank 10`` never names rank 1.
``local_rank`` is not a global rank and is ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_RANGE = re.compile(r"(\d+)\s*(?:-|\.\.|\bto\b)\s*(\d+)")
_NO_RANGE = r"(?!\d|\s*(?:-|\.\.|\bto\b)\s*\d)"
_SINGLE = re.compile(rf"""(?<![\w])rank(?!s|\(s\))["']?\s*[:=#_-]?\s*["']?(\d+){_NO_RANGE}""", re.I)
_LIST_KEYWORD = (
    r"""(?:ranks|rank\(s\)|rank(?=["']?\s*[:=]?\s*[\[{])|rank(?=\s*\d+\s*(?:-|\.\.|\bto\b)))"""
)
_LIST_ITEM = r"\d+(?:\s*(?:-|\.\.|\bto\b)\s*\d+)?"
_LIST = re.compile(
    rf"""(?<![\w]){_LIST_KEYWORD}["']?\s*[:=]?\s*[\[{{]?\s*["']?"""
    rf"""({_LIST_ITEM}(?:["']?\s*(?:,|&|/|\band\b|\bor\b)\s*["']?{_LIST_ITEM})*)""",
    re.I,
)
_NODE = re.compile(r"(?<![\w])node[\s:#=_-]*(\d+)(?!\d)", re.I)
_NODE_LABEL = re.compile(r"^\s*(?:node[\s#_-]*)?(0|[1-9]\d*)\s*$", re.I)
_PRIMARY = re.compile(r"primary issues?\s*:(.*?)(?:secondary issues?\s*:|$)", re.I | re.S)


@dataclass
class Mentions:
    ranks: set[int] = field(default_factory=set)
    """Ranks named individually."""
    groups: list[range] = field(default_factory=list)
    """Rank ranges named as a group."""
    nodes: set[int] = field(default_factory=set)
    """Node indices named as ``node N``."""

    def locates(self, rank: int) -> bool:
        """A group holding ``rank`` is named (without the rank itself)."""
        return any(rank in group for group in self.groups)


def mentions(text: str) -> Mentions:
    found = Mentions(nodes={int(n) for n in _NODE.findall(text)})
    found.ranks.update(int(n) for n in _SINGLE.findall(text))
    for listed in _LIST.findall(text):
        found.groups.extend(range(int(lo), int(hi) + 1) for lo, hi in _RANGE.findall(listed))
        found.ranks.update(int(n) for n in re.findall(r"\d+", _RANGE.sub(" ", listed)))
    return found


def first_rank(text: str) -> int | None:
    """The rank named first in ``text`` (individually or in a list), None when none is."""
    found = [(m.start(), int(m[1])) for m in _SINGLE.finditer(text)]
    for listed in _LIST.finditer(text):
        numbers = re.findall(r"\d+", _RANGE.sub(" ", listed[1]))
        if numbers:
            found.append((listed.start(), int(numbers[0])))
    return min(found)[1] if found else None


def primary_section(attribution_text: str) -> str:
    """The ``Primary issues: [...]`` part of the seed's attribution line ('' when absent)."""
    match = _PRIMARY.search(attribution_text)
    return match[1] if match else ""


def node_index(label: str) -> int | None:
    """The node index in ``"1"``, ``"node1"``, ``"node 1"``, ``"node-1"``; None for hostnames.

    A zero-padded number (``node001``) is a hostname, not an index.
    """
    match = _NODE_LABEL.match(label)
    return int(match[1]) if match else None


def same_host(label: str, host: str) -> bool:
    """``label`` names ``host`` (short or fully qualified, any case)."""
    return bool(label.strip()) and _short_host(label) == _short_host(host)


def _short_host(name: str) -> str:
    return name.strip().lower().split(".")[0]
