"""The dev/test split of real-incident cases, fixed by a hash of the source thread.

Analyzer rules are written while reading ``dev`` cases only; ``test`` cases measure them.
The split is a function of the thread a case was copied from (not of the case), so two cases
from one thread always fall on the same side and no case can be moved by hand: a test
recomputes every ``split`` recorded in ``case.toml``.
"""

from __future__ import annotations

import hashlib
import re
from typing import Literal
from urllib.parse import urlsplit

Split = Literal["dev", "test"]
SPLITS: tuple[Split, ...] = ("dev", "test")

_THREAD_PATHS = (
    re.compile(r"^/[^/]+/[^/]+/(?:issues|pull|discussions)/\d+"),  # GitHub, GitLab-style
    re.compile(r"^/t/(?:[^/]+/)?(\d+)"),  # Discourse (discuss.pytorch.org, NVIDIA forums)
    re.compile(r"^/questions/\d+"),  # Stack Overflow / Stack Exchange
)


def source_thread(source: str) -> str:
    """The thread a source URL points into: host and the thread's own path, lower case,
    without the comment anchor, query, page or trailing slash."""
    parts = urlsplit(source.strip())
    host = parts.netloc.lower().removeprefix("www.")
    path = parts.path.rstrip("/")
    for pattern in _THREAD_PATHS:
        if match := pattern.match(path):
            path = f"/t/{match[1]}" if match.lastindex else match[0]
            break
    return f"{host}{path}".lower()


def split_of(source: str) -> Split:
    """``dev`` or ``test``: the low bit of the SHA-256 of the source thread."""
    digest = hashlib.sha256(source_thread(source).encode()).digest()
    return SPLITS[digest[-1] & 1]
