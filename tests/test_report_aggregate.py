"""The aggregate section: counts kept apart, pass rates, confusion matrices and patterns."""

import pytest
from support.report_samples import make_result
from support.verdicts import ALL_FALSE, labels

from pytest_faultloop.models import Decision, ExperimentResult
from pytest_faultloop.models.faults import FaultType, Nature
from pytest_faultloop.report.aggregate import (
    NO_PRIMARY,
    Rate,
    aggregate_section,
    nature_confusion,
    pass_rates,
    rank_position,
    tally,
)
from pytest_faultloop.report.decision_errors import DecisionErrors
from pytest_faultloop.report.patterns import PATTERNS, detect_patterns
from pytest_faultloop.scoring.pass_rule import PassRule

G = FaultType


@pytest.fixture
def results() -> list[ExperimentResult]:
    return [
        make_result(G.GPU_SLEEP, 1),
        make_result(G.GPU_SLEEP, 0, scores=labels(rank_primary="false", fr_rank_correct="node")),
        make_result(G.GPU_SLEEP, 4, scores=labels(rank_primary="partial")),
        make_result(G.GPU_SLEEP, 15, 4, nature=Nature.NETWORK,
                    scores=labels(fault_described="partial")),
        make_result(G.GPU_ERROR, 1, decided=Decision.RESTART, nature=Nature.HANG,
                    scores=labels(restart_correct="false", fault_described="false",
                                  fr_rank_correct="segment")),
        make_result(G.SIGKILL, 0, decided=Decision.UNKNOWN,
                    scores=labels(restart_correct="false", rank_primary="false", rank_any="false",
                                  fault_described="partial", fr_rank_correct="no_dumps")),
        make_result(G.SEGFAULT, 1, broken="judge_failed", reason="HTTP 500"),
        make_result(G.SIGKILL, 1, 4, broken="run_invalid", reason="ended before the fault"),
        make_result(G.LOCK_GIL, 1, broken="analysis_failed", reason="logsage crashed"),
        make_result(G.SIGTERM, 1, named_ranks=(), decided=Decision.CONTINUE,
                    scores=ALL_FALSE),
        make_result(G.NONE, 0, named_ranks=(), scores=labels()),
    ]  # fmt: skip


def test_counts_kept_apart(results: list[ExperimentResult]) -> None:
    counts = tally(results)
    assert counts.total == 11
    assert counts.scored == 8
    assert counts.invalid_runs == ["SIGKILL:1:5:4"]
    assert counts.judge_errors == ["SEGFAULT:1:5:2"]
    assert counts.analysis_failures == ["LOCK_GIL:1:5:2"]
    assert counts.attribution_misses == ["SIGTERM:1:5:2"]  # the control naming nothing is right


def test_pass_rates_by_fault_type(results: list[ExperimentResult]) -> None:
    rates = pass_rates(results, lambda r: r.experiment.entry.fault.value)
    assert list(rates) == [
        "GPU_SLEEP",
        "GPU_ERROR",
        "SIGKILL",
        "SEGFAULT",
        "LOCK_GIL",
        "SIGTERM",
        "NONE",
    ]
    sleep = rates["GPU_SLEEP"]
    assert (sleep.experiments, sleep.scored) == (4, 4)
    assert sleep.rates["rank_primary"] == Rate(2, 4)
    assert sleep.rates["fault_described"] == Rate(3, 4)
    assert sleep.rates["fr_rank_correct"] == Rate(3, 4)
    kill = rates["SIGKILL"]
    assert (kill.experiments, kill.scored) == (2, 1)
    assert kill.rates["restart_correct"] == Rate(0, 1)
    assert rates["SEGFAULT"].rates["rank_any"] == Rate(0, 0)
    assert str(rates["SEGFAULT"].rates["rank_any"]) == "—"


