"""The baseline any analyzer must beat: torchrun's Root Cause rank, else the first rank named
on an error line, with the nature that line's keywords suggest.

It reads raw lines (no wrapper peeling, no cycles, no culprit-versus-victim reasoning), as a
one-line ``grep`` would: reports show it beside the analyzer under test
(``--faultloop-log-analyzer=naive``, ``leaderboard --log-analyzer naive``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from pytest_faultloop.analyzers.cause_policy import DEFAULT_POLICY, cause_of
from pytest_faultloop.analyzers.log.no_logs import no_log_analysis
from pytest_faultloop.analyzers.log.reader import decode_line, iter_blocks
from pytest_faultloop.analyzers.log.text_forms import attribution_text
from pytest_faultloop.faults import Nature
from pytest_faultloop.models import Evidence, Issue, LogAnalysis

ANALYZER = "naive"
ROOT_CAUSE_WINDOW = 12
"""Lines after ``Root Cause (first observed failure):`` searched for the table's ``rank :``."""

_ROOT_CAUSE = re.compile(r"Root Cause \(first observed failure\)")
_TABLE_RANK = re.compile(r"\brank\s*:\s*(\d+)")
_ERROR = re.compile(
    r"error|exception|traceback|fail|timed? ?out|killed|\bsig[a-z]{3,}\b|fatal|abort"
    r"|segmentation|cancelled",
    re.IGNORECASE,
)
_RANK = re.compile(r"\[rank(\d+)\]|\brank\s*[:=]?\s*(\d+)", re.IGNORECASE)
_NATURES = (
    (Nature.HANG, re.compile(r"timed? ?out|watchdog|stall", re.IGNORECASE)),
    (Nature.SCHEDULER, re.compile(r"CANCELLED|TIME LIMIT|preempt", re.IGNORECASE)),
    (Nature.GPU_ERROR, re.compile(r"CUDA|ECC|Xid|out of memory", re.IGNORECASE)),
    (Nature.NETWORK, re.compile(r"NET/|socket|connection", re.IGNORECASE)),
    (Nature.CRASH, re.compile(r"SIG[A-Z]{3,}|signal|segmentation|killed|core dumped", re.I)),
    (Nature.EXCEPTION, re.compile(r"error|exception|traceback", re.IGNORECASE)),
)


def analyze_log_naive(path: Path) -> LogAnalysis:
    """The baseline's answer for one log; never raises on bad input (``NO LOGS``)."""
    try:
        found = _first_answer(_lines(Path(path)))
    except OSError as exc:
        return no_log_analysis(ANALYZER, f"{path}: cannot read the log: {exc.strerror or exc}")
    if found is None:
        return _answer(None, None, "no error line")
    rank, line_no, text, how = found
    return _answer(rank, (line_no, text), how)


def _lines(path: Path) -> Iterator[str]:
    with open(path, "rb") as stream:
        for block in iter_blocks(stream):
            for raw in block.splitlines():
                yield decode_line(raw, 400)


def _first_answer(lines: Iterable[str]) -> tuple[int | None, int, str, str] | None:
    """(rank, line number, line, how) of the Root Cause table's rank, else of the first error
    line naming a rank, else of the first error line (rank unknown); one pass."""
    with_rank: tuple[int | None, int, str, str] | None = None
    first_error: tuple[int | None, int, str, str] | None = None
    root_cause_until = 0
    for number, line in enumerate(lines, start=1):
        if _ROOT_CAUSE.search(line):
            root_cause_until = number + ROOT_CAUSE_WINDOW
        elif number <= root_cause_until and (match := _TABLE_RANK.search(line)):
            return int(match[1]), number, line, "root_cause"
        if with_rank is None and _ERROR.search(line):
            if match := _RANK.search(line):
                with_rank = (int(match[1] or match[2]), number, line, "error_line")
            first_error = first_error or (None, number, line, "error_line")
    return with_rank or first_error


def _answer(rank: int | None, line: tuple[int, str] | None, how: str) -> LogAnalysis:
    text = line[1].strip()[:200] if line else ""
    nature = next((n for n, p in _NATURES if p.search(text)), Nature.NONE) if line else Nature.NONE
    cause = cause_of(nature, text)
    decision = DEFAULT_POLICY.decide(cause)
    primary = [Issue(rank=rank, nature=nature, summary=text)] if line else []
    who = f"rank {rank}" if rank is not None else "no rank"
    how = how.replace("_", " ")
    return LogAnalysis(
        analyzer=ANALYZER,
        decision=decision,
        decision_text=decision.text,
        explanation=f"{how}: {who}: {text}" if line else "no error line in the log",
        primary=primary,
        attribution_text=attribution_text(primary, []),
        evidence=[Evidence(line=line[0], text=text)] if line else [],
        cause=cause,
        confidence=0.3,
        rule=f"naive_{how.replace(' ', '_')}",
    )
