"""What one raw line says whatever the scan's state: its peeled form and the tests the scanner
makes of every line it reads (rank prefixes, a file header, NCCL's INFO and WARN, Horovod's
word, torchrun's table and worker-group starts), worked out once per distinct line.

The scanner memoises these by the line's exact text (``line_memo``): a repeated line then
costs one lookup instead of a dozen searches and calls.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pytest_faultloop.analyzers.log import run_facts
from pytest_faultloop.analyzers.log import torchrun_reports as torchrun
from pytest_faultloop.analyzers.log.line_memo import by_line
from pytest_faultloop.analyzers.log.line_wrappers import PeeledLine, peel_line
from pytest_faultloop.analyzers.log.reader import decode_line
from pytest_faultloop.analyzers.log.signatures import Signature, match_line
from pytest_faultloop.analyzers.log.torch_messages import message_rank

CLASSIFY_CHARS = 4000
"""Long lines (progress bars, one-line stall reports) are read this far; evidence keeps less."""
RANK_PREFIX = re.compile(rb"\[rank(\d+)\]:")
_FILE_HEADER = re.compile(r"==> (?P<path>.+) <==")
"""coreutils tail and head, given several files, print one before each file's lines
(tail.c and head.c write_header: ``==> %s <==``, a blank line before all but the first)."""
_PATH_RANK = re.compile(r"(?<![A-Za-z])(?<!(?i:local)[_-])(?i:rank)[_-]?(\d+)(?!\d)")
"""A rank a path names explicitly: ``rank2.log``, ``rank_2/``, DeepSpeed's per-rank log
``{prefix}_rank{dist_rank}.log`` (launcher/launch.py, --enable_each_rank_log); a
``local_rank`` is no global rank."""
Found = tuple[Signature, re.Match[str]]
"""A catalogue entry and its match on a line."""


@dataclass(slots=True)  # not frozen: a frozen one's __init__ costs 2 us, as much as a search
class LineReading:
    """A line's state-free reading (shared by the repeats of the line: never changed)."""

    line: PeeledLine
    prefix_ranks: tuple[int, ...]
    """The ranks of its ``[rankN]:`` prefixes."""
    header: bool
    """A ``tail``/``head`` file header."""
    header_rank: int | None
    """The rank a header's path names (None: it names none, or the line is no header)."""
    marked: bool
    """Its wrappers or a header give the scanner ranks, labels or a file to note."""
    message_rank: int | None
    """The rank its message names as its own (``torch_messages.message_rank``), where its
    wrappers mark none."""
    nccl_info: bool
    """One of NCCL's own ``host:pid:tid [dev] NCCL INFO`` lines."""
    nccl_warn: bool
    """One of NCCL's own WARN lines."""
    horovod: bool
    """It names Horovod (whose stall lists the scanner follows)."""
    table_start: bool
    """torchrun's failure table opens (``Failures:``)."""
    cycle_start: bool
    """torchrun starts a worker group or an agent."""
    table_rank: bool
    """A failure table's ``rank : N (local_rank: M)`` field (one pasted without its heading
    opens the table there)."""
    stated: run_facts.Stated | None
    """The run facts it states (``run_facts.stated``)."""
    found: Found | None
    """The first catalogue entry it matches, with the match (``signatures.match_line``)."""
    layout: bool
    """It may name a launch's layout (``--node_rank``, ``--nproc_per_node``)."""
    quiet: bool
    """It states no run fact, matches no catalogue entry, is not error-level and names no
    launch layout: read outside any open report or traceback, it only counts as a line read."""


def read(raw: bytes) -> LineReading:
    """The reading of one raw line (without its newline); ``read_line`` memoises it."""
    line = peel_line(decode_line(raw, CLASSIFY_CHARS))
    content = line.content
    header = _FILE_HEADER.fullmatch(content)
    named = _PATH_RANK.findall(header["path"]) if header is not None else []
    nccl = line.pid is not None
    prefix_ranks = tuple(sorted({int(r) for r in RANK_PREFIX.findall(raw)}))
    field = torchrun.table_field(content)
    stated = run_facts.stated(content)
    found = match_line(content)
    layout = "-rank" in content or "_rank" in content
    quiet = not (line.error_level or layout or stated is not None or found is not None)
    return LineReading(
        line,
        prefix_ranks,
        header is not None,
        int(named[-1]) if named else None,
        bool(prefix_ranks or header or line.labels or line.local_rank is not None),
        message_rank(content) if line.rank is None else None,
        nccl and "NCCL INFO" in content,
        nccl and "NCCL WARN" in content,
        "orovod" in line.text,
        content.startswith(torchrun.TABLE_START),
        torchrun.CYCLE_START.search(content) is not None,
        field is not None and field[0] == "rank" and torchrun.table_rank(field[1]) is not None,
        stated,
        found,
        layout,
        quiet,
    )


read_line = by_line(read)
"""``read``, once per distinct line."""
