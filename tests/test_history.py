"""history.jsonl: records, paired comparison between runs and the seed's stop condition."""

import json
from datetime import UTC, datetime
from pathlib import Path

from support.report_samples import make_result
from support.verdicts import ALL_FALSE, labels

from pytest_faultloop.engine.fingerprint import fingerprint
from pytest_faultloop.models.faults import FaultType
from pytest_faultloop.report.history import (
    Cell,
    HistoryRecord,
    append_history,
    find_record,
    history_path,
    previous_record,
    read_history,
    record_from_results,
    records_before,
    stop_condition,
)
from pytest_faultloop.report.paired import paired_records
from pytest_faultloop.scoring.pass_rule import PassRule

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def cell(**changed: str) -> Cell:
    """A scored cell: every dimension passing but the ``changed`` ones."""
    return Cell(values=labels(**changed))


def record(session: str, fp: str, **cells: Cell) -> HistoryRecord:
    """Cells are keyword arguments: ``GPU_SLEEP_1=cell(...)`` is cell ``GPU_SLEEP:1:5:2``."""
    keyed = {
        f"{name.rsplit('_', 1)[0]}:{name.rsplit('_', 1)[1]}:5:2": c for name, c in cells.items()
    }
    return HistoryRecord(session=session, time=T0, fingerprint=fp, cells=keyed)


def test_fingerprint_is_stable_short_and_order_insensitive() -> None:
    parts = {"log_analyzer": "nvrx_logsage@abc", "model": "nemotron", "policy": "sha:1"}
    same = fingerprint(dict(reversed(list(parts.items()))))
    assert fingerprint(parts) == same and len(same) == 16
    assert fingerprint({**parts, "model": "qwen"}) != same


def test_record_from_results_keeps_values_and_broken_kinds() -> None:
    results = [
        make_result(
            FaultType.GPU_SLEEP,
            0,
            scores=labels(rank_primary="false", fault_described="partial", fr_rank_correct="node"),
        ),
        make_result(FaultType.SIGKILL, 1, broken="run_invalid", reason="no marker"),
        make_result(FaultType.SEGFAULT, 1, broken="judge_failed", reason="HTTP 500"),
    ]
    rec = record_from_results("/base/fault_injection/20261101_120000", results, time=T0)
    scored = cell(
        rank_primary="false", fault_described="partial", fr_rank_correct="node"
    ).model_copy(update={"fingerprint": "fp-a"})
    assert rec.cells["GPU_SLEEP:0:5:2"] == scored
    assert rec.cells["SIGKILL:1:5:2"] == Cell(broken="run_invalid", fingerprint="fp-a")
    assert rec.cells["SEGFAULT:1:5:2"] == Cell(broken="judge_failed", fingerprint="fp-a")
    assert rec.fingerprint == "fp-a"
    assert record_from_results("s", results[:1]).time.tzinfo is not None


def test_a_record_of_cells_scored_by_two_versions_says_both_and_each_cell_its_own() -> None:
    """Not the first fingerprint in sorted order for all (how a half-done re-analysis
    fooled compare and the stop condition)."""
    results = [
        make_result(FaultType.GPU_SLEEP, 0).model_copy(update={"fingerprint": "fp-b"}),
        make_result(FaultType.SIGKILL, 1).model_copy(update={"fingerprint": "fp-a"}),
    ]
    rec = record_from_results("s", results, time=T0)
    assert rec.fingerprint == "fp-a+fp-b"
    assert rec.cells["GPU_SLEEP:0:5:2"].fingerprint == "fp-b"
    assert rec.cells["SIGKILL:1:5:2"].fingerprint == "fp-a"


