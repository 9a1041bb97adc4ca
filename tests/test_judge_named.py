"""What the analyzers named beside what was expected: failure messages, sections, HTML."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from support.judge_cases import case, issue

from pytest_faultloop.models import Decision, ExperimentResult
from pytest_faultloop.plugin.fixtures import result_text
from pytest_faultloop.plugin.items import section_text
from pytest_faultloop.report.html import named_html
from pytest_faultloop.scoring.dimensions import DIMENSIONS
from pytest_faultloop.scoring.judges import JudgeCase
from pytest_faultloop.scoring.judges.deterministic import DeterministicJudge
from pytest_faultloop.scoring.pass_rule import PassRule
from pytest_faultloop.scoring.restart_policy import load_policy

JUDGE = DeterministicJudge(load_policy())


def result_of(judge_case: JudgeCase) -> ExperimentResult:
    return ExperimentResult(
        experiment=judge_case.experiment,
        log_analysis=judge_case.log_analysis,
        fr_analysis=judge_case.fr_analysis,
        verdict=JUDGE.judge(judge_case),
    )


def lines(judge_case: JudgeCase) -> dict[str, str]:
    result = result_of(judge_case)
    return {d.name: d.named_line(result) for d in DIMENSIONS}


def test_a_wrong_rank_reads_beside_the_injected_one() -> None:
    named = lines(case(primary=[issue(3, "crash")], secondary=[issue(1)], suspects=[5]))
    assert named == {
        "restart_correct": "decided RESTART IMMEDIATE (RESTART); expected RESTART",
        "rank_primary": "named primary rank 3, rank 1 elsewhere; expected rank 1",
        "rank_any": "named ranks 1, 3; expected rank 1",
        "fault_described": "described crash (rank 3); expected hang (partial: gpu_error, network)",
        "fr_rank_correct": "FR named suspect 5 (8 dumps read); expected rank 1",
    }


def test_an_analyzer_that_named_nothing_says_so() -> None:
    named = lines(case(primary=[], suspects=[], dumps_read=0, decision_text="UNKNOWN"))
    assert named["rank_primary"] == "named no rank; expected rank 1"
    assert named["rank_any"] == "named no rank; expected rank 1"
    assert named["fault_described"].startswith("described nothing (no primary issue); expected")
    assert named["fr_rank_correct"] == "FR read no dump; expected rank 1"
    assert named["restart_correct"] == "decided UNKNOWN; expected RESTART"


def test_several_ranks_and_lost_nodes() -> None:
    both = lines(case("GPU_ERROR", ranks="1+2", decision=Decision.STOP, primary=[issue(1)]))
    assert both["rank_primary"] == "named primary rank 1; expected ranks 1 and 2"
    assert (
        both["fr_rank_correct"]
        == "FR named suspect 1 (8 dumps read); expected suspects within ranks 1-2"
    )
    lost = lines(case("NODE_KILL", 1, primary=[issue(None, "crash", node="node1")]))
    assert lost["rank_primary"] == "named primary node 1; expected node 0 (ranks 0-3)"
    two = lines(
        case("NODE_KILL", ranks="1+9", nodes=3, attribution_text="Primary issues: [ranks 0-3]")
    )
    assert two["rank_primary"] == (
        "named primary rank 1 and ranks 0-3; expected node 0 (ranks 0-3) and node 2 (ranks 8-11)"
    )


def test_the_failure_message_names_what_was_named_before_the_notes() -> None:
    result = result_of(case(primary=[issue(3)], secondary=[]))
    message = PassRule().failure_message(result, "rank_primary").splitlines()
    assert message == [
        "GPU_SLEEP:1:5:2 rank_primary = false (expected true)",
        "named primary rank 3; expected rank 1",
        "judge notes: Main gap: rank 1 not named (the analyzer named primary rank 3).",
    ]


def test_the_section_has_no_blank_line_and_shows_the_issues_compactly() -> None:
    bare = result_of(case(primary=[], secondary=[]))
    text = section_text(bare, "rank_primary", "false", ["rank_primary"])
    assert "" not in text.splitlines()
    assert text.splitlines()[:3] == [
        "rank_primary: false",
        "named no rank; expected rank 1",
        "log analyzer (builtin): RESTART IMMEDIATE",
    ]
    issues = case(
        primary=[issue(1, summary="stuck in\nallreduce")],
        secondary=[issue(2, "exception", node="node0")],
        attribution_text="rank 1 hung first",
    )
    shown = section_text(result_of(issues), "rank_any", "true", ["rank_any"]).splitlines()
    assert shown[3:5] == [
        "  primary: rank 1 hang (stuck in allreduce) | secondary: rank 2 on node node0 exception",
        "  rank 1 hung first",
    ]


def test_the_html_extra_has_one_row_per_dimension() -> None:
    result = result_of(case(primary=[issue(3, "crash")], suspects=[5]))
    rows = ET.fromstring(named_html(result)).findall("tr")
    assert [c.text for c in rows[0]] == ["dimension", "the analyzers said", "expected"]
    assert [c.text for c in rows[2]] == ["rank_primary", "named primary rank 3", "rank 1"]
    assert len(rows) == 6
    assert named_html(result.model_copy(update={"log_analysis": None})) == ""


def test_a_python_tests_section_names_what_each_failing_dimension_named() -> None:
    result = result_of(case(primary=[issue(3)], secondary=[]))
    text = result_text(result, PassRule()).splitlines()
    assert text[0].startswith("verdict: restart_correct=true rank_primary=false")
    assert text[1:4] == [
        "named primary rank 3; expected rank 1",
        "named rank 3; expected rank 1",
        "log analyzer (builtin): RESTART IMMEDIATE",
    ]
