"""The hybrid judge wired through the plugin, over real HTTP to a local OpenAI-compatible server."""

from __future__ import annotations

import pytest
from support.fake_stages import make_project
from support.openai_server import OpenAIServer, Reply

ANSWER = {
    "restart_correct": "true",
    "rank_primary": "true",
    "rank_any": "true",
    "fault_described": "partial",
    "fr_rank_correct": "rank",
    "notes": "llm says fine",
}


def test_hybrid_judge_scores_through_the_endpoint_and_reports_agreement(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester, monkeypatch, pools={"p": "SIGKILL:1:5:2"})
    monkeypatch.setenv("FAKE_JUDGE", "off")
    monkeypatch.setenv("JUDGE_API_KEY", "sk-local-test-key")
    with OpenAIServer() as server:
        server.script(Reply.answer(ANSWER))
        result = pytester.runpytest(
            "experiments/",
            "--faultloop-pool=p",
            "--faultloop-judge=hybrid",
            f"--faultloop-judge-base-url={server.base_url}",
            "--faultloop-judge-model=local-judge",
        )
    assert len(server.requests) == 1
    assert server.requests[0].body["model"] == "local-judge"
    assert "fault_type: SIGKILL" in server.requests[0].prompt
    outcomes = result.parseoutcomes()
    assert outcomes.get("error", 0) == 0
    result.stdout.fnmatch_lines(["faultloop: judges agreed on * of 5 labels*"])
    assert "sk-local-test-key" not in result.stdout.str()


def test_judge_endpoint_failure_errors_the_items(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester, monkeypatch, pools={"p": "SIGKILL:1:5:2"})
    monkeypatch.setenv("FAKE_JUDGE", "off")
    monkeypatch.setenv("JUDGE_API_KEY", "sk-local-test-key")
    with OpenAIServer() as server:
        server.script(*[Reply.error(500)] * 4)
        result = pytester.runpytest(
            "experiments/",
            "--faultloop-pool=p",
            "--faultloop-judge=llm",
            f"--faultloop-judge-base-url={server.base_url}",
            "-o",
            "faultloop_analyzer_timeout=5",
        )
    result.assert_outcomes(errors=5)
    result.stdout.fnmatch_lines(["*SIGKILL:1:5:2: judge_failed: *500*"])
