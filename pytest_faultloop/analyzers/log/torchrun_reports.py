"""torchrun / torch.distributed.elastic structure the scanner reads field by field: its failure
table, restart cycles and the launch command's layout (its one-line messages are entries of
the signature catalogue)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pytest_faultloop.analyzers.log.line_memo import by_line

_TABLE_FIELD = re.compile(
    r"^\s*(?P<key>time|host|rank|exitcode|error_file|traceback)\s*: ?(?P<value>.*)$"
)
_TABLE_RANK = re.compile(r"(?P<rank>\d+) \(local_rank: (?P<local>\d+)\)")
_TABLE_EXIT = re.compile(r"(?P<code>-?\d+) \(pid: (?P<pid>\d+)\)")
_TABLE_SIGNAL = re.compile(r"Signal (?P<num>\d+) \((?P<name>SIG\w+)\) received by PID (?P<pid>\d+)")
ROOT_CAUSE = "Root Cause (first observed failure)"
TABLE_START = "Failures:"
CYCLE_START = re.compile(r"(?:^|\] )Starting worker group|Starting elastic_operator")
AGENT_START = "Starting elastic_operator"
"""A torchrun process starts (launcher/api.py launch_agent): a requeue, a rerun, or another
node's agent where per-node logs were concatenated; its rendezvous result says which."""
_NODE_RANK = re.compile(r"--node[_-]rank[= ](?P<node>\d+)")
_NPROC = re.compile(r"--nproc[_-]per[_-]node[= ](?P<n>\d+)")


def table_field(content: str) -> tuple[str, str] | None:
    """A ``key : value`` field of torchrun's failure table."""
    match = _TABLE_FIELD.match(content)
    return (match["key"], match["value"].strip()) if match else None


def table_rank(value: str) -> tuple[int, int] | None:
    """``rank : 5 (local_rank: 1)`` -> (5, 1): the global rank and the local one."""
    match = _TABLE_RANK.match(value)
    return (int(match["rank"]), int(match["local"])) if match else None


def table_exit(value: str) -> tuple[int, int] | None:
    """``exitcode : -9 (pid: 123)`` -> (code, pid)."""
    match = _TABLE_EXIT.match(value)
    return (int(match["code"]), int(match["pid"])) if match else None


def table_signal(value: str) -> str | None:
    match = _TABLE_SIGNAL.search(value)
    return match["name"] if match else None


@by_line
def node_layout(content: str) -> tuple[int | None, int | None]:
    """``--node_rank N`` and ``--nproc_per_node M`` from a launch command line."""
    node, nproc = _NODE_RANK.search(content), _NPROC.search(content)
    return (int(node["node"]) if node else None, int(nproc["n"]) if nproc else None)


@dataclass(slots=True)
class AgentPlace:
    """Where a torchrun agent's rendezvous put it (``_rendezvous``'s ``Rendezvous complete for
    workers. Result:`` lines, printed before ``Starting worker group``): its node's group rank
    and the global ranks of its workers."""

    group_rank: int | None = None
    ranks: frozenset[int] = frozenset()

    def same_node(self, other: AgentPlace) -> bool:
        """The two hold the same node's place: its group rank, or any of its workers' ranks."""
        same_group = self.group_rank is not None and self.group_rank == other.group_rank
        return same_group or bool(self.ranks & other.ranks)