def test_partial_and_fr_scope_options_change_the_rates(results: list[ExperimentResult]) -> None:
    rule = PassRule(accept_partial=True, fr_scope="segment")
    sleep = pass_rates(results, lambda r: r.experiment.entry.fault.value, rule)["GPU_SLEEP"]
    assert sleep.rates["rank_primary"] == Rate(3, 4)  # partial now passes, false still fails
    assert sleep.rates["fault_described"] == Rate(4, 4)
    assert sleep.rates["fr_rank_correct"] == Rate(4, 4)


def test_rate_text() -> None:
    assert str(Rate(2, 3)) == "2/3 (67%, 21–94)"  # Wilson 95 %: 0.208 to 0.939
    assert str(Rate(0, 0)) == "—"


def test_restart_not_applicable_is_excluded() -> None:
    results = [
        make_result(G.GPU_SLEEP, 1, scores=labels(restart_correct=v))
        for v in ("true", "false", "N/A")
    ]
    assert pass_rates(results, lambda r: "all")["all"].rates["restart_correct"] == Rate(1, 2)


@pytest.mark.parametrize(
    ("rank", "nodes", "position"),
    [(0, 2, "0"), (1, 2, "1"), (4, 2, "mid"), (7, 2, "last"), (3, 2, "other"),
     (8, 4, "mid"), (15, 4, "last"), (16, 8, "mid"), (31, 8, "last"), (0, 1, "0"), (3, 1, "last")],
)  # fmt: skip
def test_rank_position(rank: int, nodes: int, position: str) -> None:
    assert rank_position(make_result(G.GPU_SLEEP, rank, nodes).experiment) == position


def test_restart_confusion_matrix(results: list[ExperimentResult]) -> None:
    assert DecisionErrors.of(results).matrix == {
        (Decision.RESTART, Decision.RESTART): 4,  # GPU_SLEEP, all four
        (Decision.STOP, Decision.RESTART): 1,  # GPU_ERROR
        (Decision.STOP, Decision.UNKNOWN): 1,  # SIGKILL
        (Decision.RESTART, Decision.CONTINUE): 1,  # SIGTERM
        (Decision.CONTINUE, Decision.CONTINUE): 1,  # control
    }


def test_the_false_stop_gate_reads_the_upper_bound(results: list[ExperimentResult]) -> None:
    """0 false STOPs of 6 still leaves an upper bound of 39 %: a gate at 30 % fails the run,
    one at 40 % passes it; no gate, no failure."""
    errors = DecisionErrors.of(results)
    assert (errors.false_stop.errors, errors.false_stop.cases) == (0, 6)
    assert errors.gate(0.3) == (
        "false-STOP rate 0/6 (0%, 0–39): its upper bound 39% exceeds the allowed 30%"
    )
    assert errors.gate(0.4) is None and errors.gate(None) is None


def test_nature_confusion_matrix(results: list[ExperimentResult]) -> None:
    assert nature_confusion(results) == {
        (Nature.HANG, "hang"): 3,
        (Nature.HANG, "network"): 1,
        (Nature.GPU_ERROR, "hang"): 1,
        (Nature.CRASH, "crash"): 1,
        (Nature.SIGNAL, NO_PRIMARY): 1,
        (Nature.NONE, NO_PRIMARY): 1,
    }


def _pattern_keys(results: list[ExperimentResult]) -> dict[str, tuple[str, ...]]:
    return {m.pattern.name: m.experiments for m in detect_patterns(results)}


@pytest.mark.parametrize(
    ("fault", "rank", "scores", "pattern"),
    [
        (G.GPU_SLEEP, 0, labels(rank_primary="false"), "rank_primary=false, rank_any=true"),
        (
            G.GPU_SLEEP,
            0,
            labels(rank_primary="false", rank_any="false"),
            "rank_any=false for rank 0",
        ),
        (
            G.SEGFAULT,
            1,
            labels(fault_described="partial"),
            "fault_described=partial for crash types",
        ),
        (G.GPU_ERROR, 1, labels(restart_correct="false"), "restart_correct=false for GPU_ERROR"),
        (G.SIGTERM, 1, labels(fr_rank_correct="no_dumps"), "fr_rank_correct=no_dumps"),
        (G.SIGTERM, 1, labels(fr_rank_correct="node"), "fr_rank_correct=node"),
        (G.SIGTERM, 1, labels(fr_rank_correct="segment"), "fr_rank_correct=segment"),
    ],
)
def test_each_pattern_is_recognised_alone(
    fault: FaultType, rank: int, scores: dict[str, str], pattern: str
) -> None:
    result = make_result(fault, rank, scores=scores)
    assert _pattern_keys([result]) == {pattern: (result.experiment.key,)}


