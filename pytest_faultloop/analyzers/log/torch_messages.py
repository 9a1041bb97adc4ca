"""The rank a PyTorch/NCCL message names as its own, and error-level lines no entry of the
signature catalogue (``catalogue/``) reads."""

from __future__ import annotations

import re

from pytest_faultloop.analyzers.log.line_facts import Kind, LineFact
from pytest_faultloop.analyzers.log.line_memo import by_line

_RANK_WORD = re.compile(r"\b(?:rank|RANK|Rank)[ =:]*(\d+)\b(?! ?\(?local)")
_MESSAGE_RANK = re.compile(
    r"\[(?:PG [^\]]*?)?Rank (\d+)\]|NCCL communicator was aborted on rank (\d+)"
    r"|\bRank (\d+): found NaN in local|\bRank (\d+), node [^,\s]+, device \d+, iteration \d+:"
)


@by_line
def message_rank(content: str) -> int | None:
    """The rank a PyTorch/NCCL message names as its own: ``[Rank 3]``, ``[PG ID 0 ... Rank 3]``,
    NCCLUtils.hpp's ``NCCL communicator was aborted on rank 3``; Megatron's NaN checks
    (``Rank 13: found NaN in local grad norm`` in param_and_grad_buffer.py, the rerun state
    machine's ``Rank 5, node n1, device 5, iteration 120: Unexpected result nan``: the global
    rank). In a sub-group it is the rank within that group: a launcher's prefix
    (``[rank5]:``), read first, gives the global one."""
    match = _MESSAGE_RANK.search(content)
    rank = next((group for group in match.groups() if group), None) if match else None
    return int(rank) if rank is not None else None


def error_line(content: str, error_level: bool) -> LineFact | None:
    """A line its logger marked error-level (glog ``E1130``, ``[E ...]``, ``ERROR:``: the
    level its wrappers carried), with the rank it names."""
    if not error_level:
        return None
    rank = _RANK_WORD.search(content)
    return LineFact(Kind.ERROR_LINE, content.strip()[:200], named=(int(rank[1]),) if rank else ())
