"""The API keys of the LLM judge and of the LLM log analyzer go in the Authorization header and
nowhere else, also when the endpoint fails (HTTP 500, a timeout, a malformed answer): not in
stdout or stderr, not in any file the run writes (the session, the HTML and JUnit reports)."""

from __future__ import annotations

import base64
from types import SimpleNamespace

import pytest
from support.fake_stages import make_project
from support.openai_server import OpenAIServer, Reply

from pytest_faultloop.analyzers import llm_client

JUDGE_KEY = "sk-judge-SECRET-5150"
ANALYZER_KEY = "sk-analyzer-SECRET-8086"
TIMEOUT_S = 1.5

FAILURES = {
    "http500": (Reply.error(500), "HTTP 500: scripted failure"),
    "timeout": (Reply.answer({}, delay=TIMEOUT_S + 3), "timeout"),
    "malformed": (Reply.answer("{not json"), "malformed JSON: {not json"),
}
STAGES = {
    "judge": (
        "judge_failed",
        "FAKE_JUDGE",
        ["--faultloop-judge=llm", "--faultloop-judge-base-url"],
    ),
    "log_analyzer": (
        "analysis_failed",
        "FAKE_LOG_ANALYZER",
        ["--faultloop-log-analyzer=llm", "--faultloop-llm-base-url"],
    ),
}


@pytest.mark.parametrize("failure", list(FAILURES))
@pytest.mark.parametrize("stage", list(STAGES))
def test_the_keys_stay_secret_when_the_llm_fails(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, stage: str, failure: str
) -> None:
    broken, fake, (choose, url_option) = STAGES[stage]
    reply, reason = FAILURES[failure]
    make_project(pytester, monkeypatch, pools={"p": "SIGKILL:1:5:2"})
    monkeypatch.setenv(fake, "off")  # the plugin's own LLM stage, not the fake one
    monkeypatch.setenv("JUDGE_API_KEY", JUDGE_KEY)
    monkeypatch.setenv("LLM_API_KEY", ANALYZER_KEY)
    monkeypatch.setattr(llm_client, "time", SimpleNamespace(sleep=lambda _: None))  # no backoff
    with OpenAIServer() as server:
        server.script(*[reply] * 4)
        result = pytester.runpytest(
            "experiments/",
            "--faultloop-pool=p",
            choose,
            f"{url_option}={server.base_url}",
            "-o",
            f"faultloop_analyzer_timeout={TIMEOUT_S}",
            "--html=report.html",
            "--junitxml=report.xml",
        )
    result.assert_outcomes(errors=5)
    result.stdout.fnmatch_lines([f"*SIGKILL:1:5:2: {broken}: *{reason}* (after 4 attempts)"])
    key = JUDGE_KEY if stage == "judge" else ANALYZER_KEY
    assert [r.headers["authorization"] for r in server.requests] == [f"Bearer {key}"] * 4
    written = {p: p.read_bytes() for p in pytester.path.rglob("*") if p.is_file()}
    assert {"report.html", "report.xml", "result.json"} <= {p.name for p in written}
    for secret in (JUDGE_KEY, ANALYZER_KEY):
        assert secret not in result.stdout.str() + result.stderr.str()
        assert [p for p, data in written.items() if secret.encode() in data] == []


@pytest.mark.parametrize("stage", list(STAGES))
def test_an_endpoint_urls_credentials_stay_secret(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, stage: str
) -> None:
    """``http://user:password@host/v1``: the run goes past the pre-flight (which asks without the
    credentials), the endpoint gets them as a Basic Authorization header, and the password is
    nowhere: not in the output (logs at DEBUG included), not in any file the run writes."""
    broken, fake, (choose, url_option) = STAGES[stage]
    password = "pw-SECRET-1729"
    make_project(pytester, monkeypatch, pools={"p": "SIGKILL:1:5:2"})
    monkeypatch.setenv(fake, "off")
    monkeypatch.setenv("JUDGE_API_KEY", JUDGE_KEY)
    monkeypatch.setenv("LLM_API_KEY", ANALYZER_KEY)
    monkeypatch.setattr(llm_client, "time", SimpleNamespace(sleep=lambda _: None))
    with OpenAIServer() as server:
        server.script(*[Reply.error(500)] * 4)
        url = server.base_url.replace("http://", f"http://alice:{password}@")
        result = pytester.runpytest(
            "experiments/",
            "--faultloop-pool=p",
            choose,
            f"{url_option}={url}",
            "--log-level=DEBUG",
            "--html=report.html",
            "--junitxml=report.xml",
        )
    result.assert_outcomes(errors=5)
    result.stdout.fnmatch_lines([f"*SIGKILL:1:5:2: {broken}: *HTTP 500* (after 4 attempts)"])
    assert {r.headers["authorization"] for r in server.requests} == {
        "Basic " + base64.b64encode(f"alice:{password}".encode()).decode()
    }
    written = {p: p.read_bytes() for p in pytester.path.rglob("*") if p.is_file()}
    assert {"report.html", "report.xml", "result.json"} <= {p.name for p in written}
    assert password not in result.stdout.str() + result.stderr.str()
    assert [p for p, data in written.items() if password.encode() in data] == []
