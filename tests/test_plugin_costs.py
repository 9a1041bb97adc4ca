"""Each experiment's analysis costs through the plugin: seconds, timeouts, LLM tokens, report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.fake_stages import make_project
from support.openai_server import OpenAIServer, Reply
from support.sessions import only_session

POOL = {"p": "SIGKILL:1:5:2"}
JUDGE_ANSWER = {
    "restart_correct": "true",
    "rank_primary": "true",
    "rank_any": "true",
    "fault_described": "true",
    "fr_rank_correct": "rank",
    "notes": "fine",
}
LOG_ANSWER = {
    "decision": "RESTART",
    "explanation": "rank 1 was killed",
    "primary": [{"rank": 1, "nature": "signal", "summary": "SIGKILL"}],
}


def stored(base: Path) -> tuple[dict[str, Any], str]:
    """The experiment's stored costs and the session report."""
    session = only_session(base)
    result = json.loads((session / "n2_SIGKILL_r1_i5" / "result.json").read_text())
    return result["costs"], (session / "experiments_report.md").read_text()


def test_each_stage_is_timed_and_reported(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = make_project(pytester, monkeypatch, pools=POOL)
    monkeypatch.setenv("FAKE_LOG_SECONDS", "0.2")
    pytester.runpytest("experiments/", "--faultloop-pool=p").assert_outcomes(passed=5)
    costs, report = stored(base)
    assert 0.2 <= costs["log_s"] < 5
    assert 0 <= costs["fr_s"] < 0.2 and 0 <= costs["judge_s"] < 0.2
    assert costs["timed_out"] == [] and costs["log_usage"] is None
    assert "## Cost of the analyses" in report
    assert "| log analysis | 1 | 0.2" in report


def test_an_external_analyzer_timeout_is_counted_apart(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = make_project(pytester, monkeypatch, pools=POOL)
    monkeypatch.setenv("FAKE_LOG_ANALYZER", "off")
    result = pytester.runpytest(
        "experiments/",
        "--faultloop-pool=p",
        "--faultloop-log-analyzer",
        "cmd:sleep 5 # {log}",
        "--faultloop-analyzer-timeout",
        "0.5",
    )
    result.assert_outcomes(errors=5)
    result.stdout.fnmatch_lines(["*analysis_failed: AnalyzerError: *timed out after 0.5 s*"])
    costs, report = stored(base)
    assert costs["timed_out"] == ["log"]
    assert 0.5 <= costs["log_s"] < 5 and costs["fr_s"] is None and costs["judge_s"] is None
    assert "| log analysis | 1 | 0.5" in report and "| 1 | — |" in report


def test_llm_tokens_of_the_log_analyzer_and_the_judge_arrive_in_costs(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = make_project(pytester, monkeypatch, pools=POOL)
    monkeypatch.setenv("FAKE_LOG_ANALYZER", "off")
    monkeypatch.setenv("FAKE_JUDGE", "off")
    monkeypatch.setenv("LLM_API_KEY", "sk-local-analyzer")
    monkeypatch.setenv("JUDGE_API_KEY", "sk-local-judge")
    with OpenAIServer() as server:
        server.script(Reply.answer(LOG_ANSWER), Reply.answer(JUDGE_ANSWER))
        result = pytester.runpytest(
            "experiments/",
            "--faultloop-pool=p",
            "--faultloop-log-analyzer=llm",
            f"--faultloop-llm-base-url={server.base_url}",
            "--faultloop-judge=llm",
            f"--faultloop-judge-base-url={server.base_url}",
        )
    assert result.parseoutcomes().get("error", 0) == 0
    assert len(server.requests) == 2
    costs, report = stored(base)
    one = {"calls": 1, "tokens_in": 1, "tokens_out": 1}
    assert costs["log_usage"] == one and costs["judge_usage"] == one
    assert costs["timed_out"] == []
    assert "1 / 1 (median 1 / 1; 1 calls)" in report
