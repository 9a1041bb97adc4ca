"""The faults a restart replays (EARLY_EXIT, COLLECTIVE_MISMATCH, HOST_OOM) as the analyzers
read them: real runs, frozen (tests/fixtures/frozen/incidents: this package's gloo job under
both launchers on 2 and 4 emulated nodes, and framework workloads), and torchrun's failure table
on its own."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from pytest_faultloop.analyzers import analyze_fr, analyze_log
from pytest_faultloop.models import Decision
from pytest_faultloop.models.faults import Nature

FROZEN = Path(__file__).parent / "fixtures" / "frozen" / "incidents"
CULPRIT = {"n2": 6, "n4": 10}


def _cases(fault: str) -> list[Path]:
    cases = sorted(p for p in FROZEN.iterdir() if f"_{fault}_" in p.name)
    assert len(cases) == 4, "two node counts under two launchers"
    return cases


def _injected_rank(case: Path) -> int:
    return int(tomllib.loads((case / "case.toml").read_text())["injected"]["rank"])


def _log(case: Path) -> Path:
    (log,) = (case / "logs").glob("*.main_workload.log")
    return log


@pytest.mark.parametrize("case", _cases("EARLY_EXIT"), ids=lambda p: p.name[:40])
def test_a_rank_that_left_early_is_named_and_stopped(case: Path) -> None:
    """The rank exited 0 while its peers went on: silent, its peers lost it, and its own
    dump is missing where its tensor-parallel group stalled. Its node's launcher reported
    the node-mates after it, so it is no lost node (a restart): its end was its own."""
    culprit = CULPRIT[case.name[:2]]
    analysis = analyze_log(_log(case))
    assert [i.rank for i in analysis.primary] == [culprit]
    assert analysis.decision is Decision.STOP and "node lost" not in analysis.explanation
    assert analyze_fr(case / "checkpoints").suspects == [culprit]


@pytest.mark.parametrize(
    "case", [c for c in _cases("EARLY_EXIT") if "torchrun" in c.name], ids=lambda p: p.name[:12]
)
def test_under_torchrun_the_early_exit_is_a_program_bug(case: Path) -> None:
    """torchrun's table lists every worker whose exit code is not 0, the ones its agent
    stopped included: the one worker it leaves out of a node's table had exited 0. Its
    node-mates that the agent stopped were quiet too; they are not named beside it."""
    analysis = analyze_log(_log(case))
    assert [i.nature for i in analysis.primary] == [Nature.EXCEPTION]
    assert analysis.decision is Decision.STOP
    assert "exited with code 0 before its peers failed" in analysis.primary[0].summary


@pytest.mark.parametrize("case", _cases("COLLECTIVE_MISMATCH"), ids=lambda p: p.name[:40])
def test_the_rank_whose_collective_differs_is_named_by_the_flight_recorder(case: Path) -> None:
    """The rank's extra one-element all_reduce met its peers' next default-group collective:
    on gloo every rank then times out, and only the dumps tell the culprit (its record at
    that sequence number differs from everyone's)."""
    culprit = CULPRIT[case.name[:2]]
    analysis = analyze_fr(case / "checkpoints")
    assert analysis.suspects == [culprit]
    assert [r.evidence for r in analysis.reasons] == ["mismatch"]


TABLE = """\
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
{failures}
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-07_22:20:26
  host      : node{node}
  rank      : {root} (local_rank: {root_local})
  exitcode  : 1 (pid: 4{root})
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
"""
RECORD = """\
[{index}]:
  time      : 2026-12-07_22:20:26
  host      : node{node}
  rank      : {rank} (local_rank: {local})
  exitcode  : -15 (pid: 4{rank})
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 4{rank}"""


def _table(node: int, workers: int, root: int, listed: list[int]) -> str:
    """An agent stopping its workers ``listed`` (their pids ``4<rank>``), then its table."""
    base = node * workers
    stops = "".join(
        f"W1207 22:20:26.162000 2462{node} torch/distributed/elastic/multiprocessing/"
        f"api.py:1028] Sending process 4{base + local} closing signal SIGTERM\n"
        for local in listed
    )
    failures = "\n".join(
        RECORD.format(index=i + 1, node=node, rank=base + local, local=local)
        for i, local in enumerate(listed)
    )
    return stops + TABLE.format(failures=failures, node=node, root=base + root, root_local=root)


def _peer_lost(rank: int) -> str:
    return (
        f"[rank{rank}]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] "
        "Connection closed by peer [10.0.0.2]:3714\n"
    )


def test_a_worker_left_out_of_a_table_that_lists_its_node_mates_exited_zero(
    tmp_path: Path,
) -> None:
    """torchrun's tables as its agents print them: node 1 lists local ranks 0, 1, 3 (rank 5
    the root cause, 4 and 7 stopped by the agent); local rank 2, global 6, is not there."""
    log = tmp_path / "job.log"
    log.write_text(
        _peer_lost(5) + _peer_lost(1) + _table(1, 4, 1, [0, 3]) + _table(0, 4, 1, [0, 2, 3])
    )
    analysis = analyze_log(log)
    assert [i.rank for i in analysis.primary] == [6]
    assert analysis.decision is Decision.STOP


def test_on_nodes_of_two_a_worker_left_out_says_nothing(tmp_path: Path) -> None:
    """One worker listed of two: the other may have ended well before the last one failed."""
    log = tmp_path / "job.log"
    log.write_text(_peer_lost(1) + _table(0, 2, 1, []))
    analysis = analyze_log(log)
    assert all("exited with code 0" not in i.summary for i in analysis.primary)


@pytest.mark.parametrize("case", sorted(FROZEN.glob("*_HOST_OOM_*")), ids=lambda p: p.name[:40])
def test_a_rank_out_of_host_memory_is_named_and_stopped(case: Path) -> None:
    """torch's CPU allocator says it on the rank that ran out (a restart runs out again)."""
    analysis = analyze_log(_log(case))
    assert [(i.rank, i.nature) for i in analysis.primary] == [
        (_injected_rank(case), Nature.EXCEPTION)
    ]
    assert analysis.decision is Decision.STOP
    assert "host out of memory" in analysis.primary[0].summary
