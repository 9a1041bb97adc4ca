"""The LLM log analyzer over real HTTP: the prompt it sends, the analysis it returns, failures."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr
from support.openai_server import OpenAIServer, Reply

from pytest_faultloop.analyzers import AnalyzerError, analyze_log, analyze_log_llm
from pytest_faultloop.models import Decision, Usage
from pytest_faultloop.models.faults import Nature

SECRET = "sk-analyzer-SECRET-7"
LOG = """\
[rank0]: iteration        4/      10 | lm loss: 7.1
[rank1]: iteration        4/      10 | lm loss: 7.1
[rank1]: pytest_faultloop.inject: FAULT INJECTION: GPU_ERROR on rank 1 at iteration 5
[rank1]: RuntimeError: CUDA error: uncorrectable ECC error encountered
[rank0]: [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=42, \
OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600001 milliseconds \
before timing out.
"""
ANSWER = {
    "decision": "stop",
    "explanation": "Rank 1 hit an uncorrectable ECC error; rank 0 timed out waiting for it.",
    "primary": [
        {"rank": "1", "node": 0, "nature": "GPU_ERROR", "summary": "uncorrectable ECC error"}
    ],
    "secondary": [{"rank": 0, "node": None, "nature": "hang", "summary": "NCCL watchdog timeout"}],
    "checkpoint_saved": False,
}


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as server:
        yield server


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "1234.0.1.main_workload.log"
    path.write_text(LOG)
    return path


def analyze(server: OpenAIServer, log: Path, **kwargs):
    return analyze_log_llm(
        log,
        model="log-model",
        base_url=server.base_url,
        api_key=SecretStr(SECRET),
        evidence=analyze_log(log),
        timeout=5,
        retries=2,
        backoff=0.01,
        **kwargs,
    )


def test_answer_becomes_a_log_analysis(server: OpenAIServer, log: Path) -> None:
    server.script(Reply.answer(ANSWER))
    analysis = analyze(server, log)
    assert analysis.analyzer == "llm:log-model"
    assert analysis.decision is Decision.STOP
    assert analysis.decision_text == "STOP - DONT RESTART IMMEDIATE"
    assert [(i.rank, i.node, i.nature) for i in analysis.primary] == [(1, "0", Nature.GPU_ERROR)]
    assert [(i.rank, i.nature) for i in analysis.secondary] == [(0, Nature.HANG)]
    assert analysis.attribution_text.startswith("Primary issues: [rank 1 (node 0): gpu_error")
    assert analysis.checkpoint_saved is False
    assert analysis.evidence == analyze_log(log).evidence
    assert analysis.usage == Usage(calls=1, tokens_in=1, tokens_out=1)


def test_prompt_holds_the_filtered_tail_and_the_evidence_never_the_marker(
    server: OpenAIServer, log: Path
) -> None:
    server.script(Reply.answer(ANSWER))
    analyze(server, log)
    (request,) = server.requests
    prompt = request.prompt
    assert "uncorrectable ECC error encountered" in prompt
    assert "Watchdog caught collective operation timeout" in prompt
    assert "Findings of the rule-based analyzer (builtin)" in prompt
    assert "FAULT INJECTION" not in prompt and "pytest_faultloop.inject" not in prompt
    assert SECRET not in prompt and request.headers["authorization"] == f"Bearer {SECRET}"


def test_invalid_nature_is_retried(server: OpenAIServer, log: Path) -> None:
    bad = {**ANSWER, "primary": [{"rank": 1, "nature": "cosmic ray"}]}
    server.script(Reply.answer(bad), Reply.answer(ANSWER))
    assert analyze(server, log).primary[0].nature is Nature.GPU_ERROR
    assert len(server.requests) == 2


def test_persistent_failure_raises_analyzer_error_without_the_key(
    server: OpenAIServer, log: Path
) -> None:
    server.script(Reply.error(500), Reply.answer("{not json"), Reply.error(502))
    with pytest.raises(AnalyzerError) as error:
        analyze(server, log)
    assert (
        str(error.value)
        == "LLM log analyzer (log-model): HTTP 502: scripted failure (after 3 attempts)"
    )
    assert SECRET not in str(error.value)


def test_empty_or_missing_log_is_no_logs_without_a_call(
    server: OpenAIServer, tmp_path: Path
) -> None:
    empty = tmp_path / "empty.log"
    empty.write_text("[rank1]: FAULT INJECTION: armed\n")
    for path in (empty, tmp_path / "absent.log"):
        analysis = analyze_log_llm(
            path, model="m", base_url=server.base_url, api_key=SecretStr(SECRET), evidence=None
        )
        assert (analysis.decision, analysis.decision_text) == (Decision.UNKNOWN, "NO LOGS")
    assert server.requests == []
