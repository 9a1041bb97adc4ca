"""The built-in log analyzer on logs written from the documented PyTorch/NCCL/torchrun/Slurm formats."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_faultloop.analyzers import analyze_log, parse_policy
from pytest_faultloop.models import Decision
from pytest_faultloop.models.faults import Nature

LOGS = Path(__file__).parent / "fixtures" / "logs" / "synthetic"
"""Hand-written edge cases (see their README); real formats: test_log_real_formats.py."""

EXPECTED = [
    # file, decision, primary ranks, primary nature
    ("gloo_hang_rank1.log", Decision.RESTART, [1], Nature.HANG),
    ("gloo_sigkill_rank1.log", Decision.STOP, [1], Nature.CRASH),
    ("gloo_exception_rank2.log", Decision.STOP, [2], Nature.EXCEPTION),
    ("gloo_monitored_barrier_rank3.log", Decision.RESTART, [3], Nature.HANG),
    ("nccl_hang_rank5_two_nodes.log", Decision.RESTART, [5], Nature.HANG),
    ("nccl_all_timeout_rank2_behind.log", Decision.RESTART, [2], Nature.HANG),
    ("nccl_gpu_error_rank3.log", Decision.STOP, [3], Nature.GPU_ERROR),
    ("slurm_ecc_label_rank6.log", Decision.RESTART, [6], Nature.GPU_ERROR),  # hardware: restart
    ("srun_label_segfault_rank3.log", Decision.STOP, [3], Nature.CRASH),
    ("slurm_time_limit.log", Decision.RESTART, [None], Nature.SCHEDULER),
    ("sigterm_external_rank1.log", Decision.RESTART, [1], Nature.SIGNAL),
    ("sigint_keyboard_interrupt_rank1.log", Decision.RESTART, [1], Nature.SIGNAL),
    ("megatron_markers_sigstop_rank0.log", Decision.RESTART, [0], Nature.HANG),
    ("restart_cycles_rank3_killed_last.log", Decision.STOP, [3], Nature.CRASH),
    ("gloo_hang_rank2_peer_lost_first.log", Decision.RESTART, [2], Nature.HANG),
    # excerpts of real tiny_gloo runs (8 ranks on 2 emulated nodes)
    ("gloo_hang_rank7_peer_lost_first.log", Decision.RESTART, [7], Nature.HANG),
    ("gloo_exception_from_injector_rank1.log", Decision.STOP, [1], Nature.EXCEPTION),
    # ... with faults on several ranks (multi.pool): each independent failure is primary
    ("gloo_gpu_error_ranks1_2.log", Decision.STOP, [2, 1], Nature.GPU_ERROR),
    ("gloo_sigkill_ranks1_6.log", Decision.STOP, [1, 6], Nature.CRASH),
    ("gloo_node_lost_ranks4_7.log", Decision.RESTART, [4, 5, 6, 7], Nature.CRASH),
]


@pytest.mark.parametrize(
    ("name", "decision", "ranks", "nature"), EXPECTED, ids=[e[0] for e in EXPECTED]
)
def test_culprit_decision_and_nature(
    name: str, decision: Decision, ranks: list[int | None], nature: Nature
) -> None:
    analysis = analyze_log(LOGS / name)
    assert analysis.decision is decision, analysis.explanation
    assert [i.rank for i in analysis.primary] == ranks, analysis.attribution_text
    assert analysis.primary[0].nature is nature
    assert analysis.attribution_text.startswith("Primary issues: [")
    assert analysis.evidence, "the primary issue cites log lines"


def test_ranks_gone_silently_with_their_launcher_are_a_lost_node() -> None:
    """Node 1's launcher reported none of its ranks (it died with them) while node 0's
    reported all of its own: a lost node, infrastructure, restart without it."""
    analysis = analyze_log(LOGS / "gloo_node_lost_ranks4_7.log")
    assert analysis.cause == "node_lost"
    assert "node lost" in analysis.primary[0].summary
    assert sorted(i.rank for i in analysis.secondary) == [0, 1, 2, 3]
    single = analyze_log(LOGS / "gloo_sigkill_rank1.log")  # its launcher reported it
    assert (single.cause, single.decision) == ("crash", Decision.STOP)


def test_a_later_crash_reported_without_a_word_of_its_own_is_primary_too() -> None:
    analysis = analyze_log(LOGS / "gloo_sigkill_ranks1_6.log")
    assert [i.summary for i in analysis.primary] == ["SIGKILL (exit code -9)"] * 2
    assert all("victim" in i.summary for i in analysis.secondary)


def test_victims_are_secondary_never_primary() -> None:
    analysis = analyze_log(LOGS / "nccl_hang_rank5_two_nodes.log")
    assert sorted(i.rank for i in analysis.secondary) == [0, 1, 2, 3, 4, 6, 7]
    assert all("victim" in i.summary for i in analysis.secondary)


def test_torchrun_root_cause_of_a_hang_is_a_victim() -> None:
    """torchrun's "first observed failure" names rank 0, which only timed out waiting for rank 1."""
    analysis = analyze_log(LOGS / "gloo_hang_rank1.log")
    assert analysis.primary[0].rank == 1
    assert 0 in [i.rank for i in analysis.secondary]


