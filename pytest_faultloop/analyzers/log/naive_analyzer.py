"""The baseline any analyzer must beat: torchrun's Root Cause rank, else the first rank named
on an error line, with the nature that line's keywords suggest.

It reads raw lines (no wrapper peeling, no cycles, no culprit-versus-victim reasoning), as a
one-line ``grep`` would: reports show it beside the analyzer under test
(``--faultloop-log-analyzer=naive``, ``leaderboard --log-analyzer naive``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from pytest_faultloop.analyzers.cause_policy import DEFAULT_POLICY, cause_of
from pytest_faultloop.analyzers.log.no_logs import no_log_analysis
from pytest_faultloop.analyzers.log.reader import decode_line, iter_blocks
from pytest_faultloop.analyzers.log.text_forms import attribution_text
from pytest_faultloop.models import Evidence, Issue, LogAnalysis
from pytest_faultloop.models.faults import Nature

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
    return _answer(found)


def _lines(path: Path) -> Iterator[str]:
    with open(path, "rb") as stream:
        for block in iter_blocks(stream):
            for raw in block.splitlines():
                yield decode_line(raw, 400)


@dataclass
class _Answer:
    rank: int | None
    line: int
    text: str
    how: str
    said: str
    """The text whose keywords give the nature (the Root Cause record, or the error line)."""


def _first_answer(lines: Iterable[str]) -> _Answer | None:
    """The Root Cause table's rank, else the first error line naming a rank, else the first
    error line (rank unknown); one pass."""
    with_rank: _Answer | None = None
    first_error: _Answer | None = None
    root_cause: _Answer | None = None
    record: list[str] = []
    root_cause_until = 0
    for number, line in enumerate(lines, start=1):
        if root_cause is not None:  # the record's other fields: its exit code, its signal
            if len(record) >= ROOT_CAUSE_WINDOW or line.lstrip().startswith("===="):
                break
            record.append(line)
            continue
        if _ROOT_CAUSE.search(line):
            root_cause_until = number + ROOT_CAUSE_WINDOW
        elif number <= root_cause_until and (match := _TABLE_RANK.search(line)):
            root_cause = _Answer(int(match[1]), number, line, "root_cause", "")
            record = [line]
            continue
        if with_rank is None and _ERROR.search(line):
            if match := _RANK.search(line):
                with_rank = _Answer(int(match[1] or match[2]), number, line, "error_line", line)
            first_error = first_error or _Answer(None, number, line, "error_line", line)
    if root_cause is not None:
        root_cause.said = " ".join(record)
        return root_cause
    return with_rank or first_error


def _answer(found: _Answer | None) -> LogAnalysis:
    text = found.text.strip()[:200] if found else ""
    said = found.said if found else ""
    nature = next((n for n, p in _NATURES if p.search(said)), Nature.NONE)
    cause = cause_of(nature, said)
    decision = DEFAULT_POLICY.decide(cause)
    primary = [Issue(rank=found.rank, nature=nature, summary=text)] if found else []
    if found is None:
        explanation = "no error line in the log"
    else:
        who = f"rank {found.rank}" if found.rank is not None else "no rank"
        explanation = f"{found.how.replace('_', ' ')}: {who}: {text}"
    return LogAnalysis(
        analyzer=ANALYZER,
        decision=decision,
        decision_text=decision.text,
        explanation=explanation,
        primary=primary,
        attribution_text=attribution_text(primary, []),
        evidence=[Evidence(line=found.line, text=text)] if found else [],
        cause=cause,
        confidence=0.3,
        rule=f"naive_{found.how}" if found else "naive_no_error_line",
    )