@pytest.mark.parametrize(
    "result",
    [
        make_result(G.GPU_SLEEP, 1, scores=labels()),
        make_result(G.GPU_SLEEP, 1, scores=labels(rank_any="false")),  # rank_any=false, not rank 0
        make_result(
            G.GPU_SLEEP, 1, scores=labels(fault_described="partial")
        ),  # partial, not a crash
        make_result(
            G.SIGKILL, 1, scores=labels(restart_correct="false")
        ),  # restart wrong, not GPU_ERROR
        make_result(G.GPU_SLEEP, 0, broken="judge_failed", reason="timeout"),  # unscored
    ],
)
def test_near_misses_match_no_pattern(result: ExperimentResult) -> None:
    assert detect_patterns([result]) == []


def test_patterns_list_every_experiment_in_order(results: list[ExperimentResult]) -> None:
    keys = _pattern_keys(results)
    assert keys["rank_primary=false, rank_any=true"] == ("GPU_SLEEP:0:5:2",)
    assert keys["rank_any=false for rank 0"] == ("SIGKILL:0:5:2",)
    assert keys["fault_described=partial for crash types"] == ("SIGKILL:0:5:2",)
    assert keys["fr_rank_correct=no_dumps"] == ("SIGKILL:0:5:2",)
    assert list(keys) == [p.name for p in PATTERNS if p.name in keys]


def test_section_text(results: list[ExperimentResult]) -> None:
    text = aggregate_section(results)
    assert "- Invalid runs: 1 (`SIGKILL:1:5:4`)" in text
    assert "- Judge errors: 1 (`SEGFAULT:1:5:2`)" in text
    assert "- Analysis failures: 1 (`LOCK_GIL:1:5:2`)" in text
    assert "kept in the rates): 1 (`SIGTERM:1:5:2`)" in text
    assert (
        "| GPU_SLEEP | 4/4 | 4/4 (100%, 51–100) | 2/4 (50%, 15–85) | 4/4 (100%, 51–100) "
        "| 3/4 (75%, 30–95) | 3/4 (75%, 30–95) |" in text
    )
    assert "| **all** | 8/11 |" in text
    assert "| 2 | 7/9 |" in text and "| 4 | 1/2 |" in text
    rank_rows = [
        line.split(" | ")[0]
        for line in text.split("### Pass rate by rank position")[1].split("###")[0].splitlines()
        if line.startswith("| ")
    ]
    assert rank_rows == ["| RANK", "| 0", "| 1", "| mid", "| last"]
    assert "| STOP | 1 | 0 | 0 | 1 |" in text
    assert "Decided as expected: 5/8 (62%, 31–86)." in text
    # expected RESTART or CONTINUE 6 times, never STOP; expected STOP twice, once RESTART
    assert "a job killed that would have resumed): 0/6 (0%, 0–39)." in text
    assert "RESTART where STOP was right: a restart loop): 1/2 (50%, 9–91)." in text
    assert "watchdog did not fire before the job ended — lower the heartbeat timeout" in text
    assert "rank detected but treated as collateral" in text


def test_section_for_nothing_scored() -> None:
    text = aggregate_section(
        [make_result(G.GPU_SLEEP, 1, broken="run_invalid", reason="no marker")]
    )
    assert "No scored experiment with both an expected and a decided restart decision." in text
    assert "No scored experiment with a log analysis." in text
    assert "No known failure-mode pattern found." in text
