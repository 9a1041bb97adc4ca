"""LLM plumbing over real HTTP: key resolution, structured answers, retries, errors without keys."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel, SecretStr
from support.openai_server import OpenAIServer, Reply

from pytest_faultloop.analyzers.llm_client import (
    LlmEndpoint,
    LlmError,
    TokenCount,
    ask_structured,
    resolve_api_key,
    shown_url,
)
from pytest_faultloop.models.errors import ConfigError

SECRET = "sk-test-0123456789-SECRET"


class Answer(BaseModel):
    label: Literal["true", "false"]


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as server:
        yield server


def endpoint(server: OpenAIServer, **kwargs: float) -> LlmEndpoint:
    settings = {"timeout": 5.0, "retries": 2, "backoff": 0.01, **kwargs}
    return LlmEndpoint("test-model", server.base_url, SecretStr(SECRET), **settings)


# --- keys ------------------------------------------------------------------------------------


def test_judge_key_order(tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("from-file\n")
    env = {
        "JUDGE_API_KEY": "judge",
        "JUDGE_API_KEY_FILE": str(key_file),
        "LLM_API_KEY": "llm",
        "LLM_API_KEY_FILE": str(key_file),
    }
    order = ["judge", "from-file", "llm", "from-file"]
    for name, want in zip(list(env), order, strict=True):
        assert resolve_api_key("judge", env, home=tmp_path).get_secret_value() == want
        del env[name]
    (tmp_path / ".llm_api_key").write_text("home\n")
    assert resolve_api_key("judge", env, home=tmp_path).get_secret_value() == "home"


def test_analyzer_key_ignores_judge_keys(tmp_path: Path) -> None:
    env = {"JUDGE_API_KEY": "judge", "LLM_API_KEY": "llm"}
    assert resolve_api_key("analyzer", env, home=tmp_path).get_secret_value() == "llm"
    with pytest.raises(ConfigError, match="set one of LLM_API_KEY, LLM_API_KEY_FILE or write"):
        resolve_api_key("analyzer", {"JUDGE_API_KEY": "judge"}, home=tmp_path)


def test_broken_key_file_setting_is_reported_not_skipped(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"LLM_API_KEY_FILE=.*absent: cannot read the API key file"
    ):
        resolve_api_key("judge", {"LLM_API_KEY_FILE": str(tmp_path / "absent")}, home=tmp_path)
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(ConfigError, match="the API key file is empty"):
        resolve_api_key("judge", {"JUDGE_API_KEY_FILE": str(tmp_path / "empty")}, home=tmp_path)


def test_key_is_not_in_reprs(server: OpenAIServer) -> None:
    ep = endpoint(server)
    assert SECRET not in repr(ep) and SECRET not in str(ep)
    assert SECRET not in repr(ep.chat_model())


# --- structured answers over HTTP ------------------------------------------------------------


def test_good_answer_sends_key_only_in_the_authorization_header(
    server: OpenAIServer, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.DEBUG)
    server.script(Reply.answer({"label": "true"}))
    assert ask_structured(endpoint(server), "system", "user", Answer) == Answer(label="true")
    (request,) = server.requests
    assert request.headers["authorization"] == f"Bearer {SECRET}"
    assert SECRET not in json.dumps(request.body)
    assert request.body["temperature"] == 0
    assert request.body["response_format"] == {"type": "json_object"}
    assert request.prompt == "system\nuser"
    out, err = capsys.readouterr()
    assert SECRET not in out + err + caplog.text


def test_reasoning_and_code_fences_around_json_are_tolerated(server: OpenAIServer) -> None:
    server.script(
        Reply.answer('<think>{"label": "maybe"}</think>\n```json\n{"label": "false"}\n```')
    )
    assert ask_structured(endpoint(server), "s", "u", Answer).label == "false"


@pytest.mark.parametrize(
    "failure",
    [
        Reply.answer("this is not JSON"),
        Reply.error(500),
        Reply.error(429),
        Reply.answer({"label": "maybe"}),
    ],
    ids=["malformed", "http500", "http429", "invalid-label"],
)
def test_transient_failures_are_retried(server: OpenAIServer, failure: Reply) -> None:
    server.script(failure, Reply.answer({"label": "true"}))
    assert ask_structured(endpoint(server), "s", "u", Answer).label == "true"
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    ("failure", "reason"),
    [
        (Reply.answer("this is not JSON"), "malformed JSON: this is not JSON (after 3 attempts)"),
        (Reply.error(500), "HTTP 500: scripted failure (after 3 attempts)"),
        (
            Reply.answer({"label": "maybe"}),
            "invalid answer: label: Input should be 'true' or 'false' (got 'maybe') "
            "(after 3 attempts)",
        ),
    ],
)
def test_persistent_failures_raise_a_short_reason(
    server: OpenAIServer, failure: Reply, reason: str
) -> None:
    server.script(failure, failure, failure)
    with pytest.raises(LlmError) as error:
        ask_structured(endpoint(server), "s", "u", Answer)
    assert error.value.reason == reason
    assert server.unused == 0


def test_timeout_is_retried_then_reported(server: OpenAIServer) -> None:
    server.script(
        Reply.answer({"label": "true"}, delay=3), Reply.answer({"label": "true"}, delay=3)
    )
    with pytest.raises(LlmError, match=r"^timeout \(after 2 attempts\)$") as caught:
        ask_structured(endpoint(server, timeout=0.3, retries=1), "s", "u", Answer)
    assert caught.value.timed_out


def test_usage_counts_every_attempt_and_its_reported_tokens(server: OpenAIServer) -> None:
    server.script(Reply.answer("not json"), Reply.answer({"label": "true"}))
    usage = TokenCount()
    ask_structured(endpoint(server), "s", "u", Answer, usage=usage)
    assert (usage.calls, usage.tokens_in, usage.tokens_out) == (2, 2, 2)
    server.script(*[Reply.answer("not json")] * 3)
    with pytest.raises(LlmError) as caught:
        ask_structured(endpoint(server), "s", "u", Answer, usage=usage)
    assert not caught.value.timed_out
    assert usage.usage().calls == 5


def test_client_errors_fail_at_once(server: OpenAIServer) -> None:
    server.script(Reply.error(401), Reply.answer({"label": "true"}))
    with pytest.raises(LlmError, match=r"^HTTP 401: scripted failure$"):
        ask_structured(endpoint(server), "s", "u", Answer)
    assert len(server.requests) == 1


def test_check_can_reject_an_answer(server: OpenAIServer) -> None:
    server.script(Reply.answer({"label": "false"}), Reply.answer({"label": "true"}))
    answer = ask_structured(
        endpoint(server),
        "s",
        "u",
        Answer,
        check=lambda a: None if a.label == "true" else "want true",
    )
    assert answer.label == "true"


def test_an_echoed_key_is_scrubbed_from_the_reason(server: OpenAIServer) -> None:
    server.script(Reply.answer(f"bad key {SECRET}"), Reply.answer(f"bad key {SECRET}"))
    with pytest.raises(LlmError) as error:
        ask_structured(endpoint(server, retries=1), "s", "u", Answer)
    assert SECRET not in str(error.value) and "***" in error.value.reason


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://user:pw@host:8000/v1", "http://user:***@host:8000/v1"),
        ("https://sk-bare-token@host/v1", "https://***@host/v1"),
        ("http://h/v1?api-version=2&api-key=k&access_token=t", "http://h/v1?api-version=2&api-key=***&access_token=***"),
        ("https://integrate.api.nvidia.com/v1", "https://integrate.api.nvidia.com/v1"),
    ],
)  # fmt: skip
def test_a_url_is_shown_without_its_secrets(url: str, shown: str) -> None:
    assert shown_url(url) == shown


def test_an_endpoint_urls_credentials_are_sent_but_never_shown(
    server: OpenAIServer, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    """A URL's userinfo becomes its Basic Authorization header, as the HTTP client sends it; the
    password is in no repr, no log line (the client logs its requests' URLs) and no reason,
    also where the server echoes the URL."""
    caplog.set_level(logging.DEBUG)
    password = "pw-SECRET-5150"
    url = server.base_url.replace("http://", f"http://alice:{password}@")
    server.script(*[Reply.answer(f"no such model at {url}")] * 2)
    ep = LlmEndpoint("m", url, SecretStr(SECRET), timeout=5, retries=1, backoff=0.01)
    with pytest.raises(LlmError) as error:
        ask_structured(ep, "s", "u", Answer)
    assert "alice:***@127.0.0.1" in error.value.reason
    basic = base64.b64encode(f"alice:{password}".encode()).decode()
    assert [r.headers["authorization"] for r in server.requests] == [f"Basic {basic}"] * 2
    out, err = capsys.readouterr()
    shown = [str(error.value), repr(ep), repr(ep.chat_model()), out, err, caplog.text]
    assert [text for text in shown if password in text] == []


def test_unreachable_endpoint_is_a_connection_error() -> None:
    ep = LlmEndpoint("m", "http://127.0.0.1:9/v1", SecretStr(SECRET), timeout=1, retries=0)
    with pytest.raises(LlmError, match=r"^connection failed"):
        ask_structured(ep, "s", "u", Answer)