def test_launcher_sigterm_makes_a_victim_external_sigterm_a_culprit() -> None:
    analysis = analyze_log(LOGS / "sigterm_external_rank1.log")
    assert [i.rank for i in analysis.primary] == [1]
    assert analysis.decision_text == "RESTART IMMEDIATE"


@pytest.mark.parametrize(
    "name",
    ["gloo_hang_rank2_peer_lost_first.log", "gloo_hang_rank7_peer_lost_first.log"],
)
def test_silent_rank_whose_peers_timed_out_hung_even_if_a_peer_lost_first(
    name: str,
) -> None:
    """The first rank to time out closes its sockets, so a neighbour reports a lost peer
    before its own timeout; a peer that waited out a timeout proves the silent rank alive."""
    analysis = analyze_log(LOGS / name)
    assert "lost a peer" in analysis.primary[0].summary
    assert "hung" in analysis.primary[0].summary


def test_silent_rank_whose_peers_all_lost_it_died() -> None:
    analysis = analyze_log(LOGS / "gloo_sigkill_rank1.log")
    assert analysis.primary[0].nature is Nature.CRASH


def test_exception_raised_in_the_injector_module_is_the_job_s_own_output() -> None:
    """Only the injector's log records are dropped, not the traceback naming its module."""
    analysis = analyze_log(LOGS / "gloo_exception_from_injector_rank1.log")
    assert analysis.primary[0].summary.startswith("InjectedException: workload exception")
    text = analysis.model_dump_json()
    assert "FAULT INJECTION" not in text and "[pytest_faultloop.inject]" not in text


def test_last_restart_cycle_is_analysed() -> None:
    analysis = analyze_log(LOGS / "restart_cycles_rank3_killed_last.log")
    assert "restart cycle 2 of 2" in analysis.explanation
    assert "ZeroDivisionError" not in analysis.model_dump_json()  # cycle 1's failure


def test_evidence_line_numbers_point_at_the_lines() -> None:
    path = LOGS / "nccl_gpu_error_rank3.log"
    lines = path.read_text().splitlines()
    for evidence in analyze_log(path).evidence:
        assert lines[evidence.line - 1].startswith(evidence.text[:60])


def test_clean_log_continues_and_sees_the_checkpoint() -> None:
    analysis = analyze_log(LOGS / "clean_checkpoint_done.log")
    assert (analysis.decision, analysis.decision_text) == (
        Decision.CONTINUE,
        "ERRORS NOT FOUND",
    )
    assert analysis.primary == [] and analysis.checkpoint_saved is True


def test_failures_after_training_is_done_are_teardown() -> None:
    analysis = analyze_log(LOGS / "teardown_after_training.log")
    assert analysis.decision is Decision.CONTINUE
    assert analysis.primary == [] and analysis.secondary


def test_policy_is_configurable() -> None:
    analysis = analyze_log(LOGS / "slurm_time_limit.log", policy=parse_policy("scheduler=STOP"))
    assert analysis.decision_text == "STOP - DONT RESTART IMMEDIATE"


@pytest.mark.parametrize(
    "name",
    [
        "megatron_markers_sigstop_rank0.log",
        "gloo_hang_rank1.log",
        "sigterm_external_rank1.log",
    ],
)
def test_harness_lines_never_reach_the_analysis(name: str) -> None:
    text = analyze_log(LOGS / name).model_dump_json().lower()
    for marker in (
        "fault injection",
        "pytest_faultloop.inject",
        "debug_fault_injection",
        "lock_gil",
        "sigstop",
    ):
        assert marker not in text
