"""Paired run-over-run comparison (report/paired.py) and ``python -m pytest_faultloop compare``."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.report_samples import make_result
from support.verdicts import labels
from test_history import cell, record

from pytest_faultloop.__main__ import main
from pytest_faultloop.models.faults import FaultType
from pytest_faultloop.report.history import Cell
from pytest_faultloop.report.paired import paired_records
from pytest_faultloop.scoring.pass_rule import PassRule
from pytest_faultloop.store.session_dir import write_atomic


def test_paired_counts_per_dimension_and_overall() -> None:
    before = record(
        "s1", "a",
        GPU_SLEEP_1=cell(),
        GPU_SLEEP_0=cell(rank_primary="false", fr_rank_correct="node"),
        GPU_ERROR_1=cell(restart_correct="false", rank_primary="false", rank_any="false",
                         fault_described="partial"),
        SIGKILL_1=Cell(broken="run_invalid"),
        SEGFAULT_1=cell(rank_primary="N/A", fr_rank_correct="N/A"),
    )  # fmt: skip
    after = record(
        "s2", "b",
        GPU_SLEEP_1=cell(rank_primary="partial"),
        GPU_SLEEP_0=cell(),
        GPU_ERROR_1=cell(rank_primary="false", fault_described="partial"),
        SIGKILL_1=cell(),
        SEGFAULT_1=cell(rank_primary="false", fr_rank_correct="no_dumps"),
    )  # fmt: skip
    result = paired_records(before, after)
    assert result.paired == 4  # SIGKILL was not scored before
    counts = {d.dimension: (d.improved, d.regressed, d.same) for d in result.dimensions}
    assert counts == {
        "restart_correct": (1, 0, 3),
        "rank_primary": (1, 1, 1),  # SEGFAULT's rank_primary was N/A: left out
        "rank_any": (1, 0, 3),
        "fault_described": (0, 0, 4),
        "fr_rank_correct": (1, 0, 2),
    }
    # whole cells: GPU_SLEEP_1 and SEGFAULT regressed, GPU_SLEEP_0 improved, GPU_ERROR failed both
    overall = result.overall
    assert (overall.improved, overall.regressed, overall.same) == (1, 2, 1)
    assert overall.p_value == 1.0 and not overall.distinguishable
    lines = result.describe()
    assert lines[0] == "compared s1 -> s2: 4 cell(s) scored in both"
    assert lines[2] == (
        "rank_primary: 1 improved, 1 regressed, 1 same; McNemar p=1: not distinguishable from chance"
    )
    assert "  regressed: GPU_SLEEP:1:5:2 rank_primary: true -> partial" in lines
    lenient = paired_records(before, after, PassRule(accept_partial=True))
    assert lenient.dimensions[1].regressed == 0


def test_five_improvements_alone_are_not_distinguishable_from_chance() -> None:
    fail = cell(rank_primary="false")
    before = record("s1", "a", **{f"GPU_SLEEP_{r}": fail for r in range(5)})
    before.cells.update({f"SIGKILL:{r}:5:2": cell() for r in range(29)})
    after = record("s2", "a", **{f"GPU_SLEEP_{r}": cell() for r in range(5)})
    after.cells.update({f"SIGKILL:{r}:5:2": cell() for r in range(29)})
    # hand: 2 * C(5, 0) / 2^5 = 0.0625
    assert paired_records(before, after).dimensions[1].describe() == (
        "rank_primary: 5 improved, 0 regressed, 29 same; McNemar p=0.0625: "
        "not distinguishable from chance"
    )
    before.cells["GPU_SLEEP:5:5:2"] = fail
    after.cells["GPU_SLEEP:5:5:2"] = cell()
    six = paired_records(before, after).dimensions[1]  # 2 / 2^6 = 0.03125
    assert six.p_value == 0.03125 and six.verdict() == "distinguishable from chance"


def _session(path: Path, scores: dict[int, dict[str, str]]) -> Path:
    for rank, values in scores.items():
        result = make_result(FaultType.GPU_SLEEP, rank, scores=values)
        directory = path / result.experiment.entry.dirname
        directory.mkdir(parents=True)
        write_atomic(directory / "result.json", result.model_dump_json())
    return path


def test_compare_cli_prints_the_paired_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fail = labels(rank_primary="false")
    base = tmp_path / "base"
    sessions = base / "fault_injection"
    before = _session(sessions / "20261101_120000", dict.fromkeys(range(7), fail))
    _session(sessions / "20261102_120000", dict.fromkeys(range(7), labels()))
    code = main(["compare", str(before), "20261102_120000", "--base-dir", str(base)])
    assert code == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (f"compared {before} -> {sessions / '20261102_120000'}: 7 cell(s) paired")
    assert out[1].startswith("| dimension | improved | regressed | same | McNemar p |")
    # hand: 2 * C(7, 0) / 2^7 = 0.015625
    assert "| rank_primary | 7 | 0 | 0 | 0.01562 | distinguishable from chance |" in out
    overall = out.index(
        "overall: 7 improved, 0 regressed, 0 same; McNemar p=0.01562: distinguishable from chance"
    )
    # then each session's restart decisions (both decided all 7 as expected)
    assert out[overall + 1] == f"restart decisions of {before}:"
    assert out[-1].startswith("Decided as expected: 7/7 (100%, 65–100). False STOP")


def test_compare_cli_errors_name_the_path_and_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = _session(tmp_path / "s", {1: labels()})
    assert main(["compare", str(tmp_path / "missing"), str(session)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {tmp_path / 'missing'}: no such session directory; pass ")
    (tmp_path / "empty").mkdir()
    assert main(["compare", str(session), str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"error: {tmp_path / 'empty'}: no readable */result.json in this session; "
        "run it first or pick another session"
    )
