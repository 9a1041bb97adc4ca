"""The LLM and hybrid judges over real HTTP against a local OpenAI-compatible server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pydantic import SecretStr
from support.judge_cases import case, issue
from support.openai_server import OpenAIServer, Reply

from pytest_faultloop.models import Decision, Usage
from pytest_faultloop.scoring.judges import JudgeError
from pytest_faultloop.scoring.judges.deterministic import DeterministicJudge
from pytest_faultloop.scoring.judges.hybrid import HybridJudge
from pytest_faultloop.scoring.judges.llm import LlmJudge
from pytest_faultloop.scoring.restart_policy import load_policy

SECRET = "sk-judge-key-SECRET-42"
POLICY = load_policy()
GOOD = {
    "restart_correct": "true",
    "rank_primary": "true",
    "rank_any": "true",
    "fault_described": "true",
    "fr_rank_correct": "rank",
    "notes": "Correct on all dimensions.",
}


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as server:
        yield server


def llm_judge(server: OpenAIServer, timeout: float = 5.0, retries: int = 2) -> LlmJudge:
    return LlmJudge(
        POLICY, "judge-model", server.base_url, SecretStr(SECRET), timeout, retries, backoff=0.01
    )


def test_good_answer_becomes_the_verdict(server: OpenAIServer) -> None:
    server.script(Reply.answer(GOOD))
    verdict = llm_judge(server).judge(case("GPU_SLEEP", rank=5))
    assert verdict.model_dump(include=set(GOOD)) == GOOD
    assert verdict.judge == "llm" and verdict.expected_decision is Decision.RESTART
    assert verdict.extra == {"model": "judge-model"}


def test_prompt_holds_what_the_seed_gives_its_judge(server: OpenAIServer) -> None:
    server.script(Reply.answer(GOOD))
    llm_judge(server).judge(
        case(
            "GPU_ERROR", rank=5, decision=Decision.STOP, attribution_text="Primary issues: [rank 5]"
        )
    )
    prompt = server.requests[0].prompt
    for expected in [
        "fault_type: GPU_ERROR",
        "rank: 5",
        "node of the rank: 1 (ranks 4-7)",
        "segment of the rank: 0 (ranks 0-31)",
        "iter: 5",
        "nodes: 2 x 4 GPUs = 8 ranks",
        "GPUS_PER_NODE: 4",
        "FR_SEGMENT_SIZE: 32",
        "STOP - hardware GPU error, may be persistent",
        "STOP - DONT RESTART IMMEDIATE\n",
        "Attribution: Primary issues: [rank 5]",
        '"suspects":[5]',
        "PGID | Process Group Desc | Op Type | Size | Dtype | Missing Ranks",
        "Watchdog caught collective operation timeout",
    ]:
        assert expected in prompt
    assert SECRET not in prompt
    assert server.requests[0].headers["authorization"] == f"Bearer {SECRET}"


def test_fr_label_is_rechecked_against_the_suspects(server: OpenAIServer) -> None:
    server.script(Reply.answer({**GOOD, "fr_rank_correct": "rank"}))
    verdict = llm_judge(server).judge(case(rank=1, suspects=[0, 1]))
    assert verdict.fr_rank_correct == "node"
    assert verdict.extra["llm_fr_rank_correct"] == "rank"


def test_booleans_and_case_variants_are_read_as_labels(server: OpenAIServer) -> None:
    server.script(
        Reply.answer(
            {**GOOD, "restart_correct": False, "rank_any": True, "rank_primary": "Partial"}
        )
    )
    verdict = llm_judge(server).judge(case())
    assert (verdict.restart_correct, verdict.rank_any, verdict.rank_primary) == (
        "false",
        "true",
        "partial",
    )


def test_na_restart_where_a_decision_is_expected_is_retried(server: OpenAIServer) -> None:
    server.script(Reply.answer({**GOOD, "restart_correct": "N/A"}), Reply.answer(GOOD))
    verdict = llm_judge(server).judge(case())
    assert verdict.restart_correct == "true"
    assert len(server.requests) == 2
    assert verdict.usage == Usage(calls=2, tokens_in=2, tokens_out=2)


@pytest.mark.parametrize(
    ("failure", "reason"),
    [
        (Reply.answer("{'restart_correct': true"), "malformed JSON"),
        (Reply.error(500), "HTTP 500: scripted failure"),
        (
            Reply.answer({**GOOD, "rank_primary": "mostly"}),
            "invalid answer: rank_primary: Input should be",
        ),
    ],
    ids=["malformed", "http500", "invalid-label"],
)
def test_persistent_failures_raise_judge_error(
    server: OpenAIServer, failure: Reply, reason: str
) -> None:
    server.script(failure, failure, failure)
    with pytest.raises(JudgeError) as error:
        llm_judge(server).judge(case())
    assert error.value.reason.startswith(f"LLM judge (judge-model): {reason}")
    assert error.value.reason.endswith("(after 3 attempts)")
    assert SECRET not in str(error.value)


def test_timeout_raises_judge_error(server: OpenAIServer) -> None:
    server.script(Reply.answer(GOOD, delay=3), Reply.answer(GOOD, delay=3))
    with pytest.raises(JudgeError, match=r"timeout \(after 2 attempts\)") as error:
        llm_judge(server, timeout=0.3, retries=1).judge(case())
    assert error.value.timed_out


def test_transient_failures_then_a_good_answer_pass(server: OpenAIServer) -> None:
    server.script(Reply.error(503), Reply.answer("not json"), Reply.answer(GOOD))
    assert llm_judge(server).judge(case()).notes == "Correct on all dimensions."


def test_key_never_appears_in_outputs(
    server: OpenAIServer, capsys: pytest.CaptureFixture[str]
) -> None:
    server.script(Reply.answer(GOOD))
    judge = llm_judge(server)
    verdict = judge.judge(case())
    out, err = capsys.readouterr()
    assert all(SECRET not in text for text in (verdict.model_dump_json(), repr(judge), out, err))


def test_hybrid_takes_rules_and_llm_dimensions_and_reports_agreement(server: OpenAIServer) -> None:
    llm_says = {
        "restart_correct": "true",  # rules: false (the STOP-substring bug case)
        "rank_primary": "partial",  # rules: false
        "rank_any": "true",
        "fault_described": "true",
        "fr_rank_correct": "rank",
        "notes": "Rank 1 located by its node only.",
    }
    server.script(Reply.answer(llm_says))
    hybrid = HybridJudge(DeterministicJudge(POLICY), llm_judge(server))
    the_case = case(
        "GPU_SLEEP",
        rank=1,
        decision=Decision.RESTART,
        decision_text="STOP - DONT RESTART IMMEDIATE",
        primary=[issue(0, "hang")],
        secondary=[issue(1)],
    )
    verdict = hybrid.judge(the_case)
    assert verdict.judge == "hybrid"
    assert (verdict.restart_correct, verdict.rank_any, verdict.fr_rank_correct) == (
        "false",
        "true",
        "rank",
    )
    assert (verdict.rank_primary, verdict.fault_described) == ("partial", "true")
    assert verdict.notes == "Rank 1 located by its node only."
    assert verdict.extra["agreement"] == "3/5"
    assert verdict.extra["disagreed"] == "restart_correct,rank_primary"
    assert verdict.extra["deterministic.rank_primary"] == "false"
    assert verdict.extra["llm.restart_correct"] == "true"
    assert verdict.usage == Usage(calls=1, tokens_in=1, tokens_out=1)


def test_hybrid_fails_when_the_llm_fails(server: OpenAIServer) -> None:
    server.script(Reply.error(500))
    hybrid = HybridJudge(DeterministicJudge(POLICY), llm_judge(server, retries=0))
    with pytest.raises(JudgeError, match="HTTP 500"):
        hybrid.judge(case())
