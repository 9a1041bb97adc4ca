"""The heartbeat slots ranks share with their launcher: a reader never sees a half-written or
zeroed beat (struct.pack_into zero-fills before writing, which once made a launcher end a
healthy rank for an "age" of hours)."""

from __future__ import annotations

import os
import time

from pytest_faultloop.jobs.workload.heartbeat import HeartbeatBoard


def test_a_reader_never_sees_a_beat_go_back_or_vanish_while_the_rank_writes() -> None:
    board = HeartbeatBoard(2)
    heartbeat = board.slot(1)
    heartbeat.beat()
    writer = os.fork()
    if writer == 0:  # the rank: beats as fast as it can for a while
        end = time.monotonic() + 2.0
        while time.monotonic() < end:
            heartbeat.beat()
        os._exit(0)
    reads = anomalies = 0
    deadline = time.monotonic() + 600  # the writer beats for a fixed time, then exits
    while os.waitpid(writer, os.WNOHANG) == (0, 0):
        assert time.monotonic() < deadline, "the heartbeat writer never exited"
        last = heartbeat.last()
        reads += 1
        if not -1e-3 < time.monotonic() - last < 60.0:
            anomalies += 1
    assert reads > 1000
    assert anomalies == 0, f"{anomalies} of {reads} reads saw no beat or a beat from the past"


def test_a_slot_is_zero_until_its_rank_beats() -> None:
    board = HeartbeatBoard(2)
    first, second = board.slot(0), board.slot(1)
    assert not first.started and not second.started
    second.beat()
    assert second.started and not first.started and 0.0 <= second.age() < 5.0
