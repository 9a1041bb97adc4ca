"""The built-in FR analyzer on real gloo dumps (generate_gloo_dumps.py) and NCCL-format dumps."""

from __future__ import annotations

import pickle
from pathlib import Path

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
) -> Path:
    """gloo-style dumps (documented format, version 2.10): collectives retired, except the
    last one of the ``pending`` ranks.

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
                    "state": "scheduled",
                    "retired": not (rank in pending and record_id == len(collectives) - 1),
                    "timeout_ms": 10_000,
                    "is_p2p": False,
                }
            )
        dump = {
            "version": "2.10",
            "pg_config": config,
            "pg_status": {},
            "comm_lib_version": "",
            "entries": entries,
        }
        (directory / f"_dump_{rank}").write_bytes(pickle.dumps(dump, protocol=2))
    return directory


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


def test_rank_without_a_dump_outranks_a_live_rank_behind(tmp_path: Path) -> None:
    """Rank 1 left no dump (killed); rank 0, its TP peer, got an error in default all_reduce
    #3 and stopped there while the others moved on: the vanished rank explains it."""
    history = {r: _steps(4) for r in (2, 3)}
    history[0] = _steps(3)
    analysis = analyze_fr(_write_dumps(tmp_path / "d", history, [[0, 1], [2, 3]]))
    assert analysis.suspects == [1]
    assert analysis.groups[0].culprit and 1 in analysis.groups[0].missing_ranks


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
