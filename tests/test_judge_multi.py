"""Truth and scoring for faults on several ranks and for lost nodes (NODE_KILL): every
injected rank (every lost node) must be named, node naming counts for a lost node."""

from __future__ import annotations

import pytest
from support.judge_cases import case, issue

from pytest_faultloop.models import Decision, Experiment, PoolEntry, Truth
from pytest_faultloop.models.faults import FaultType, Nature
from pytest_faultloop.scoring.judges.deterministic import DeterministicJudge
from pytest_faultloop.scoring.judges.llm import ground_truth_text
from pytest_faultloop.scoring.restart_policy import load_policy
from pytest_faultloop.scoring.truth import truth_of

POLICY = load_policy()
JUDGE = DeterministicJudge(POLICY)


def verdict(**kwargs):
    return JUDGE.judge(case(**kwargs))


def experiment(token: str, gpus_per_node: int = 4) -> Experiment:
    fault, ranks, iteration, nodes = token.split(":")
    return Experiment(
        entry=PoolEntry.of(FaultType(fault), ranks, int(iteration), int(nodes)),
        workload="test",
        gpus_per_node=gpus_per_node,
        pool="test",
        source="test.pool",
        line=1,
    )


# --- truth -----------------------------------------------------------------------------------


def test_truth_of_several_ranks_is_one_group_per_rank() -> None:
    truth = truth_of(experiment("GPU_ERROR:12+14@3:5:4"), POLICY)
    assert truth.culprit == truth.fr_culprit == [12, 14]
    assert truth.culprit_groups == [[12], [14]] and not truth.node_names_count
    assert truth.decision is Decision.STOP


def test_truth_of_a_lost_node_is_its_ranks_and_node_naming_counts() -> None:
    truth = truth_of(experiment("NODE_KILL:5:5:2"), POLICY)
    assert truth.culprit == truth.fr_culprit == [4, 5, 6, 7]
    assert truth.culprit_groups is None and truth.node_names_count
    assert truth.natures == [Nature.CRASH, Nature.SIGNAL]
    assert set(truth.neighbours) == {Nature.NETWORK, Nature.SCHEDULER, Nature.HANG}
    assert truth.decision is Decision.RESTART
    several = truth_of(experiment("NODE_KILL:1+9:5:3"), POLICY)
    assert several.culprit_groups == [[0, 1, 2, 3], [8, 9, 10, 11]]


def test_a_single_rank_truth_is_stored_as_before() -> None:
    truth = truth_of(experiment("GPU_SLEEP:1:5:2"), POLICY)
    assert (truth.culprit, truth.culprit_groups, truth.node_names_count) == ([1], None, False)
    assert truth.groups == [[1]]
    assert "culprit_groups" not in truth.model_dump_json()
    assert "node_names_count" not in truth.model_dump_json()
    stored = Truth(culprit=[3], natures=[Nature.HANG]).model_dump_json()
    assert Truth.model_validate_json(stored).model_dump_json() == stored


# --- several ranks ---------------------------------------------------------------------------


def test_every_injected_rank_primary_is_true() -> None:
    primary = [issue(1, "crash"), issue(6, "crash")]
    v = verdict(fault="SIGKILL", ranks="1+6", primary=primary, decision=Decision.STOP)
    assert (v.rank_primary, v.rank_any, v.fault_described) == ("true", "true", "true")
    assert v.notes.startswith("Correct on all dimensions") and "ranks 1+6 primary" in v.notes


def test_one_rank_of_two_primary_is_partial_and_the_notes_name_the_missed_one() -> None:
    v = verdict(
        fault="GPU_ERROR",
        ranks="12+14",
        nodes=4,
        primary=[issue(12, "gpu_error")],
        secondary=[issue(14, "gpu_error")],
        suspects=[12],
    )
    assert (v.rank_primary, v.rank_any) == ("partial", "true")
    assert "rank 14 of 12+14 not named among the primary issues" in v.notes
    assert v.fr_rank_correct == "rank"  # FR suspects within the injected set


def test_no_injected_rank_named_is_false() -> None:
    v = verdict(fault="GPU_ERROR", ranks="1+2", primary=[issue(3, "gpu_error")], suspects=[3])
    assert (v.rank_primary, v.rank_any, v.fr_rank_correct) == ("false", "false", "node")
    assert "ranks 1+2 not named" in v.notes


def test_a_collateral_rank_first_is_partial_even_with_both_named() -> None:
    primary = [issue(0, "network"), issue(1, "gpu_error"), issue(2, "gpu_error")]
    assert verdict(fault="GPU_ERROR", ranks="1+2", primary=primary).rank_primary == "partial"


