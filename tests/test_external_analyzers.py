"""External analyzers: output parsers (from the documented formats) and the command adapters."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest

from pytest_faultloop.analyzers import AnalyzerError, run_fr_command, run_log_command
from pytest_faultloop.analyzers.external.formats import (
    parse_fr_output,
    parse_log_output,
)
from pytest_faultloop.models import Decision
from pytest_faultloop.models.faults import Nature

FIXTURES = Path(__file__).parent / "fixtures"
EXTERNAL = FIXTURES / "logs" / "external"
REPORTS = FIXTURES / "fr" / "reports"
PYTHON = sys.executable


def test_logsage_five_fields_stop_is_not_read_as_restart() -> None:
    analysis = parse_log_output((EXTERNAL / "logsage_stop.txt").read_text(), "cmd:logsage")
    assert analysis.decision is Decision.STOP
    assert analysis.decision_text == "STOP - DONT RESTART IMMEDIATE"
    assert [i.rank for i in analysis.primary] == [1]
    assert analysis.primary[0].nature is Nature.GPU_ERROR
    assert [i.rank for i in analysis.secondary] == [0, 2, 3]
    assert analysis.checkpoint_saved is False
    assert analysis.explanation.startswith("The application terminated")


def test_logsage_five_fields_restart() -> None:
    analysis = parse_log_output((EXTERNAL / "logsage_restart.txt").read_text(), "cmd:logsage")
    assert (analysis.decision, analysis.checkpoint_saved) == (Decision.RESTART, True)
    assert [i.rank for i in analysis.primary] == [1]
    assert analysis.primary[0].nature is Nature.HANG


def test_restart_agent_json() -> None:
    analysis = parse_log_output((EXTERNAL / "restart_agent.json").read_text(), "cmd:agent")
    assert (analysis.decision, analysis.decision_text) == (
        Decision.RESTART,
        "RESTART IMMEDIATE",
    )
    assert (analysis.primary[0].rank, analysis.primary[0].node) == (4, "gpu-a02")
    assert analysis.primary[0].nature is Nature.HANG
    assert [i.rank for i in analysis.secondary] == [0, None]
    assert analysis.raw_output is not None and "restart_agent_response.v1" in analysis.raw_output


def test_unrecognised_log_output_is_an_error() -> None:
    with pytest.raises(AnalyzerError, match="unrecognised log-analyzer output"):
        parse_log_output("hello\nworld\n", "cmd:x")


def test_nvrx_fr_table() -> None:
    analysis = parse_fr_output(
        (REPORTS / "nvrx_fr_table.txt").read_text(), "cmd:nvrx", dumps_found=8
    )
    assert analysis.suspects == [5]
    assert [(g.pg_id, g.desc, g.missing_ranks, g.culprit) for g in analysis.groups] == [
        ("0", "default_pg", [4, 5], False),
        ("3", "tp", [5], True),
    ]


def test_torchfrtrace_report() -> None:
    analysis = parse_fr_output(
        (REPORTS / "torchfrtrace_tp_hang.txt").read_text(),
        "cmd:torchfrtrace",
        dumps_found=4,
    )
    assert analysis.suspects == [1]
    assert {g.desc: g.culprit for g in analysis.groups} == {
        "default_pg": False,
        "tp": True,
    }
    assert analysis.dumps_read == 4


def test_torchfrtrace_silent_means_nothing_diverged() -> None:
    analysis = parse_fr_output("", "cmd:torchfrtrace", dumps_found=4)
    assert analysis.suspects == [] and analysis.groups == []


def test_log_command_round_trip_through_our_cli() -> None:
    template = f"cmd:{PYTHON} -m pytest_faultloop analyze-log {{log}} --json"
    analysis = run_log_command(
        template, FIXTURES / "logs" / "synthetic" / "gloo_sigkill_rank1.log", timeout=60
    )
    assert analysis.analyzer == template
    assert (analysis.decision, [i.rank for i in analysis.primary]) == (
        Decision.STOP,
        [1],
    )


def test_log_command_five_field_text_through_our_cli(tmp_path: Path) -> None:
    log = tmp_path / "log with spaces.log"
    shutil.copy(FIXTURES / "logs" / "synthetic" / "gloo_hang_rank1.log", log)
    analysis = run_log_command(f"{PYTHON} -m pytest_faultloop analyze-log {{log}}", log, timeout=60)
    assert (analysis.decision_text, [i.rank for i in analysis.primary]) == (
        "RESTART IMMEDIATE",
        [1],
    )


def test_fr_command_round_trip_through_our_cli() -> None:
    template = f"cmd:{PYTHON} -m pytest_faultloop analyze-fr {{fr_dir}}"
    analysis = run_fr_command(template, FIXTURES / "fr" / "nccl_tp_hang_rank5", timeout=60)
    assert analysis.suspects == [5] and analysis.dumps_read == 8


def installed_tool(name: str) -> str | None:
    """A console script next to this interpreter (the venv's bin/, also when the venv is not
    activated, as under ``.venv/bin/python -m pytest``), else on PATH."""
    beside = Path(sys.executable).parent / name
    return str(beside) if os.access(beside, os.X_OK) else shutil.which(name)


@pytest.mark.skipif(find_spec("torch") is None, reason="torch is not installed (the torch extra)")
def test_fr_command_with_real_torchfrtrace() -> None:
    tool = installed_tool("torchfrtrace")
    assert tool is not None, (
        f"torch is installed but torchfrtrace is neither beside {PYTHON} nor on PATH"
    )
    analysis = run_fr_command(
        f"cmd:{shlex.quote(tool)} -p _dump_ {{fr_dir}}",
        FIXTURES / "fr" / "gloo_tp_hang",
        timeout=120,
    )
    assert analysis.suspects == [1]


def test_command_failures_are_analyzer_errors(tmp_path: Path) -> None:
    with pytest.raises(AnalyzerError, match=r"has no \{log\} placeholder"):
        run_log_command("cmd:cat /dev/null", tmp_path, timeout=5)
    with pytest.raises(AnalyzerError, match="exited with status 3: boom"):
        run_log_command("cmd:echo boom >&2; exit 3 # {log}", tmp_path, timeout=5)
    with pytest.raises(AnalyzerError, match=r"timed out after 0\.5 s"):
        run_fr_command("cmd:sleep 5 # {fr_dir}", tmp_path, timeout=0.5)


def test_missing_inputs_are_no_logs_and_no_dumps_without_running_the_command(
    tmp_path: Path,
) -> None:
    """A stored log since removed, a replayed case without checkpoints/: NO LOGS and no dumps,
    as the built-in analyzers answer (our CLI, run, would exit 2 on a missing path)."""
    template = f"cmd:{PYTHON} -m pytest_faultloop analyze-log {{log}}"
    log = run_log_command(template, tmp_path / "absent.log", timeout=60)
    assert (log.analyzer, log.decision_text) == (template, "NO LOGS")
    template = f"cmd:{PYTHON} -m pytest_faultloop analyze-fr {{fr_dir}}"
    fr = run_fr_command(template, tmp_path / "checkpoints", timeout=60)
    assert fr.no_dumps and fr.suspects == [] and fr.analyzer == template
