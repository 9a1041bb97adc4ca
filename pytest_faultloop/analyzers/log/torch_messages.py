"""The rank a PyTorch/NCCL message names as its own, and error-level lines no entry of the
signature catalogue (``signatures.toml``) reads."""

from __future__ import annotations

import re

from pytest_faultloop.analyzers.log.line_facts import Kind, LineFact

_RANK_WORD = re.compile(r"\b(?:rank|RANK|Rank)[ =:]*(\d+)\b(?! ?\(?local)")
_MESSAGE_RANK = re.compile(
    r"\[(?:PG [^\]]*?)?Rank (\d+)\]|NCCL communicator was aborted on rank (\d+)"
)


def message_rank(content: str) -> int | None:
    """The rank a PyTorch/NCCL message names as its own: ``[Rank 3]``, ``[PG ID 0 ... Rank 3]``,
    NCCLUtils.hpp's ``NCCL communicator was aborted on rank 3``. In a sub-group it is the rank
    within that group: a launcher's prefix (``[rank5]:``), read first, gives the global one."""
    match = _MESSAGE_RANK.search(content)
    return int(match.group(1) or match.group(2)) if match else None


def error_line(content: str, error_level: bool) -> LineFact | None:
    """A line its logger marked error-level (glog ``E1130``, ``[E ...]``, ``ERROR:``: the
    level its wrappers carried), with the rank it names."""
    if not error_level:
        return None
    rank = _RANK_WORD.search(content)
    return LineFact(Kind.ERROR_LINE, content.strip()[:200], named=(int(rank[1]),) if rank else ())
