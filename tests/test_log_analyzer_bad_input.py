"""Bad logs give a result, never an exception."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from pytest_faultloop.analyzers import analyze_log, filter_harness_lines, log_tail
from pytest_faultloop.analyzers.log.nul_holes import without_holes
from pytest_faultloop.analyzers.log.reader import blocks_of_lines, read_chunks
from pytest_faultloop.models import Decision, LogAnalysis

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


TRAINING = b"[rank0]: iter 1\n[rank1]: iter 1\n"


def _answer(analysis: LogAnalysis) -> tuple[str, list[int | None], int | None]:
    """The decision, the primary ranks and the first evidence line's number."""
    first = analysis.evidence[0].line if analysis.evidence else None
    return analysis.decision_text, [i.rank for i in analysis.primary], first


@pytest.mark.parametrize("hole", [300, 20_000, (5 << 20) + 3], ids=["small", "in-sample", "long"])
def test_a_copytruncate_hole_is_read_past(tmp_path: Path, hole: int) -> None:
    """copytruncate truncates the log while the job keeps its offset: its next lines land
    after as many NUL bytes as the file had (longer than a read block too)."""
    plain, rotated = tmp_path / "plain.log", tmp_path / "rotated.log"
    plain.write_bytes(TRAINING + TIMEOUT_LINE)
    rotated.write_bytes(b"\0" * hole + TRAINING + TIMEOUT_LINE)
    assert (
        _answer(analyze_log(rotated))
        == _answer(analyze_log(plain))
        == ("RESTART IMMEDIATE", [1], 3)
    )


def test_a_crash_hole_inside_a_line_ends_that_line(tmp_path: Path) -> None:
    """A node crashed mid-write: the page it never flushed reads as NULs, cutting rank 0's
    line; the requeued job's lines follow. The cut line is not glued to the next one (it
    would lend it rank 0's prefix); the next line counts one more than an editor shows."""
    log = tmp_path / "crashed.log"
    log.write_bytes(TRAINING + b"[rank0]: iter 2 lo" + b"\0" * 3000 + TIMEOUT_LINE)
    assert _answer(analyze_log(log)) == ("RESTART IMMEDIATE", [1], 4)


def test_a_crash_hole_between_lines_keeps_the_line_numbers(tmp_path: Path) -> None:
    log = tmp_path / "crashed.log"
    log.write_bytes(TRAINING + b"\0" * 4096 + b"[rank0]: iter 2\n" + TIMEOUT_LINE)
    assert _answer(analyze_log(log)) == ("RESTART IMMEDIATE", [1], 4)


def test_holes_read_alike_whatever_the_read_size() -> None:
    """A hole across read chunks breaks a line as it does inside one chunk; a few NULs
    inside a line (a program's own) stay."""
    text = b"\0\0a\nbc" + b"\0" * 16 + b"de\n\0\0\nf\0\0\0\ng\0h\0\0"
    for size in range(1, len(text) + 1):
        chunks = without_holes(read_chunks(io.BytesIO(text), size))
        assert b"".join(blocks_of_lines(chunks)) == b"a\nbc\nde\n\nf\ng\0h\n", size


def test_binary_files_with_nul_bytes_stay_unread(tmp_path: Path) -> None:
    """NULs scattered among bytes that are no text: an executable, UTF-16 text (PowerShell's
    redirection writes it), a file of every byte value."""
    executable = Path(sys.executable).resolve().read_bytes()[: 256 << 10]
    utf16 = (TRAINING + TIMEOUT_LINE).decode().encode("utf-16-le") * 50
    for name, data in [("exe", executable), ("utf16", utf16), ("bytes", bytes(range(256)) * 400)]:
        log = tmp_path / name
        log.write_bytes(data)
        analysis = analyze_log(log)
        assert analysis.decision_text == "NO LOGS", name
        assert "not a text log: binary data" in analysis.explanation, name


def test_a_log_of_nul_bytes_alone_is_no_logs(tmp_path: Path) -> None:
    log = tmp_path / "rotated.log"
    log.write_bytes(b"\0" * 100_000)
    assert analyze_log(log).decision_text == "NO LOGS"


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