def test_cells_count_only_under_the_version_that_scored_them() -> None:
    """A session half re-scored by version b, then continued (every result kept): the cells b
    scored are no iteration of a, and a's kept cells do not revive a."""
    a_pass, b_pass = (cell().model_copy(update={"fingerprint": fp}) for fp in ("fp-a", "fp-b"))
    first = record("s", "fp-a", GPU_SLEEP_1=a_pass, SIGKILL_1=a_pass)
    mixed = record("s", "fp-a+fp-b", GPU_SLEEP_1=b_pass, SIGKILL_1=a_pass)

    condition = stop_condition([first, mixed])

    assert not condition.met
    assert condition.fingerprints == ("fp-a", "fp-b")
    assert condition.missing == ("SIGKILL:1:5:2 not run under fp-b",)


def test_append_and_read_back(tmp_path: Path) -> None:
    path = history_path(tmp_path)
    assert path == tmp_path / "fault_injection" / "history.jsonl"
    assert read_history(path) == []
    first = record("s1", "fp-a", GPU_SLEEP_1=cell(), SIGKILL_1=Cell(broken="run_invalid"))
    second = record("s2", "fp-b", GPU_SLEEP_1=cell(restart_correct="false"))
    append_history(path, first)
    append_history(path, second)
    assert len(path.read_text().splitlines()) == 2
    assert read_history(path) == [first, second]


def test_unreadable_lines_are_skipped_and_reported(tmp_path: Path) -> None:
    path = history_path(tmp_path)
    good = record("s1", "fp-a", GPU_SLEEP_1=cell())
    append_history(path, good)
    with path.open("a") as out:
        out.write('{"session": "truncated\n\n')
    append_history(path, good)
    problems: list[str] = []
    assert read_history(path, unreadable=problems) == [good, good]
    assert len(problems) == 1 and problems[0].startswith(f"{path}:2: ")


def test_records_from_before_per_stage_fingerprints_still_load(tmp_path: Path) -> None:
    path = history_path(tmp_path)
    path.parent.mkdir(parents=True)
    values = labels()
    old = {
        "session": "/b/fault_injection/20261101_120000",
        "time": "2026-11-01T12:00:00Z",
        "fingerprint": "946c26a386f4e5ce",
        "cells": {"GPU_SLEEP:1:5:2": {"values": values, "broken": None}},
    }
    path.write_text(json.dumps(old) + "\n")
    append_history(path, record("s2", fingerprint({"log_analyzer": "x"}), GPU_SLEEP_1=cell()))
    problems: list[str] = []
    loaded = read_history(path, unreadable=problems)
    assert not problems and loaded[0].fingerprint == "946c26a386f4e5ce"
    assert stop_condition(loaded).met


def test_find_and_previous_record() -> None:
    history = [
        record("/b/fault_injection/20261101_120000", "a"),
        record("/b/fault_injection/20261102_120000", "b"),
        record("/b/fault_injection/20261103_120000", "c"),
    ]
    assert find_record(history, "20261102_120000") is history[1]
    assert find_record(history, "/b/fault_injection/20261101_120000") is history[0]
    assert find_record(history, "nope") is None
    assert previous_record(history, history[2]) is history[1]
    assert (
        previous_record(history, record("/b/fault_injection/20261104_120000", "d")) is (history[2])
    )
    assert previous_record(history[:1], history[0]) is None
    # a re-analysis records the session it re-scored: "last" is still the record before it
    rescored = record(history[2].session, "e")
    assert previous_record([*history, rescored], rescored) is history[2]
    assert records_before([*history, rescored], rescored) == history


