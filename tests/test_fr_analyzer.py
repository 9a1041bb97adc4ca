"""The built-in FR analyzer on real gloo dumps (generate_gloo_dumps.py) and NCCL-format dumps."""

from __future__ import annotations

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
