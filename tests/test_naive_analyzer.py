"""The naive baseline: torchrun's Root Cause rank, else the first rank on an error line, read
from raw lines as one regex would."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pytest_faultloop.analyzers import analyze_log_naive
from pytest_faultloop.models import Decision
from pytest_faultloop.models.faults import Nature

TABLE = """\
[rank1]: [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600044 milliseconds before timing out.
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
Root Cause (first observed failure):
[0]:
  time      : 2024-11-30_10:00:02
  host      : node1
  rank      : 3 (local_rank: 3)
  exitcode  : -9 (pid: 204)
  traceback : Signal 9 (SIGKILL) received by PID 204
============================================================
"""


def test_the_root_cause_rank_comes_first(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_text(TABLE)
    analysis = analyze_log_naive(log)
    assert analysis.analyzer == "naive" and analysis.rule == "naive_root_cause"
    assert analysis.primary[0].rank == 3
    assert analysis.evidence[0].line == 8


def test_else_the_first_rank_on_an_error_line_with_its_keywords_nature(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_text(
        TABLE.split("torch.distributed", maxsplit=1)[0] + "[rank0]: RuntimeError: boom\n"
    )
    analysis = analyze_log_naive(log)
    assert analysis.rule == "naive_error_line"
    assert (analysis.primary[0].rank, analysis.primary[0].nature) == (1, Nature.HANG)
    assert analysis.decision is Decision.RESTART


def test_an_error_line_without_a_rank_and_a_log_without_errors(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_text("step 1\nSegmentation fault (core dumped)\n")
    assert analyze_log_naive(log).primary[0].rank is None
    assert analyze_log_naive(log).primary[0].nature is Nature.CRASH
    log.write_text("step 1\nstep 2\n")
    clean = analyze_log_naive(log)
    assert not clean.primary and clean.decision is Decision.CONTINUE


def test_an_unreadable_log_is_no_logs_not_an_error(tmp_path: Path) -> None:
    analysis = analyze_log_naive(tmp_path / "missing.log")
    assert analysis.decision is Decision.UNKNOWN and "cannot read" in analysis.explanation


def test_the_cli_runs_the_baseline(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_text(TABLE)
    out = subprocess.run(
        [sys.executable, "-m", "pytest_faultloop", "analyze-log", str(log), "--analyzer", "naive"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "rank 3" in out
