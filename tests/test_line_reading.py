"""line_reading.read_line: what a raw line says whatever the scan's state."""

from __future__ import annotations

import pytest

from pytest_faultloop.analyzers.log import run_facts
from pytest_faultloop.analyzers.log.line_reading import read_line
from pytest_faultloop.analyzers.log.signatures import match_line


def test_rank_prefixes_and_the_message_rank() -> None:
    reading = read_line(b"[rank3]: [Rank 5] Watchdog caught collective operation timeout")
    assert reading.prefix_ranks == (3,)
    assert reading.line.rank == 3
    assert reading.message_rank is None  # the prefix's rank is read first
    bare = read_line(b"[Rank 5] Watchdog caught collective operation timeout")
    assert bare.prefix_ranks == ()
    assert bare.message_rank == 5


def test_a_file_header_and_the_rank_its_path_names() -> None:
    assert read_line(b"==> logs/rank2.log <==").header_rank == 2
    unnamed = read_line(b"==> logs/local_rank2.log <==")
    assert unnamed.header
    assert unnamed.header_rank is None
    assert not read_line(b"==> not a header").header


def test_nccl_lines_are_nccls_own_by_their_prefix() -> None:
    info = read_line(b"node0:41003:41103 [3] NCCL INFO Connected all rings")
    assert info.nccl_info
    assert not info.nccl_warn
    warn = read_line(b"node0:41003:41103 [3] NCCL WARN NET/IB : Got completion with error")
    assert warn.nccl_warn
    assert not read_line(b"quoting NCCL INFO without its prefix").nccl_info


def test_torchrun_starts_and_horovod() -> None:
    assert read_line(b"Failures:").table_start
    start = b"INFO:torch.distributed.elastic.agent.server.api:[default] Starting worker group"
    assert read_line(start).cycle_start
    assert read_line(b"[1,0]<stderr>:Horovod has been shut down").horovod
    assert not read_line(b"[1,0]<stderr>:allreduce stalled").horovod


def test_a_repeated_line_shares_its_reading() -> None:
    assert read_line(b"[rank1]: step 5") is read_line(b"[rank1]: step 5")


@pytest.mark.parametrize(
    "raw",
    [
        b"node0:41003:41103 [3] NCCL INFO Connected all rings",
        b"[rank0]: [2026-11-29 10:00:00,000] [INFO] [metrics.py:88] step 26 | ERROR budget: 99%",
        b"  host      : node1",
    ],
)
def test_quiet_lines(raw: bytes) -> None:
    assert read_line(raw).quiet


@pytest.mark.parametrize(
    "raw",
    [
        b"[rank0]: [2026-11-29 10:00:00,000] [ERROR] [metrics.py:88] step 26",  # error level
        b"E1130 10:00:00.123 123 ProcessGroupNCCL.cpp:12] step 26",
        b"RuntimeError: CUDA error: an illegal memory access was encountered",  # an entry
        b"node0:1:2 [0] NCCL INFO comm 0x5 rank 3 nranks 8 cudaDev 3 busId 3000 - Init COMPLETE",
        b"python -m torch.distributed.run --node_rank 1 --nproc_per_node 8 train.py",
        b"Traceback (most recent call last):",
    ],
)
def test_lines_that_are_not_quiet(raw: bytes) -> None:
    assert not read_line(raw).quiet


def test_a_headless_tables_rank_field() -> None:
    assert read_line(b"  rank      : 5 (local_rank: 5)").table_rank
    assert not read_line(b"  host      : node1").table_rank


def test_the_reading_holds_the_lines_facts_and_match() -> None:
    reading = read_line(
        b"[rank1]: RuntimeError: CUDA error: an illegal memory access was encountered"
    )
    assert reading.found == match_line(reading.line.content)
    assert reading.found is not None
    assert reading.stated is None
    nccl = read_line(b"n0:1:2 [0] NCCL INFO comm 0x5 rank 3 nranks 8 cudaDev 3 - Init COMPLETE")
    assert nccl.stated == run_facts.stated(nccl.line.content)
    assert nccl.stated is not None


@pytest.mark.parametrize(
    ("raw", "marked"),
    [
        (b"[rank3]: step 26", True),
        (b"[default1]: step 26", True),  # torchrun --tee's local rank
        (b"5: step 26", True),  # srun's label
        (b"==> logs/train.log <==", True),
        (b"node0:41003:41103 [3] NCCL INFO Connected all rings", False),
        (b"  exitcode  : 1 (pid: 42010)", False),
    ],
)
def test_lines_that_give_the_scanner_ranks_to_note(raw: bytes, marked: bool) -> None:
    assert read_line(raw).marked is marked
