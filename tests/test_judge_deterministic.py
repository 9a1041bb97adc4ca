"""The deterministic judge on every verdict value, the seed's STOP-substring bug and the control."""

from __future__ import annotations

import pytest
from support.judge_cases import case, issue

from pytest_faultloop.models import Decision
from pytest_faultloop.scoring.judges.deterministic import DeterministicJudge
from pytest_faultloop.scoring.restart_policy import load_policy

JUDGE = DeterministicJudge(load_policy())


def verdict(**kwargs):
    return JUDGE.judge(case(**kwargs))


def test_all_correct_reads_true_everywhere_with_a_confirming_note() -> None:
    v = verdict(fault="GPU_SLEEP", rank=1)
    assert (
        v.restart_correct,
        v.rank_primary,
        v.rank_any,
        v.fault_described,
        v.fr_rank_correct,
    ) == (
        "true",
        "true",
        "true",
        "true",
        "rank",
    )
    assert v.judge == "deterministic" and v.expected_decision is Decision.RESTART
    assert v.notes.startswith("Correct on all dimensions")


# --- restart_correct -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "decision"),
    [
        ("STOP - DONT RESTART IMMEDIATE", Decision.STOP),
        ("stop - don't restart immediate", Decision.STOP),
        ("DO NOT RESTART", Decision.STOP),
        ("STOP", Decision.STOP),
        ("RESTART IMMEDIATE", Decision.RESTART),
        ("RESTART", Decision.RESTART),
        ("ERRORS NOT FOUND", Decision.CONTINUE),
        ("NO LOGS", Decision.UNKNOWN),
        ("LLM FAILURE", Decision.UNKNOWN),
        ("UNKNOWN", Decision.UNKNOWN),
        ("RESTART (root cause unknown)", Decision.RESTART),
        ("", None),
    ],
)
def test_decision_texts_normalise(text: str, decision: Decision | None) -> None:
    assert Decision.from_text(text) == decision


def test_stop_dont_restart_never_reads_as_restart() -> None:
    """The seed's bug: a substring test read STOP - DONT RESTART IMMEDIATE as RESTART."""
    v = verdict(
        fault="GPU_SLEEP", decision=Decision.RESTART, decision_text="STOP - DONT RESTART IMMEDIATE"
    )
    assert v.restart_correct == "false"
    assert "policy expects RESTART" in v.notes
    assert (
        verdict(
            fault="GPU_ERROR", decision=Decision.STOP, primary=[issue(1, "gpu_error")]
        ).restart_correct
        == "true"
    )


@pytest.mark.parametrize(
    ("fault", "decision", "text", "expected"),
    [
        ("GPU_ERROR", Decision.RESTART, "RESTART IMMEDIATE", "false"),
        ("SIGKILL", Decision.STOP, "STOP", "true"),
        ("SIGTERM", Decision.RESTART, "RESTART", "true"),
        ("GPU_SLEEP", Decision.UNKNOWN, "NO LOGS", "false"),
        ("GPU_SLEEP", Decision.UNKNOWN, "LLM FAILURE", "false"),
        ("GPU_SLEEP", Decision.RESTART, "", "true"),
    ],
)
def test_restart_correct(fault: str, decision: Decision, text: str, expected: str) -> None:
    assert verdict(fault=fault, decision=decision, decision_text=text).restart_correct == expected


def test_restart_is_na_only_without_an_expectation(tmp_path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[GPU_ERROR]\ndecision = "STOP"\nrationale = "hardware"\n')
    judge = DeterministicJudge(load_policy(policy))
    assert judge.judge(case(fault="GPU_SLEEP")).restart_correct == "N/A"
    assert judge.judge(case(fault="GPU_SLEEP")).expected_decision is None
    assert (
        judge.judge(case(fault="GPU_ERROR", decision=Decision.RESTART)).restart_correct == "false"
    )


# --- rank_primary and rank_any ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("primary", "attribution", "expected"),
    [
        ([issue(1)], "", "true"),
        ([issue(None, summary="rank 1 stopped enqueueing collectives")], "", "true"),
        ([], "Primary issues: [Rank 1 (node 0): GPU hang], Secondary issues: []", "true"),
        ([issue(None, node="0")], "", "partial"),
        ([issue(None, node="node0")], "", "partial"),
        ([issue(None, node="gpu-host-7.cluster")], "", "partial"),
        ([issue(None, summary="ranks 0-3 stalled")], "", "partial"),
        ([issue(None, summary="node 0 lost")], "", "partial"),
        ([issue(None, node="1")], "", "false"),
        ([issue(None, node="node000")], "", "false"),
        ([issue(0, node="0")], "", "false"),
        ([], "Primary issues: [rank 0 (node 0): hang - stalled], Secondary issues: []", "false"),
        ([], "Primary issues: [job (node 0): hang - stalled], Secondary issues: []", "partial"),
        ([issue(10)], "", "false"),
        ([], "Primary issues: [rank 0 timeout], Secondary issues: [rank 1 hung]", "false"),
    ],
)
def test_rank_primary(primary, attribution: str, expected: str) -> None:
    v = verdict(rank=1, primary=primary, attribution_text=attribution, node_host="gpu-host-7")
    assert v.rank_primary == expected


