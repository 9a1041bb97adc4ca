"""Bad logs give a result, never an exception."""

from __future__ import annotations

from pathlib import Path

from pytest_faultloop.analyzers import analyze_log, filter_harness_lines, log_tail
from pytest_faultloop.models import Decision

TIMEOUT_LINE = b"[rank0]: RuntimeError: [../gloo/unbound_buffer.cc:81] Timed out waiting 10000ms for recv operation to complete\n"


def test_empty_log_is_no_logs(tmp_path: Path) -> None:
    log = tmp_path / "empty.log"
    log.write_bytes(b"")
    analysis = analyze_log(log)
    assert (analysis.decision, analysis.decision_text) == (Decision.UNKNOWN, "NO LOGS")
    assert "empty" in analysis.explanation


def test_only_harness_lines_is_no_logs(tmp_path: Path) -> None:
    log = tmp_path / "markers.log"
    log.write_text(
        "[rank1]: FAULT INJECTION: SIGKILL rank 1\nINFO pytest_faultloop.inject: armed\n\n"
    )
    assert analyze_log(log).decision_text == "NO LOGS"


def test_missing_file_is_no_logs_naming_the_file(tmp_path: Path) -> None:
    analysis = analyze_log(tmp_path / "absent.log")
    assert analysis.decision_text == "NO LOGS"
    assert "absent.log" in analysis.explanation


def test_binary_garbage_is_not_a_text_log(tmp_path: Path) -> None:
    log = tmp_path / "core"
    log.write_bytes(bytes(range(256)) * 400)
    analysis = analyze_log(log)
    assert analysis.decision_text == "NO LOGS"
    assert "binary data" in analysis.explanation


def test_huge_line_is_cut_and_the_rest_still_read(tmp_path: Path) -> None:
    log = tmp_path / "huge.log"
    with log.open("wb") as out:
        out.write(b"[rank1]: iter 1\n")
        chunk = b"x" * (1 << 20)
        for _ in range(48):  # one 48 MB line, larger than any read block
            out.write(chunk)
        out.write(b"\n" + TIMEOUT_LINE)
    analysis = analyze_log(log)
    assert analysis.decision is Decision.RESTART
    assert [i.rank for i in analysis.primary] == [1]
    assert analysis.evidence[0].line == 3


def test_undecodable_bytes_in_a_text_log(tmp_path: Path) -> None:
    log = tmp_path / "latin1.log"
    log.write_bytes(b"[rank1]: caf\xe9 iter 1\n" + TIMEOUT_LINE)
    assert analyze_log(log).primary[0].rank == 1


def test_filter_harness_lines() -> None:
    lines = [
        "[rank0]: iter 1",
        "[rank1]: ==== FAULT INJECTION: GPU_SLEEP ====",
        "2026-01-01 INFO pytest_faultloop.inject: armed",
        "[rank1]: megatron.training.debug_fault_injection: firing",
        "[rank0]: iter 2",
    ]
    assert list(filter_harness_lines(lines)) == ["[rank0]: iter 1", "[rank0]: iter 2"]


def test_filter_keeps_job_output_that_mentions_the_injector() -> None:
    """Log records of the injector's logger go; exceptions, frames and paths stay."""
    records = [
        "[rank1]: [2026-11-29 21:47:07.623] [CRITICAL] [pytest_faultloop.inject] armed",
        "[rank1]: WARNING:pytest_faultloop.inject:armed",
        "[rank1]: 2026-11-29 20:10:04,511 WARNING pytest_faultloop.inject: armed",
        "[rank1]: [2026-11-29 21:30:00] megatron.training.debug_fault_injection: firing",
    ]
    output = [
        "[rank1]: pytest_faultloop.inject.InjectedException: workload exception",
        "[rank1]: pytest_faultloop.inject.InjectedException",
        '[rank1]:   File "/work/pytest_faultloop/inject.py", line 143, in on_iteration_end',
        '[rank1]:   File "/megatron/training/debug_fault_injection.py", line 9, in fire',
        "[rank0]: FileNotFoundError: /exp/fault_injection/20261129_214036/ckpt/iter_5",
    ]
    assert list(filter_harness_lines(records + output)) == output


def test_log_tail_is_filtered_and_bounded(tmp_path: Path) -> None:
    log = tmp_path / "long.log"
    with log.open("w") as out:
        for i in range(5000):
            out.write(f"[rank0]: iter {i}\n")
            out.write("[rank1]: FAULT INJECTION marker\n")
    tail = log_tail(log, n=400).splitlines()
    assert len(tail) == 400
    assert tail[-1] == "[rank0]: iter 4999" and tail[0] == "[rank0]: iter 4600"
    assert not any("FAULT" in line for line in tail)
