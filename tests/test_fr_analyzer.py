"""The built-in FR analyzer on real gloo dumps (generate_gloo_dumps.py) and NCCL-format dumps."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest

from pytest_faultloop.analyzers import analyze_fr

FR = Path(__file__).parent / "fixtures" / "fr"


@pytest.mark.parametrize(
    "scenario",
    [
        "gloo_tp_hang",
        "gloo_tp_hang_raw_config",
        "gloo_tp_hang_json",
        "nccl_tp_hang_rank5",
    ],
)
def test_rank_that_never_entered_its_tp_all_gather_is_the_culprit(
    scenario: str,
) -> None:
    """Its TP group holds the culprit; the default group only looks short (collateral)."""
    analysis = analyze_fr(FR / scenario)
    culprit = 5 if scenario.startswith("nccl") else 1
    assert analysis.suspects == [culprit]
    by_desc = {g.desc: g for g in analysis.groups}
    assert by_desc["tp"].culprit and by_desc["tp"].missing_ranks == [culprit]
    assert not by_desc["default_pg"].culprit
    assert (
        culprit in by_desc["default_pg"].missing_ranks
        and len(by_desc["default_pg"].missing_ranks) == 2
    )
    assert by_desc["tp"].op.endswith("all_gather") and by_desc["tp"].size == "2"


def test_rank_without_a_dump_is_evidence() -> None:
    analysis = analyze_fr(FR / "gloo_rank_killed")
    assert analysis.dumps_read == 3 and analysis.unreadable == []
    assert analysis.suspects == [3]
    assert [(g.desc, g.missing_ranks) for g in analysis.groups] == [("default_pg", [3])]


def test_ring_buffer_wraparound() -> None:
    analysis = analyze_fr(FR / "gloo_wraparound")
    assert analysis.suspects == [2]
    assert analysis.groups[0].missing_ranks == [2]


def test_nccl_collective_never_started_on_the_gpu() -> None:
    analysis = analyze_fr(FR / "nccl_gpu_sleep_rank2")
    assert analysis.suspects == [2]


def test_healthy_dumps_have_no_suspects() -> None:
    analysis = analyze_fr(FR / "gloo_healthy")
    assert (analysis.suspects, analysis.groups, analysis.dumps_read) == ([], [], 4)


def test_dump_prefix_instead_of_directory() -> None:
    assert analyze_fr(FR / "gloo_tp_hang" / "_dump_").suspects == [1]


def test_pattern_selects_the_files(tmp_path: Path) -> None:
    for source in (FR / "gloo_tp_hang").iterdir():
        (tmp_path / f"trace_rank{source.name.rsplit('_', 1)[1]}.pkl").write_bytes(
            source.read_bytes()
        )
    assert analyze_fr(tmp_path).no_dumps
    assert analyze_fr(tmp_path, pattern="trace_rank*").suspects == [1]


def test_table_has_the_nvrx_columns() -> None:
    table = analyze_fr(FR / "gloo_tp_hang").table.splitlines()
    assert table[0].split(" | ")[0] == "PGID" and table[0].endswith("Missing Ranks")
    assert table[2].split("|")[-1].strip() == "1"


@pytest.mark.parametrize(
    ("scenario", "culprit"),
    [("gloo_tp_hang_timed_out", 1), ("gloo_killed_timed_out", 3)],
)
def test_gloo_retires_failed_collectives_yet_the_culprit_is_found(
    scenario: str, culprit: int
) -> None:
    """After gloo gives up, every entry is retired: the ranks stuck at the TP front are
    recognised by where they stopped (their newest collective), not by a pending entry."""
    analysis = analyze_fr(FR / scenario)
    assert analysis.suspects == [culprit]
    by_desc = {g.desc: g for g in analysis.groups}
    assert by_desc["tp"].culprit and by_desc["tp"].missing_ranks == [culprit]
    assert not by_desc["default_pg"].culprit


def test_vanished_rank_is_not_missing_from_a_collective_it_finished() -> None:
    """Rank 3 finished its TP all_gather with rank 2 and died before the default all_reduce."""
    groups = analyze_fr(FR / "gloo_rank_killed").groups
    assert [(g.desc, g.missing_ranks) for g in groups] == [("default_pg", [3])]


def _write_dumps(
    directory: Path,
    history: dict[int, list[tuple[str, int]]],
    tp: list[list[int]],
    pending: frozenset[int] = frozenset(),
    nccl: bool = False,
) -> Path:
    """gloo-style dumps (documented format, version 2.10): collectives retired, except the
    last one of the ``pending`` ranks. ``nccl``: NCCL-style instead, each entry ``completed``
    or (a pending rank's last) ``started``, with ``pg_status`` counters per group.

    ``history``: per rank, (group, seq) in the order entered; group "0" is the default group,
    ``"tp"`` the rank's TP group (named by its index in ``tp``).
    """
    world = sorted(r for g in tp for r in g)
    directory.mkdir()
    for rank, collectives in history.items():
        tp_index = next(i for i, g in enumerate(tp) if rank in g)
        tp_name = str(tp_index + 1)
        config = {
            "0": {"name": "0", "desc": "default_pg", "ranks": str(world)},
            tp_name: {"name": tp_name, "desc": "tp", "ranks": str(tp[tp_index])},
        }
        entries = []
        for record_id, (group, seq) in enumerate(collectives):
            name, desc = ("0", "default_pg") if group == "0" else (tp_name, "tp")
            entries.append(
                {
                    "record_id": record_id,
                    "pg_id": 0 if name == "0" else 1,
                    "process_group": (name, desc),
                    "collective_seq_id": seq,
                    "p2p_seq_id": 0,
                    "op_id": seq,
                    "profiling_name": "gloo:all_reduce",
                    "time_created_ns": 1_000 * record_id,
                    "input_sizes": [[8]],
                    "input_dtypes": ["Float"],
                    "output_sizes": [[8]],
                    "output_dtypes": ["Float"],
                    "state": _state(nccl, rank in pending and record_id == len(collectives) - 1),
                    "retired": not (rank in pending and record_id == len(collectives) - 1),
                    "timeout_ms": 10_000,
                    "is_p2p": False,
                }
            )
        dump = {
            "version": "2.10",
            "pg_config": config,
            "pg_status": _status(entries) if nccl else {},
            "comm_lib_version": "2.21.5" if nccl else "",
            "entries": entries,
        }
        (directory / f"_dump_{rank}").write_bytes(pickle.dumps(dump, protocol=2))
    return directory


def _state(nccl: bool, pending: bool) -> str:
    if not nccl:
        return "scheduled"  # gloo: every entry, whatever became of it
    return "started" if pending else "completed"


def _status(entries: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """NCCL's ``pg_status``: per ``pg_id``, the last collective enqueued and completed."""
    status: dict[str, dict[str, int]] = {}
    for entry in entries:
        counters = status.setdefault(
            str(entry["pg_id"]),
            {"last_enqueued_collective": -1, "last_started_collective": -1},
        )
        seq = int(str(entry["collective_seq_id"]))
        counters["last_enqueued_collective"] = seq
        counters["last_started_collective"] = seq
        if entry["state"] == "completed":
            counters["last_completed_collective"] = seq
    for counters in status.values():
        counters.setdefault("last_completed_collective", -1)
    return status


def _steps(last_step: int, *extra: tuple[str, int]) -> list[tuple[str, int]]:
    """Collectives of steps 1..last_step (a TP all_reduce, then a default one), then ``extra``."""
    done = [c for step in range(1, last_step + 1) for c in (("tp", step), ("0", step))]
    return done + list(extra)


def test_rank_stopped_in_a_collective_its_peers_passed_is_the_culprit(
    tmp_path: Path,
) -> None:
    """Rank 1 is interrupted inside default all_reduce #3 after contributing to it: the others
    finished it and moved on to step 4, so rank 1 waits for nobody; it is not collateral."""
    history = {r: _steps(3, ("tp", 4)) for r in range(4)}
    history[1] = _steps(2, ("tp", 3), ("0", 3))
    history[2] = history[3] = _steps(4)
    dumps = _write_dumps(tmp_path / "d", history, [[0, 1], [2, 3]], frozenset({1}))
    assert analyze_fr(dumps).suspects == [1]


def test_rank_without_a_dump_outranks_a_live_rank_behind_where_the_missing_outnumber(
    tmp_path: Path,
) -> None:
    """A lost node's shape (DeepSpeed, NODE_KILL on node 1 of 2, gloo): ranks 4-7 and rank 1
    left no dump, rank 0 failed in default all_reduce #3 that ranks 2 and 3 finished. gloo
    retires a failed collective like a finished one, and more members are missing than passed
    it: the members without a dump explain it, rank 0 is not named alone."""
    history = {r: _steps(4) for r in (2, 3)}
    history[0] = _steps(3)
    analysis = analyze_fr(_write_dumps(tmp_path / "d", history, [[0, 1], [2, 3], [4, 5], [6, 7]]))
    assert 0 not in analysis.suspects and {4, 5, 6, 7} <= set(analysis.suspects)


def test_a_rank_behind_outranks_ranks_a_teardown_left_without_a_dump(tmp_path: Path) -> None:
    """The shape of real framework runs (accelerate, DeepSpeed, spawn: one default group, an
    exception on rank 6 of 8): rank 6 stopped after all_reduce #30, which every other member
    with a dump finished before entering #31; the launcher's teardown took rank 4 before it
    wrote a dump. Rank 6's own record shows it behind: it is the suspect, not rank 4."""
    history = {r: [("0", seq) for seq in range(1, 32)] for r in (0, 1, 2, 3, 5, 7)}
    history[6] = [("0", seq) for seq in range(1, 31)]
    dumps = _write_dumps(tmp_path / "d", history, [list(range(8))], frozenset({1, 5}))
    analysis = analyze_fr(dumps)
    assert analysis.suspects == [6]
    (reason,) = analysis.reasons
    assert reason.evidence == "missing" and "default_pg 0 collective #31" in reason.why


def test_a_rank_whose_own_record_completed_is_behind_on_its_own(tmp_path: Path) -> None:
    """NCCL records a collective completed: rank 0 completed default all_reduce #3, which
    ranks 2 and 3 also passed, and never entered #4. It stopped between collectives on its
    own, even where more members left no dump than passed #3 (the gloo rule's caution above
    is for records that cannot tell a failed collective from a finished one)."""
    history = {r: _steps(3, ("tp", 4), ("0", 4)) for r in (2, 3)}
    history[0] = _steps(3)
    dumps = _write_dumps(
        tmp_path / "d", history, [[0, 1], [2, 3], [4, 5], [6, 7]], frozenset({2, 3}), nccl=True
    )
    assert analyze_fr(dumps).suspects == [0]


def _stalled(
    world: int, stalled: set[int], tp: int = 2
) -> tuple[dict[int, list[tuple[str, int]]], list[list[int]]]:
    """Steps 1-4 done everywhere; at step 5 the ``stalled`` ranks never enter their TP
    collective, their TP peers wait in it, every other rank waits in the default one."""
    groups = [list(range(start, start + tp)) for start in range(0, world, tp)]
    history: dict[int, list[tuple[str, int]]] = {}
    for group in groups:
        for rank in group:
            if rank in stalled:
                history[rank] = _steps(4)
            elif set(group) & stalled:
                history[rank] = _steps(4, ("tp", 5))
            else:
                history[rank] = _steps(5)
    return history, groups


def test_positive_evidence_beats_a_refused_dump(tmp_path: Path) -> None:
    """32 ranks, rank 17 stalled (its TP group shows only 17 missing), rank 5's dump refused
    as unsafe: 17 is the suspect, 5 is unknown and reported, never guilty."""
    history, groups = _stalled(32, {17})
    pending = frozenset(r for r in range(32) if r != 17)
    dumps = _write_dumps(tmp_path / "d", history, groups, pending)
    (dumps / "_dump_5").write_bytes(b"cos\nsystem\n(S'true'\ntR.")  # a pickle that runs code
    analysis = analyze_fr(dumps)
    assert analysis.suspects == [17]
    assert analysis.unknown == [5]
    assert any("_dump_5" in item for item in analysis.unreadable)
    (reason,) = analysis.reasons
    assert reason.evidence == "missing" and "collective #5" in reason.why
    assert "Unknown (dump unusable, not evidence): 5" in analysis.table


def test_a_missing_culprit_dump_never_hides_another_culprit(tmp_path: Path) -> None:
    """16 ranks, ranks 9 and 14 both stalled; rank 9's dump is gone: both are suspects, 9
    reported as "no dump", 14 by the groups that show it missing."""
    history, groups = _stalled(16, {9, 14})
    pending = frozenset(r for r in range(16) if r not in (9, 14))
    dumps = _write_dumps(tmp_path / "d", history, groups, pending)
    (dumps / "_dump_9").unlink()
    analysis = analyze_fr(dumps)
    assert analysis.suspects == [9, 14]
    assert {r.rank: r.evidence for r in analysis.reasons} == {9: "no_dump", 14: "missing"}
    assert "rank 9 (no dump)" in analysis.table and "rank 14 (missing)" in analysis.table
    tp_rows = [g for g in analysis.groups if g.desc == "tp" and g.culprit]
    assert sorted(r for g in tp_rows for r in g.missing_ranks) == [9, 14]


def test_a_truncated_culprit_dump_never_hides_it(tmp_path: Path) -> None:
    """16 ranks, ranks 9 and 14 stalled; rank 9's dump is cut in half (it died writing it):
    its TP peer waits for it with no usable record of it, so 9 is named beside 14, as an
    unusable dump, and listed as unknown."""
    history, groups = _stalled(16, {9, 14})
    pending = frozenset(r for r in range(16) if r not in (9, 14))
    dumps = _write_dumps(tmp_path / "d", history, groups, pending)
    data = (dumps / "_dump_9").read_bytes()
    (dumps / "_dump_9").write_bytes(data[: len(data) // 2])
    analysis = analyze_fr(dumps)
    assert analysis.suspects == [9, 14]
    assert {r.rank: r.evidence for r in analysis.reasons} == {9: "unusable_dump", 14: "missing"}
    assert analysis.unknown == [9]
    assert "rank 9 (unusable dump)" in analysis.table


def test_a_lost_innocent_dump_is_not_blamed_beside_a_culprit_that_stopped_on_its_own(
    tmp_path: Path,
) -> None:
    """32 ranks, rank 17 stalled (its TP group shows only it missing), rank 5's dump never
    collected: 17 explains the default group's stall, 5 is not a suspect. A rank without a
    dump still outranks a live rank that stopped on a collective it shared with it
    (test_rank_without_a_dump_outranks_a_live_rank_behind)."""
    history, groups = _stalled(32, {17})
    pending = frozenset(r for r in range(32) if r != 17)
    dumps = _write_dumps(tmp_path / "d", history, groups, pending)
    (dumps / "_dump_5").unlink()
    assert analyze_fr(dumps).suspects == [17]


def test_an_empty_dump_is_unknown_not_guilty(tmp_path: Path) -> None:
    history, groups = _stalled(8, {3})
    dumps = _write_dumps(tmp_path / "d", history, groups, frozenset({0, 1, 2, 4, 5, 6, 7}))
    dump = pickle.loads((dumps / "_dump_6").read_bytes())
    (dumps / "_dump_6").write_bytes(pickle.dumps({**dump, "entries": []}, protocol=2))
    analysis = analyze_fr(dumps)
    assert (analysis.suspects, analysis.unknown) == ([3], [6])
    assert any("no entries" in item for item in analysis.unreadable)


def _nccl_set(
    directory: Path,
    culprits: set[int],
    *,
    empty: tuple[int, ...] = (),
    gone: tuple[int, ...] = (),
    truncated: tuple[int, ...] = (),
    only_active: bool = False,
) -> Path:
    """An NCCL-shaped set of 16 ranks in tensor-parallel groups of 4: at step 5 the
    ``culprits`` never enter their TP all_reduce, their TP peers wait in it, every other rank
    waits in the default one. ``empty``: dumps with no entries (a GIL-held rank's);
    ``gone``: no dump; ``truncated``: cut in half; ``only_active``: every dump holds only the
    collectives still in flight (``_dump_fr_trace(onlyActive=True)``)."""
    history, groups = _stalled(16, culprits, tp=4)
    pending = frozenset(r for r in range(16) if r not in culprits)
    dumps = _write_dumps(directory, history, groups, pending, nccl=True)
    for file in dumps.iterdir():
        rank = int(file.name.rsplit("_", 1)[1])
        dump = pickle.loads(file.read_bytes())
        if only_active:
            dump["entries"] = [e for e in dump["entries"] if e["state"] != "completed"]
        if rank in empty:
            dump["entries"] = []
        data = pickle.dumps(dump, protocol=2)
        if rank in gone:
            file.unlink()
        else:
            file.write_bytes(data[: len(data) // 2] if rank in truncated else data)
    return dumps


@pytest.mark.parametrize(
    ("culprits", "shape", "expected"),
    [
        ({5}, {}, {5: "missing"}),  # a GPU error: its own record stops a step early
        ({5, 10}, {}, {5: "missing", 10: "missing"}),
        ({5, 10}, {"empty": (5, 10)}, {5: "unusable_dump", 10: "unusable_dump"}),  # GIL held
        ({5, 6}, {"empty": (5, 6)}, {5: "unusable_dump", 6: "unusable_dump"}),
        ({5}, {"truncated": (5,)}, {5: "unusable_dump"}),
        ({5}, {"gone": (5,)}, {5: "no_dump"}),
        ({5, 10}, {"gone": (12,)}, {5: "missing", 10: "missing"}),  # an innocent's lost
        ({5, 10}, {"gone": (7,)}, {5: "missing", 10: "missing"}),  # a TP peer's lost
        ({5, 10}, {"truncated": (0, 13)}, {5: "missing", 10: "missing"}),
        ({5, 10}, {"empty": (7,)}, {5: "missing", 10: "missing"}),
        ({5, 10}, {"empty": (5, 10), "gone": (12,)}, {5: "unusable_dump", 10: "unusable_dump"}),
        (
            {5, 10},
            {"empty": (5, 10), "truncated": (0, 13)},
            {5: "unusable_dump", 10: "unusable_dump"},
        ),
        ({5, 10}, {"empty": (5,), "gone": (10,)}, {5: "unusable_dump", 10: "no_dump"}),
        ({5}, {"only_active": True}, {5: "unusable_dump"}),  # the culprit had none in flight
        ({5, 10}, {"only_active": True}, {5: "unusable_dump", 10: "unusable_dump"}),
        (
            {5, 10},
            {"only_active": True, "gone": (12,)},
            {5: "unusable_dump", 10: "unusable_dump"},
        ),
        (
            {5, 10},
            {"only_active": True, "truncated": (0,)},
            {5: "unusable_dump", 10: "unusable_dump"},
        ),
    ],
    ids=[
        "gpu_error_one",
        "gpu_error_two",
        "gil_two_empty",
        "gil_two_empty_one_tp",
        "culprit_truncated",
        "culprit_no_dump",
        "innocent_no_dump",
        "tp_peer_no_dump",
        "innocents_truncated",
        "tp_peer_empty",
        "gil_innocent_no_dump",
        "gil_innocents_truncated",
        "one_empty_one_no_dump",
        "active_gil_one",
        "active_gil_two",
        "active_innocent_no_dump",
        "active_innocent_truncated",
    ],
)
def test_nccl_sets_peers_records_name_the_ranks_that_never_joined(
    tmp_path: Path, culprits: set[int], shape: dict[str, Any], expected: dict[int, str]
) -> None:
    """Every shape of one analyzer: a culprit's own empty, truncated or missing dump never
    hides it (its TP peers wait for it), and an innocent's lost, truncated or empty dump is
    never blamed beside culprits the peers' records name."""
    analysis = analyze_fr(_nccl_set(tmp_path / "d", culprits, **shape))
    assert {r.rank: r.evidence for r in analysis.reasons} == expected
    culprit_rows = [g for g in analysis.groups if g.culprit]
    assert {r for g in culprit_rows for r in g.missing_ranks} >= culprits
    assert all(g.desc == "tp" for g in culprit_rows)


def test_a_lost_peer_is_named_before_an_empty_dump_at_one_stall(tmp_path: Path) -> None:
    """Rank 5's dump is empty and its TP peer 6 left none; ranks 4 and 7 wait for both in
    the TP all_reduce. The records cannot tell them apart: the rank that could not write a
    dump comes first (the same order keeps a lost culprit named beside an innocent's empty
    or truncated dump, the perturbations fr-empty and fr-truncated)."""
    analysis = analyze_fr(_nccl_set(tmp_path / "d", {5, 10}, empty=(5, 10), gone=(6,)))
    assert analysis.suspects == [6, 10]


def _reshape_last(dumps: Path, rank: int, **fields: object) -> None:
    """Rewrite fields of ``rank``'s newest entry (another op, other input sizes)."""
    dump = pickle.loads((dumps / f"_dump_{rank}").read_bytes())
    dump["entries"][-1].update(fields)
    (dumps / f"_dump_{rank}").write_bytes(pickle.dumps(dump, protocol=2))


def test_the_rank_that_entered_a_collective_as_another_is_the_culprit(tmp_path: Path) -> None:
    """A collective mismatch (the shape of a real COLLECTIVE_MISMATCH run): rank 6 skipped its
    TP all_reduce and entered default all_reduce #5 with one element where ranks 0-3 entered it
    with eight; its TP peers wait in the TP collective, so rank 6 looks held at the default
    group's front. Its own record differs from everyone's at that sequence number."""
    groups = [[0, 1, 2, 3], [4, 5, 6, 7]]
    history = {r: _steps(4, ("tp", 5), ("0", 5)) for r in range(4)}
    history.update({r: _steps(4, ("tp", 5)) for r in (4, 5, 7)})
    history[6] = _steps(4, ("0", 5))
    dumps = _write_dumps(tmp_path / "d", history, groups, frozenset(range(8)))
    _reshape_last(dumps, 6, input_sizes=[[1]])
    analysis = analyze_fr(dumps)
    assert analysis.suspects == [6]
    (reason,) = analysis.reasons
    assert reason.evidence == "mismatch"
    assert "[[1]]" in reason.why and "ranks 0-3" in reason.why and "[[8]]" in reason.why
    assert "rank 6 (mismatch)" in analysis.table


def test_another_operation_at_one_sequence_number_is_a_mismatch(tmp_path: Path) -> None:
    history = {r: _steps(5) for r in range(4)}
    dumps = _write_dumps(tmp_path / "d", history, [[0, 1], [2, 3]], frozenset(range(4)))
    _reshape_last(dumps, 3, profiling_name="gloo:broadcast")
    assert [(r.rank, r.evidence) for r in analyze_fr(dumps).reasons] == [(3, "mismatch")]


def test_sizes_that_differ_by_design_or_without_a_majority_are_no_mismatch(
    tmp_path: Path,
) -> None:
    """All-to-all takes each rank's own split sizes; two members that disagree have no
    majority to be odd against."""
    history = {r: _steps(5) for r in range(4)}
    dumps = _write_dumps(tmp_path / "a", history, [[0, 1], [2, 3]])
    for rank in range(4):
        _reshape_last(dumps, rank, profiling_name="gloo:all_to_all", input_sizes=[[rank + 1]])
    assert analyze_fr(dumps).suspects == []
    dumps = _write_dumps(tmp_path / "b", {0: _steps(5), 1: _steps(5)}, [[0, 1]])
    _reshape_last(dumps, 1, input_sizes=[[3]])
    assert all(r.evidence != "mismatch" for r in analyze_fr(dumps).reasons)
