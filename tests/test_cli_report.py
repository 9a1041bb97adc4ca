"""``python -m pytest_faultloop report SESSION_DIR`` re-renders the report from result.json."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.report_samples import make_result

from pytest_faultloop.__main__ import main
from pytest_faultloop.models.faults import FaultType
from pytest_faultloop.store.session_dir import TSV_HEADER, TSV_NAME, write_atomic


def test_report_rerenders_from_stored_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / TSV_NAME).write_text(TSV_HEADER)
    result = make_result(FaultType.GPU_SLEEP, 1)
    directory = tmp_path / result.experiment.entry.dirname
    directory.mkdir()
    write_atomic(directory / "result.json", result.model_dump_json())
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "result.json").write_text("{not json")
    assert main(["report", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == str(tmp_path / "experiments_report.md")
    assert "broken/result.json" in captured.err
    report = (tmp_path / "experiments_report.md").read_text()
    assert report.startswith("# Fault Injection Experiment Report")
    assert f"| 1 | {result.experiment.entry.fault.value} |" in report


def test_report_of_a_non_session_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(tmp_path)]) == 2
    assert "not a session directory (no experiments.tsv); pass" in capsys.readouterr().err
