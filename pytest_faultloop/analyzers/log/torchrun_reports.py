"""torchrun / torch.distributed.elastic: its failure table, the signals it sends and receives,
its workers' failures, restart cycles, and the local -> global rank layout."""

from __future__ import annotations

import re

_TABLE_FIELD = re.compile(
    r"^\s*(?P<key>time|host|rank|exitcode|error_file|traceback)\s*: ?(?P<value>.*)$"
)
_TABLE_RANK = re.compile(r"(?P<rank>\d+) \(local_rank: (?P<local>\d+)\)")
_TABLE_EXIT = re.compile(r"(?P<code>-?\d+) \(pid: (?P<pid>\d+)\)")
_TABLE_SIGNAL = re.compile(r"Signal (?P<num>\d+) \((?P<name>SIG\w+)\) received by PID (?P<pid>\d+)")
ROOT_CAUSE = "Root Cause (first observed failure)"
TABLE_START = "Failures:"
_CLOSING_SIGNAL = re.compile(r"Sending process (?P<pid>\d+) closing signal (?P<sig>SIG\w+)")
_DEATH_SIGNAL = re.compile(r"Received (?:Signals\.)?(?P<sig>SIG\w+) death signal")
_AGENT_FAILED = re.compile(
    r"failed \(exitcode: (?P<code>-?\d+)\) local_rank: (?P<local>\d+) \(pid: (?P<pid>\d+)\)"
)
CYCLE_START = re.compile(r"(?:^|\] )Starting worker group|Starting elastic_operator")
_RANK_LIST = re.compile(r"(?<![\w])(?P<which>local|global)_ranks=\[(?P<ranks>[\d, ]*)\]")
_NODE_RANK = re.compile(r"--node[_-]rank[= ](?P<node>\d+)")
_NPROC = re.compile(r"--nproc[_-]per[_-]node[= ](?P<n>\d+)")


def table_field(content: str) -> tuple[str, str] | None:
    """A ``key : value`` field of torchrun's failure table."""
    match = _TABLE_FIELD.match(content)
    return (match["key"], match["value"].strip()) if match else None


def table_rank(value: str) -> int | None:
    match = _TABLE_RANK.match(value)
    return int(match["rank"]) if match else None


def table_exit(value: str) -> tuple[int, int] | None:
    """``exitcode : -9 (pid: 123)`` -> (code, pid)."""
    match = _TABLE_EXIT.match(value)
    return (int(match["code"]), int(match["pid"])) if match else None


def table_signal(value: str) -> str | None:
    match = _TABLE_SIGNAL.search(value)
    return match["name"] if match else None


def closing_signal(content: str) -> tuple[int, str] | None:
    """torchrun stopping a worker after another one failed: (pid, signal)."""
    match = _CLOSING_SIGNAL.search(content)
    return (int(match["pid"]), match["sig"]) if match else None


def death_signal(content: str) -> str | None:
    """torchrun itself received a signal and shuts its workers down."""
    match = _DEATH_SIGNAL.search(content)
    return match["sig"] if match else None


def agent_failure(content: str) -> tuple[int, int, int] | None:
    """``failed (exitcode: -9) local_rank: 3 (pid: 123)`` -> (code, local rank, pid)."""
    match = _AGENT_FAILED.search(content)
    return (int(match["code"]), int(match["local"]), int(match["pid"])) if match else None


def rank_list(content: str) -> tuple[str, list[int]] | None:
    """torchrun's rendezvous result fields ``local_ranks=[0, 1]`` / ``global_ranks=[4, 5]``."""
    match = _RANK_LIST.search(content)
    if match is None:
        return None
    return match["which"], [int(r) for r in re.findall(r"\d+", match["ranks"])]


def node_layout(content: str) -> tuple[int | None, int | None]:
    """``--node_rank N`` and ``--nproc_per_node M`` from a launch command line."""
    node, nproc = _NODE_RANK.search(content), _NPROC.search(content)
    return (int(node["node"]) if node else None, int(nproc["n"]) if nproc else None)