def test_paired_comparison_lists_regressions_and_improvements() -> None:
    previous = record(
        "s1", "fp-a",
        GPU_SLEEP_1=cell(),
        GPU_SLEEP_0=cell(rank_primary="false", fr_rank_correct="node"),
        GPU_ERROR_1=cell(restart_correct="false", rank_primary="false", rank_any="false",
                         fault_described="partial"),
        SIGKILL_1=Cell(broken="run_invalid"),
        SEGFAULT_1=cell(),
    )  # fmt: skip
    current = record(
        "s2", "fp-b",
        GPU_SLEEP_1=cell(rank_primary="partial"),
        GPU_SLEEP_0=cell(),
        GPU_ERROR_1=cell(rank_primary="false", fault_described="partial"),
        SIGKILL_1=cell(**ALL_FALSE),
        LOCK_GIL_1=cell(),
    )  # fmt: skip
    result = paired_records(previous, current)
    assert (result.before, result.after) == ("s1", "s2")
    assert result.paired == 3  # SIGKILL unscored before, SEGFAULT and LOCK_GIL in one run only
    changes = [(kind, c.cell, c.dimension, c.before, c.after) for kind, c in result.changes]
    assert changes == [
        ("regressed", "GPU_SLEEP:1:5:2", "rank_primary", "true", "partial"),
        ("improved", "GPU_SLEEP:0:5:2", "rank_primary", "false", "true"),
        ("improved", "GPU_SLEEP:0:5:2", "fr_rank_correct", "node", "rank"),
        ("improved", "GPU_ERROR:1:5:2", "restart_correct", "false", "true"),
        ("improved", "GPU_ERROR:1:5:2", "rank_any", "false", "true"),
    ]
    net = {d.dimension: d.improved - d.regressed for d in result.dimensions}
    assert net == {
        "restart_correct": 1,
        "rank_primary": 0,
        "rank_any": 1,
        "fault_described": 0,
        "fr_rank_correct": 1,
    }
    assert "  regressed: GPU_SLEEP:1:5:2 rank_primary: true -> partial" in result.describe()


def test_paired_comparison_follows_the_pass_rule() -> None:
    previous = record("s1", "a", GPU_SLEEP_1=cell())
    current = record("s2", "b", GPU_SLEEP_1=cell(rank_primary="partial", fr_rank_correct="node"))
    assert sum(d.regressed for d in paired_records(previous, current).dimensions) == 2
    lenient = PassRule(accept_partial=True, fr_scope="node")
    assert paired_records(previous, current, lenient).changes == ()


def test_stop_condition_needs_two_different_fingerprints() -> None:
    same = [
        record("s1", "fp-a", GPU_SLEEP_1=cell()),
        record("s2", "fp-a", GPU_SLEEP_1=cell()),
    ]
    verdict = stop_condition(same)
    assert not verdict.met
    assert verdict.describe() == (
        "stop condition not met: only one analyzer version scored so far (fp-a); run again "
        "after changing an analyzer"
    )
    assert not stop_condition([]).met
    assert stop_condition([]).describe() == (
        "stop condition not met: no run has scored an experiment yet"
    )
    different = [*same, record("s3", "fp-b", GPU_SLEEP_1=cell())]
    verdict = stop_condition(different)
    assert verdict.met and verdict.fingerprints == ("fp-a", "fp-b")
    assert verdict.describe() == (
        "stop condition met: every cell passed every dimension under two analyzer versions in "
        "a row (fp-a, then fp-b)"
    )


def test_a_run_that_scored_nothing_is_no_analyzer_version() -> None:
    """Every experiment broken (a job script missing, an analyzer crashing): the run's
    fingerprint is no iteration, before or between scored ones."""
    broken = record("s0", "fp-broken", GPU_SLEEP_1=Cell(broken="infrastructure"))
    assert stop_condition([broken]).describe() == (
        "stop condition not met: no run has scored an experiment yet"
    )
    history = [
        record("s1", "fp-a", GPU_SLEEP_1=cell()),
        broken,
        record("s2", "fp-a", GPU_SLEEP_1=cell()),
    ]
    assert stop_condition(history).fingerprints == ("fp-a",)
    verdict = stop_condition([*history, broken, record("s3", "fp-b", GPU_SLEEP_1=cell())])
    assert verdict.met and verdict.fingerprints == ("fp-a", "fp-b")


