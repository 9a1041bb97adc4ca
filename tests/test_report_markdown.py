"""``experiments_report.md``: the seed's header, exact rows, the whole file, and loading results."""

import re
from pathlib import Path

from support.report_samples import make_result
from support.verdicts import labels

from pytest_faultloop.models import Decision
from pytest_faultloop.models.faults import FaultType
from pytest_faultloop.models.layout import RESULT
from pytest_faultloop.report.markdown import (
    render_report,
    render_row,
    report_header,
    write_session_report,
)
from pytest_faultloop.scoring.pass_rule import PassRule
from pytest_faultloop.store.results import load_results

SEED_HEADER = (
    "| # | FAULT_TYPE | NODES | RANK | ITER | JOB_ID | STATE | run_valid | restart_correct | "
    "rank_primary | rank_any | fault_described | fr_rank_correct | judge_notes |"
)


def test_header_is_the_seeds() -> None:
    title, blank, header, separator = report_header().splitlines()
    assert title == "# Fault Injection Experiment Report"
    assert blank == ""
    assert header == SEED_HEADER
    assert separator == "|" + "|".join(["---"] * 14) + "|"
    assert report_header().endswith("\n")


def test_scored_row() -> None:
    result = make_result(
        FaultType.GPU_SLEEP, 0, scores=labels(rank_primary="false", fr_rank_correct="node"),
        notes="rank-0 identified only in secondary issues", job_id="1851",
    )  # fmt: skip
    assert render_row(2, result) == (
        "| 2 | GPU_SLEEP | 2 | 0 | 5 | 1851 | FAILED | true | true | false | true | true | node "
        "| rank-0 identified only in secondary issues |"
    )


def test_invalid_run_row() -> None:
    result = make_result(FaultType.SIGKILL, 1, 4, broken="run_invalid", reason="no fault marker")
    assert render_row(7, result) == (
        "| 7 | SIGKILL | 4 | 1 | 5 | 1850 | TIMEOUT | false | N/A | N/A | N/A | N/A | N/A "
        "| run_invalid: no fault marker |"
    )


def test_judge_failure_row() -> None:
    result = make_result(
        FaultType.SEGFAULT, 1, broken="judge_failed", reason="HTTP 500 after 3 tries"
    )
    assert render_row(3, result) == (
        "| 3 | SEGFAULT | 2 | 1 | 5 | 1850 | FAILED | true | N/A | N/A | N/A | N/A | N/A "
        "| judge_failed: HTTP 500 after 3 tries |"
    )


def test_row_without_a_job() -> None:
    result = make_result(FaultType.GPU_ERROR, 1, broken="infrastructure", reason="sbatch refused")
    result = result.model_copy(update={"job": None})
    assert render_row(1, result).startswith("| 1 | GPU_ERROR | 2 | 1 | 5 | - | - | false | N/A |")


def test_pipes_and_newlines_in_notes_are_escaped() -> None:
    result = make_result(FaultType.GPU_SLEEP, 1, notes="decision | RESTART\nrank 1 named\r\nok")
    row = render_row(1, result)
    assert row.endswith("| decision \\| RESTART<br>rank 1 named<br>ok |")
    assert len(re.findall(r"(?<!\\)\|", row)) == 15  # 14 columns, unescaped pipes only


def test_whole_report_orders_rows_and_appends_the_aggregate() -> None:
    results = [
        make_result(FaultType.GPU_SLEEP, 1),
        make_result(
            FaultType.GPU_ERROR,
            1,
            decided=Decision.RESTART,
            scores=labels(
                restart_correct="false",
                rank_primary="false",
                rank_any="false",
                fault_described="partial",
            ),
        ),
    ]
    text = render_report(results, PassRule(accept_partial=True))
    lines = text.splitlines()
    assert lines[:4] == report_header().splitlines()
    assert lines[4].startswith("| 1 | GPU_SLEEP |")
    assert lines[5].startswith("| 2 | GPU_ERROR |")
    assert lines[6:8] == ["", "## Aggregate"]
    assert "`partial` counts as a pass" in text
    assert (
        "| GPU_ERROR | 1/1 | 0/1 (0%, 0–79) | 0/1 (0%, 0–79) | 0/1 (0%, 0–79) "
        "| 1/1 (100%, 21–100) | 1/1 (100%, 21–100) |" in text
    )


def _store(session: Path, result_json: str, name: str) -> None:
    (session / name).mkdir(parents=True)
    (session / name / RESULT).write_text(result_json)


def test_load_results_orders_by_priority_then_key_and_reports_unreadable(tmp_path: Path) -> None:
    late = make_result(FaultType.SIGKILL, 1, priority=5)
    early_b = make_result(FaultType.GPU_SLEEP, 1, priority=0)
    early_a = make_result(FaultType.GPU_ERROR, 1, priority=0)
    for result in (late, early_b, early_a):
        _store(tmp_path, result.model_dump_json(), result.experiment.entry.dirname)
    _store(tmp_path, "{not json", "n2_SEGFAULT_r1_i5")
    _store(tmp_path, '{"experiment": 3}', "n2_OS_ABORT_r1_i5")
    unreadable: list[str] = []
    loaded = load_results(tmp_path, unreadable=unreadable)
    assert [r.experiment.key for r in loaded] == [
        "GPU_ERROR:1:5:2",
        "GPU_SLEEP:1:5:2",
        "SIGKILL:1:5:2",
    ]
    assert loaded[0] == early_a
    assert len(unreadable) == 2
    assert all("not a valid result" in line for line in unreadable)
    assert any("n2_SEGFAULT_r1_i5" in line for line in unreadable)
    assert load_results(tmp_path) == loaded


def test_write_session_report_rerenders_from_stored_results(tmp_path: Path) -> None:
    result = make_result(FaultType.GPU_SLEEP, 1)
    _store(tmp_path, result.model_dump_json(), result.experiment.entry.dirname)
    _store(tmp_path, "", "n2_SEGFAULT_r1_i5")
    path, unreadable = write_session_report(tmp_path)
    assert path == tmp_path / "experiments_report.md"
    text = path.read_text()
    assert text == render_report([result], unreadable=unreadable)
    assert "- Unreadable results: 1" in text
