"""A line's form (its text with every number masked), and a run's progress read from it: a
line that repeats the previous one's form with other numbers (``step 1248 ...`` after
``step 1247 ...``) says the work went on, whatever the words (a user's prints hold none the
catalogue knows)."""

from __future__ import annotations

import re
from dataclasses import dataclass

_NUMBER = re.compile(r"\d+")


def line_form(text: str) -> str:
    """The text with every number masked: lines of one form differ only in their numbers."""
    return _NUMBER.sub("#", text)


@dataclass(slots=True)
class Progress:
    """The last line of one stream (a rank's, the log's), to tell whether the next advanced."""

    last: tuple[str, str] | None = None

    def advanced(self, content: str) -> bool:
        """Is ``content`` the last line's form with other numbers? (A line repeated as it was,
        a monitor thread's, says nothing; a blank line between two steps is skipped.)"""
        if not content.strip():
            return False
        form = line_form(content)
        last, self.last = self.last, (form, content)
        return last is not None and last[0] == form and last[1] != content