def test_stop_condition_names_what_is_missing() -> None:
    history = [
        record("s1", "fp-a", GPU_SLEEP_1=cell(), SIGKILL_1=cell(fault_described="partial")),
        record("s2", "fp-b", GPU_SLEEP_1=cell(), SEGFAULT_1=Cell(broken="judge_failed")),
    ]
    verdict = stop_condition(history)
    assert not verdict.met
    assert verdict.missing == (
        "SEGFAULT:1:5:2 not run under fp-a",
        "SIGKILL:1:5:2 fails fault_described=partial under fp-a",
        "SEGFAULT:1:5:2 not scored (judge_failed) under fp-b",
        "SIGKILL:1:5:2 not run under fp-b",
    )
    assert "SIGKILL:1:5:2 fails fault_described=partial under fp-a" not in (
        stop_condition(history, PassRule(accept_partial=True)).missing
    )
    assert stop_condition(history).describe(limit=2) == (
        "stop condition not met under analyzer versions fp-a and fp-b: "
        "SEGFAULT:1:5:2 not run under fp-a; SIGKILL:1:5:2 fails fault_described=partial under "
        "fp-a; and 2 more"
    )


def test_targeted_reruns_complete_an_iteration_and_only_the_last_two_count() -> None:
    history = [
        record("s0", "fp-old", GPU_SLEEP_0=cell(rank_primary="false")),
        record("s1", "fp-a", GPU_SLEEP_0=cell(rank_primary="false"), GPU_SLEEP_1=cell()),
        record("s2", "fp-b", GPU_SLEEP_0=cell(), GPU_SLEEP_1=cell()),
        record("s3", "fp-c", GPU_SLEEP_0=cell(rank_primary="false"), GPU_SLEEP_1=cell()),
        record("s4", "fp-c", GPU_SLEEP_0=cell()),  # targeted re-run of the failing cell
        record(
            "s5", "fp-c", GPU_SLEEP_0=Cell(broken="run_invalid")
        ),  # an invalid re-run erases nothing
    ]
    verdict = stop_condition(history)
    assert verdict.met, verdict.describe()
    assert verdict.fingerprints == ("fp-b", "fp-c")
    reverted = [*history, record("s6", "fp-b", GPU_SLEEP_0=cell())]
    verdict = stop_condition(reverted)  # fp-b again is a new iteration after fp-c
    assert verdict.fingerprints == ("fp-c", "fp-b")
    assert verdict.missing == ("GPU_SLEEP:1:5:2 not run under fp-b",)


def test_the_summary_shows_the_stop_condition_when_met_or_asked(tmp_path: Path) -> None:
    from pytest_faultloop.report.history import StopCondition
    from pytest_faultloop.report.summary import RunSummary

    summary = RunSummary(PassRule(), tmp_path, None)
    summary.session = tmp_path
    summary.stop = StopCondition(False, ("fp-a",), ("no run has scored an experiment yet",))
    assert not [line for line in summary.lines() if "stop condition" in line]
    assert summary.lines(verbose=True)[-1] == (
        "faultloop: stop condition not met: no run has scored an experiment yet"
    )
    summary.stop = StopCondition(True, ("fp-a", "fp-b"), ())
    assert summary.lines()[-1].startswith("faultloop: stop condition met: ")


def test_the_stop_condition_of_a_run_reads_only_its_own_cells() -> None:
    """Runs of another pool in the same base directory are no iteration of this one and leave
    no 'not run' gaps in it."""
    mine = {"GPU_SLEEP_1": cell(), "SIGKILL_1": cell()}
    other = {"OS_ABORT_2": cell(rank_primary="false")}
    history = [
        record("s1", "fp-a", **mine),
        record("corpus", "fp-b", **other),
        record("s2", "fp-b", **mine),
        record("corpus", "fp-c", **other),
    ]
    keys = history[2].cells
    verdict = stop_condition(history, cells=keys)
    assert verdict.met and verdict.fingerprints == ("fp-a", "fp-b")
    assert not stop_condition(history).met  # the whole history mixes both
