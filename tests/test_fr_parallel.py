"""The FR analyzer at scale: the same answer for any number of decoding processes, one shared
record per group membership, and summaries whose size does not follow the dumps' length."""

from __future__ import annotations

import json
import pickle
import threading
from pathlib import Path

import pytest
from pydantic import ValidationError

from pytest_faultloop.__main__ import main
from pytest_faultloop.analyzers import analyze_fr
from pytest_faultloop.analyzers.fr.dump_set import FILES_PER_JOB, default_jobs, load_dumps
from pytest_faultloop.analyzers.fr.interning import Interner
from pytest_faultloop.inputs.settings import BY_FIELD, Settings

TP = 4


def _entry(record: int, group: tuple[str, str], seq: int, done: bool) -> dict[str, object]:
    return {
        "record_id": record,
        "pg_id": 0 if group[0] == "0" else 1,
        "process_group": group,
        "collective_seq_id": seq,
        "profiling_name": "nccl:all_reduce" if group[0] == "0" else "nccl:all_gather",
        "time_created_ns": 1_000 + record,
        "input_dtypes": ["Float"],
        "state": "completed" if done else "started",
        "retired": done,
        "is_p2p": False,
        "frames": [{"name": "train_step", "filename": "train.py", "line": record}],
    }


def _dumps(to: Path, ranks: int, steps: int, hung: int) -> Path:
    """NCCL-shaped dumps: each step a TP all_gather then a default all_reduce; ``hung`` never
    enters its last all_gather, its TP peers wait in it."""
    to.mkdir()
    for rank in range(ranks):
        tp = (str(1 + rank // TP), "tp")
        entries: list[dict[str, object]] = []
        for step in range(1, steps + 1):
            last = step == steps
            if last and rank == hung:
                break
            waiting = last and rank // TP == hung // TP
            entries.append(_entry(len(entries), tp, step, not waiting))
            if not waiting:
                entries.append(_entry(len(entries), ("0", "default_pg"), step, not last))
        first = rank - rank % TP
        config = {
            "0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(ranks)))},
            tp[0]: {"name": tp[0], "desc": "tp", "ranks": str(list(range(first, first + TP)))},
        }
        dump = {"version": "2.10", "pg_config": config, "pg_status": {}, "entries": entries}
        (to / f"_dump_{rank}").write_bytes(pickle.dumps(dump, protocol=2))
    return to


@pytest.fixture(scope="module")
def dump_set(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """24 ranks, and the bad inputs a real set holds: a truncated dump, a duplicate rank, a
    file without a rank."""
    path = _dumps(tmp_path_factory.mktemp("fr") / "set", 24, 6, hung=9)
    (path / "_dump_17").write_bytes((path / "_dump_17").read_bytes()[:300])
    (path / "_dump_node-a_3").write_bytes((path / "_dump_3").read_bytes())
    (path / "_dump_notes").write_bytes(b"")
    return path


def test_any_number_of_jobs_gives_the_same_answer(dump_set: Path) -> None:
    answers = [analyze_fr(dump_set, jobs=jobs).model_dump() for jobs in (1, 2, 3)]
    assert answers[0] == answers[1] == answers[2]
    assert answers[0]["suspects"] == [9]
    unreadable = answers[0]["unreadable"]
    assert any(f"{dump_set / '_dump_17'}: truncated or corrupt pickle" in u for u in unreadable)
    assert f"{dump_set / '_dump_notes'}: no rank number at the end of the file name" in unreadable


def test_workers_start_afresh_beside_other_threads(dump_set: Path) -> None:
    """A process with threads (the plugin's runner) is not forked: a fork could inherit a lock
    another thread holds."""
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        beside = analyze_fr(dump_set, jobs=2)
    finally:
        stop.set()
        other.join()
    assert beside == analyze_fr(dump_set, jobs=1)


def test_a_membership_is_one_record_however_many_ranks_report_it(dump_set: Path) -> None:
    for jobs in (1, 2):
        dumps = load_dumps(dump_set, jobs=jobs).dumps
        records = {id(m) for d in dumps.values() for m in d.config.groups}
        configs = {id(d.config) for d in dumps.values()}
        assert len(records) == 1 + 24 // TP  # the default group and each TP group, once
        assert len(configs) == 24 // TP  # the ranks of one TP group share one config


def test_the_interner_keeps_one_copy_of_repeated_group_lists() -> None:
    interner = Interner()
    configs = []
    for _ in range(100):  # fresh strings each time, as each rank's unpickled dump has them
        ranks = str(list(range(4096)))
        configs.append(interner.config({"0": {"desc": "default_pg", "ranks": ranks}}))
    assert interner.memberships == 1
    assert all(c is configs[0] for c in configs)
    assert configs[0].groups[0].ranks == tuple(range(4096))


def test_a_summary_does_not_grow_with_the_entries_of_its_dump(tmp_path: Path) -> None:
    """Nothing of a dump's entries (frames, sizes) stays: 40 times the entries, the same
    summary but for its numbers (all below 256 or all above, so pickled alike)."""
    short = load_dumps(_dumps(tmp_path / "short", 8, 5, hung=1), jobs=1)
    long = load_dumps(_dumps(tmp_path / "long", 8, 200, hung=1), jobs=1)
    for rank in range(8):
        a, b = short.dumps[rank], long.dumps[rank]
        b.path = a.path
        assert len(pickle.dumps(a)) == len(pickle.dumps(b))


def test_the_default_is_one_process_for_a_small_set() -> None:
    assert default_jobs(8) == 1
    assert default_jobs(FILES_PER_JOB - 1) == 1
    assert default_jobs(10**6) >= 1


def test_a_job_count_below_one_is_refused(dump_set: Path) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        load_dumps(dump_set, jobs=0)
    with pytest.raises(ValidationError):
        Settings(fr_jobs=0)
    row = BY_FIELD["fr_jobs"]
    assert (row.env, row.option, row.group) == (
        "FAULTLOOP_FR_JOBS",
        "--faultloop-fr-jobs",
        "analyzers",
    )


def test_the_cli_takes_jobs_from_the_option_or_the_setting(
    dump_set: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    outputs = []
    for args in (["--jobs", "1"], ["-j", "2"]):
        assert main(["analyze-fr", str(dump_set), "--json", *args]) == 0
        outputs.append(json.loads(capsys.readouterr().out))
    monkeypatch.setenv("FAULTLOOP_FR_JOBS", "2")
    assert main(["analyze-fr", str(dump_set), "--json"]) == 0
    outputs.append(json.loads(capsys.readouterr().out))
    assert outputs[0] == outputs[1] == outputs[2]


def test_a_bad_job_count_is_one_clear_error(
    dump_set: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["analyze-fr", str(dump_set), "--jobs", "0"])
    assert exit_.value.code == 2
    assert "argument -j/--jobs: 0 is not a number of processes (at least 1)" in (
        capsys.readouterr().err
    )
    monkeypatch.setenv("FAULTLOOP_FR_JOBS", "many")
    assert main(["analyze-fr", str(dump_set)]) == 2
    assert capsys.readouterr().err == (
        "error: FAULTLOOP_FR_JOBS='many' (from environment variable FAULTLOOP_FR_JOBS): "
        "'many' is not a whole number\n"
    )
