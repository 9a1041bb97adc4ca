"""The scanner's keyword filter: which lines are worth reading at all (every catalogue entry's
keywords, the structural readers' words and the error levels), tested on whole blocks at C
speed before any line is decoded."""

from __future__ import annotations

import re

from pytest_faultloop.analyzers.log.fast_search import FastPattern
from pytest_faultloop.analyzers.log.line_wrappers import without_colour
from pytest_faultloop.analyzers.log.signatures import catalogue

_STRUCTURE = (
    r"====|----|Failures:|Root Cause|(?:time|host|rank|exitcode|error_file|traceback)\s*:\s"
    r"|Starting worker group|Starting elastic|after training is done|[Cc]heckpoint"
    r"|successfully finished|done training in|Training completed\. Do not|Trainer\.fit` stopped"
    r"|[Ww]orld.size|WORLD_SIZE|nranks|world_sizes|mpirun|mpiexec|horovodrun|[Hh]orovod"
    r"|node[_-]rank|(?-u:\b)(?i-u:pid)(?-u:\b)"
    r"|(?i-u:training (?:is )?(?:complete|finished|done)|(?:finished|done|completed) training)"
    r"|==> |exits successfully"
)
"""What the structural readers need: torchrun's failure table, restart cycles, run facts (a
process's pid beside its rank), Horovod's stall entries, tail's and head's file headers. In
Rust's regex syntax, with ASCII word boundaries and case: a Unicode ``\b`` drops the fast
engine at the first non-ASCII byte (tqdm's bars, box drawing: 0.3 MB/s)."""
_LEVELS = (
    r"Error|error|Exception|exception|ERROR|FATAL|CRITICAL|\[E |(?m:(?:^|[\s\[\]:])[EF]\d{3,4} \d)"
)
"""Error-level lines for the fallback (the level itself is read from the line's wrappers)."""
_JSON_ESCAPES = {'"': '\\"', "<": "\\u003c", ">": "\\u003e", "&": "\\u0026"}
"""How a Docker json-file record writes these characters of the log line (Go's encoder)."""


def _as_json(keyword: str) -> str:
    return "".join(_JSON_ESCAPES.get(char, char) for char in keyword)


KEYWORDS = FastPattern(
    "|".join(
        sorted(
            {re.escape(form) for s in catalogue() for k in s.keywords for form in (k, _as_json(k))}
        )
    )
    + f"|{_STRUCTURE}|{_LEVELS}"
)
"""Lines worth classifying: every catalogue entry's keywords, the structural readers' and the
error levels', wherever a line's wrappers put them (nothing is anchored to a line's start)."""


def worth_reading(text: str) -> bool:
    """Does the text hold a keyword? Terminal colour may sit inside one (``grep --color``
    wraps the matched words), so escapes are removed first where there are any."""
    return KEYWORDS.contains(without_colour(text))