def test_ranks_named_in_the_primary_text_count() -> None:
    text = "Primary issues: [ranks 1 and 6: crash - SIGKILL], Secondary issues: [rank 0: ...]"
    v = verdict(fault="SIGKILL", ranks="1+6", primary=[issue(None, "crash")], attribution_text=text)
    assert (v.rank_primary, v.rank_any) == ("true", "true")


def test_only_the_nodes_of_several_ranks_is_partial() -> None:
    primary = [issue(None, "hang", node="0"), issue(None, "hang", node="1")]
    v = verdict(fault="GPU_SLEEP", ranks="1+5", primary=primary, suspects=[])
    assert (v.rank_primary, v.rank_any) == ("partial", "false")


def test_fr_suspects_outside_the_set_are_scored_as_before() -> None:
    assert verdict(fault="GPU_SLEEP", ranks="1+6", suspects=[1, 6]).fr_rank_correct == "rank"
    assert verdict(fault="GPU_SLEEP", ranks="1+6", suspects=[1, 2]).fr_rank_correct == "node"
    assert verdict(fault="GPU_SLEEP", ranks="1+6", suspects=[2, 5]).fr_rank_correct == "segment"


# --- lost nodes ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("primary", "text", "hosts"),
    [
        ([issue(5, "crash")], "", {}),
        ([issue(None, "crash", node="1")], "", {}),
        ([issue(None, "crash", node="node1")], "", {}),
        ([issue(None, "crash", node="gpu-host-2")], "", {0: "gpu-host-1", 1: "gpu-host-2"}),
        ([issue(None, "crash")], "Primary issues: [node 1 lost: crash]", {}),
        ([issue(None, "crash")], "Primary issues: [ranks 4-7: crash - node lost]", {}),
    ],
    ids=["a-rank", "node-index", "nodeN", "hostname", "node-in-text", "range-inside"],
)
def test_naming_the_lost_node_or_any_of_its_ranks_is_true(
    primary: list, text: str, hosts: dict[int, str]
) -> None:
    v = verdict(
        fault="NODE_KILL",
        ranks="5",
        primary=primary,
        attribution_text=text,
        node_hosts=hosts,
        suspects=[4, 5, 6, 7],
    )
    assert (v.rank_primary, v.rank_any, v.fr_rank_correct) == ("true", "true", "rank")


def test_the_other_node_named_for_a_lost_node_is_false() -> None:
    v = verdict(fault="NODE_KILL", ranks="5", primary=[issue(None, "crash", node="0")])
    assert (v.rank_primary, v.rank_any) == ("false", "false")
    assert "node 1 (ranks 4-7) not named" in v.notes


def test_a_lost_node_named_only_among_secondary_issues_counts_for_rank_any() -> None:
    v = verdict(
        fault="NODE_KILL",
        ranks="1",
        primary=[issue(7, "network")],
        secondary=[issue(None, "crash", node="node0")],
    )
    assert (v.rank_primary, v.rank_any) == ("false", "true")


def test_several_lost_nodes_must_each_be_named() -> None:
    both = [issue(None, "crash", node="0"), issue(None, "crash", node="2")]
    v = verdict(fault="NODE_KILL", ranks="1+9", nodes=3, primary=both, suspects=[0, 8])
    assert (v.rank_primary, v.rank_any, v.fr_rank_correct) == ("true", "true", "rank")
    one = verdict(fault="NODE_KILL", ranks="1+9", nodes=3, primary=[issue(2, "crash")])
    assert (one.rank_primary, one.rank_any) == ("partial", "true")
    assert "node 2 of nodes 0+2 not named among the primary issues" in one.notes


# --- the LLM judge's ground truth ----------------------------------------------------------


def test_llm_ground_truth_lists_each_rank_and_what_naming_them_takes() -> None:
    text = ground_truth_text(case(fault="GPU_ERROR", ranks="12+14@3", nodes=4).resolved(POLICY))
    assert "ranks: 12, 14 (the fault was injected into each" in text
    assert "node of rank 14: 3 (ranks 12-15)" in text
    lost = ground_truth_text(case(fault="NODE_KILL", ranks="1+9", nodes=3).resolved(POLICY))
    assert "node lost: 0 (ranks 0-3)" in lost and "node lost: 2 (ranks 8-11)" in lost
    assert "every lost node is named" in lost
    single = ground_truth_text(case(fault="GPU_SLEEP", rank=1).resolved(POLICY))
    assert "rank: 1\nnode of the rank: 0 (ranks 0-3)\n" in single