@pytest.mark.parametrize(
    ("secondary", "attribution", "expected"),
    [
        ([issue(1)], "", "true"),
        ([], "Secondary issues: [rank(s) 0, 1 timed out]", "true"),
        ([], '{"primary_failure": {"rank": "1"}}', "true"),
        ([], "ranks [3, 1]", "true"),
        ([], "rank 10 and rank 11 timed out", "false"),
        ([], "ranks 0-7 timed out", "false"),
        ([], "local_rank 1 was fine", "false"),
        ([], "", "false"),
    ],
)
def test_rank_any(secondary, attribution: str, expected: str) -> None:
    v = verdict(rank=1, primary=[issue(0)], secondary=secondary, attribution_text=attribution)
    assert v.rank_any == expected


def test_rank_only_in_secondary_is_collateral() -> None:
    v = verdict(rank=0, primary=[issue(3)], secondary=[issue(0)], suspects=[0])
    assert (v.rank_primary, v.rank_any) == ("false", "true")
    assert "only outside the primary issues" in v.notes


# --- fault_described -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "nature", "expected"),
    [
        ("GPU_SLEEP", "hang", "true"),
        ("SIGKILL", "signal", "true"),
        ("GPU_SLEEP", "network", "partial"),
        ("GPU_ERROR", "crash", "partial"),
        ("GPU_SLEEP", "none", "partial"),
        ("GPU_ERROR", "hang", "false"),
        ("WORKLOAD_EXC", "scheduler", "false"),
    ],
)
def test_fault_described(fault: str, nature: str, expected: str) -> None:
    assert verdict(fault=fault, primary=[issue(1, nature)]).fault_described == expected


def test_fault_described_prefers_the_issue_about_the_rank_and_needs_one() -> None:
    assert verdict(primary=[issue(0, "crash"), issue(1, "hang")]).fault_described == "true"
    assert verdict(primary=[]).fault_described == "false"


# --- fr_rank_correct -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rank", "suspects", "dumps", "expected"),
    [
        (5, [5], 8, "rank"),
        (5, [5, 5], 8, "rank"),
        (5, [4, 5], 8, "node"),
        (5, [6], 8, "node"),
        (5, [1, 5], 8, "segment"),
        (5, [5, 40], 8, "false"),
        (5, [], 8, "false"),
        (5, [], 0, "no_dumps"),
        (37, [36, 39], 64, "node"),
        (37, [33, 40], 64, "segment"),
        (37, [5], 64, "false"),
    ],
)
def test_fr_rank_correct(rank: int, suspects: list[int], dumps: int, expected: str) -> None:
    v = verdict(rank=rank, nodes=16, suspects=suspects, dumps_read=dumps, primary=[issue(rank)])
    assert v.fr_rank_correct == expected


def test_notes_name_every_gap_in_one_sentence() -> None:
    v = verdict(
        fault="GPU_ERROR",
        rank=1,
        decision=Decision.RESTART,
        primary=[issue(3, "hang")],
        suspects=[],
        dumps_read=0,
    )
    assert v.notes == (
        "Main gap: decided RESTART IMMEDIATE where the policy expects STOP; rank 1 not named "
        "(the analyzer named primary rank 3); described hang, expected gpu_error; no FR dumps were read."
    )


# --- NONE control ----------------------------------------------------------------------------


def test_control_without_false_alarm_reads_true() -> None:
    v = verdict(
        fault="NONE", rank=0, decision=Decision.CONTINUE, primary=[], suspects=[], dumps_read=0
    )
    assert (
        v.restart_correct,
        v.rank_primary,
        v.rank_any,
        v.fault_described,
        v.fr_rank_correct,
    ) == (
        "true",
        "true",
        "true",
        "true",
        "rank",
    )
    assert v.expected_decision is Decision.CONTINUE
    assert v.notes.startswith("No false alarm")


def test_control_false_alarm_reads_false() -> None:
    v = verdict(
        fault="NONE", rank=0, decision=Decision.RESTART, primary=[issue(3, "hang")], suspects=[3]
    )
    assert (
        v.restart_correct,
        v.rank_primary,
        v.rank_any,
        v.fault_described,
        v.fr_rank_correct,
    ) == (
        "false",
        "false",
        "false",
        "false",
        "false",
    )
    assert v.notes.startswith("False alarm on a clean run")
