"""Shared LLM plumbing: API keys, the chat client, structured answers with retries.

Keys travel as ``SecretStr`` and only in the ``Authorization`` header: never printed, logged,
in a repr or in an error message (reasons are scrubbed of the key before they are raised). So
do an endpoint URL's own credentials (``http://user:secret@host/v1``): wherever a URL is shown
it is :func:`shown_url`, and the client gets the URL without them (their Basic
``Authorization`` header instead, the request the HTTP client would make of them).
langchain and openai are imported on first use: they take seconds to import, and most runs
never call an LLM.
"""

from __future__ import annotations

import base64
import json
import os
import re
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import BaseModel, SecretStr, ValidationError

from pytest_faultloop.models import Usage
from pytest_faultloop.models.errors import ConfigError, FaultloopError

if TYPE_CHECKING:
    import openai
    from langchain_core.messages import BaseMessage
    from langchain_core.runnables import Runnable
    from langchain_openai import ChatOpenAI

Answer = TypeVar("Answer", bound=BaseModel)
KeyPurpose = Literal["judge", "analyzer"]

KEY_SOURCES: dict[KeyPurpose, tuple[str, ...]] = {
    "judge": ("JUDGE_API_KEY", "JUDGE_API_KEY_FILE", "LLM_API_KEY", "LLM_API_KEY_FILE"),
    "analyzer": ("LLM_API_KEY", "LLM_API_KEY_FILE"),
}
"""Environment variables tried in order; ``~/.llm_api_key`` comes last for both."""
HOME_KEY_FILE = ".llm_api_key"
MASK = "***"
_SECRET_PARAMETER = re.compile(r"key|token|secret|pass|pwd|sig|auth|credential", re.IGNORECASE)
"""A query parameter whose name says it carries a secret (``api-key``, ``access_token``, ``sig``)."""
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")


def shown_url(url: str) -> str:
    """``url`` as it may be printed: the password of its userinfo (a user alone, which may be
    a token, as a whole) and the values of secret-looking query parameters masked
    (``http://user:***@host/v1?api-key=***``)."""
    parts = urllib.parse.urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        user, has_password, _ = userinfo.partition(":")
        netloc = f"{user}:{MASK}@{host}" if has_password else f"{MASK}@{host}"
    query = "&".join(
        f"{name}={MASK}" if value and _SECRET_PARAMETER.search(name) else pair
        for pair in parts.query.split("&")
        for name, _, value in [pair.partition("=")]
    )
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc, query=query))


def shown_urls(text: str) -> str:
    """``text`` with every URL in it as :func:`shown_url` shows it."""
    return _URL.sub(lambda match: shown_url(match.group()), text)


def _url_secrets(url: str) -> list[str]:
    """What :func:`shown_url` masks in ``url``, as it may appear elsewhere (decoded too)."""
    parts = urllib.parse.urlsplit(url)
    userinfo = parts.netloc.rsplit("@", 1)[0] if "@" in parts.netloc else ""
    user, has_password, password = userinfo.partition(":")
    found = [password if has_password else user]
    found += [
        value
        for name, _, value in (pair.partition("=") for pair in parts.query.split("&"))
        if _SECRET_PARAMETER.search(name)
    ]
    return [text for raw in found if raw for text in {raw, urllib.parse.unquote(raw)}]


def without_credentials(url: str) -> tuple[str, str | None]:
    """``url`` without its userinfo, and the Basic ``Authorization`` header value that stands
    for it (None without one)."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, host = parts.netloc.rsplit("@", 1)
    user, _, password = (urllib.parse.unquote(p) for p in userinfo.partition(":"))
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return urllib.parse.urlunsplit(parts._replace(netloc=host)), f"Basic {token}"


class LlmError(FaultloopError):
    """An LLM call failed for good; ``reason`` is short and never holds the key.

    ``timed_out``: the last attempt timed out.
    """

    def __init__(self, reason: str, *, timed_out: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.timed_out = timed_out


@dataclass
class TokenCount:
    """A per-call accumulator of requests and reported tokens (not shared between threads)."""

    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0

    def add(self, raw: object) -> None:
        """Count the tokens of a raw reply's ``usage_metadata``, when the server gave them."""
        usage = getattr(raw, "usage_metadata", None) or {}
        self.tokens_in += int(usage.get("input_tokens", 0) or 0)
        self.tokens_out += int(usage.get("output_tokens", 0) or 0)

    def usage(self) -> Usage:
        return Usage(calls=self.calls, tokens_in=self.tokens_in, tokens_out=self.tokens_out)


def resolve_api_key(
    purpose: KeyPurpose, env: Mapping[str, str] | None = None, home: Path | None = None
) -> SecretStr:
    """The first key found among ``KEY_SOURCES[purpose]`` and then ``~/.llm_api_key``.

    A ``*_FILE`` variable that is set must name a readable, non-empty file: a broken setting
    is reported rather than skipped.
    """
    env = os.environ if env is None else env
    for name in KEY_SOURCES[purpose]:
        value = env.get(name, "").strip()
        if not value:
            continue
        if name.endswith("_FILE"):
            return _read_key_file(Path(value).expanduser(), f"{name}={value}")
        return SecretStr(value)
    default = (home or Path.home()) / HOME_KEY_FILE
    if default.is_file():
        return _read_key_file(default, str(default))
    tried = ", ".join(KEY_SOURCES[purpose])
    raise ConfigError(f"no API key for the LLM {purpose}: set one of {tried} or write {default}")


def _read_key_file(path: Path, setting: str) -> SecretStr:
    try:
        key = path.read_text().strip()
    except OSError as exc:
        raise ConfigError(f"{setting}: cannot read the API key file: {exc.strerror}") from None
    if not key:
        raise ConfigError(f"{setting}: the API key file is empty; write the key into it")
    return SecretStr(key)


@dataclass(frozen=True)
class LlmEndpoint:
    """Where and how to ask: an OpenAI-compatible endpoint, its model and the retry budget."""

    model: str
    base_url: str = field(repr=False)
    """May hold credentials: shown only as :func:`shown_url` shows it."""
    api_key: SecretStr
    timeout: float = 120.0
    """Seconds per request."""
    retries: int = 3
    """Further attempts after the first on HTTP 5xx/429, timeouts and malformed answers."""
    backoff: float = 1.0
    """Seconds before the first retry; doubles with each further retry."""

    def chat_model(self) -> ChatOpenAI:
        from langchain_openai import ChatOpenAI

        url, authorization = without_credentials(self.base_url)  # the client logs its URLs
        return ChatOpenAI(
            model=self.model,
            base_url=url,
            default_headers={"Authorization": authorization} if authorization else None,
            api_key=self.api_key,
            temperature=0,
            timeout=self.timeout,
            max_retries=0,
        )


class _Retryable(Exception):
    """One attempt failed in a way worth another try."""

    def __init__(self, reason: str, *, timed_out: bool = False) -> None:
        super().__init__(reason)
        self.timed_out = timed_out


def ask_structured(
    endpoint: LlmEndpoint,
    system: str,
    user: str,
    schema: type[Answer],
    check: Callable[[Answer], str | None] | None = None,
    usage: TokenCount | None = None,
) -> Answer:
    """Ask for a JSON answer parsed into ``schema``; ``check`` may reject it with a reason.

    Retries with exponential backoff on HTTP 5xx/429, timeouts, connection errors, malformed
    JSON and rejected answers; other HTTP errors (401, 404, ...) fail at once. Raises
    ``LlmError`` with the last reason. ``usage``, when given, counts every attempt's request
    and reported tokens.
    """
    import openai
    from langchain_core.messages import HumanMessage, SystemMessage

    runnable = endpoint.chat_model().with_structured_output(
        schema, method="json_mode", include_raw=True
    )
    messages: list[BaseMessage] = [SystemMessage(system), HumanMessage(user)]
    secrets = [endpoint.api_key.get_secret_value(), *_url_secrets(endpoint.base_url)]
    attempts = endpoint.retries + 1
    usage = TokenCount() if usage is None else usage
    for attempt in range(attempts):
        timed_out = False
        try:
            answer = _attempt(runnable, messages, schema, usage)
            problem = check(answer) if check else None
            if problem is None:
                return answer
            reason = f"invalid answer: {problem}"
        except _Retryable as exc:
            reason, timed_out = str(exc), exc.timed_out
        except openai.APIStatusError as exc:
            raise LlmError(_scrub(_http_reason(exc), secrets)) from None
        if attempt + 1 < attempts:
            time.sleep(endpoint.backoff * 2**attempt)
    raise LlmError(_scrub(f"{reason} (after {attempts} attempts)", secrets), timed_out=timed_out)


def _attempt(
    runnable: Runnable[Any, Any],
    messages: list[BaseMessage],
    schema: type[Answer],
    usage: TokenCount,
) -> Answer:
    import openai

    usage.calls += 1
    try:
        result = runnable.invoke(messages)
    except openai.APITimeoutError:
        raise _Retryable("timeout", timed_out=True) from None
    except openai.APIConnectionError as exc:
        raise _Retryable(f"connection failed: {exc.message}") from None
    except openai.APIStatusError as exc:
        if exc.status_code >= 500 or exc.status_code == 429:
            raise _Retryable(_http_reason(exc)) from None
        raise
    usage.add(result["raw"])
    if isinstance(result["parsed"], schema):
        return result["parsed"]
    return _parse_lenient(str(result["raw"].content), schema)


def _parse_lenient(content: str, schema: type[Answer]) -> Answer:
    """Parse an answer wrapped in reasoning (``<think>``) or a code fence."""
    text = re.sub(r"<think>.*?</think>", "", content, flags=re.DOTALL)
    start, end = text.find("{"), text.rfind("}")
    try:
        data = json.loads(text[start : end + 1] if 0 <= start < end else text)
    except json.JSONDecodeError:
        raise _Retryable(f"malformed JSON: {_clip(content)}") from None
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"]) or "answer"
        got = f" (got {_clip(repr(error['input']))})" if "input" in error else ""
        raise _Retryable(f"invalid answer: {where}: {error['msg']}{got}") from None


def _http_reason(exc: openai.APIStatusError) -> str:
    body = exc.body
    message = body.get("message") if isinstance(body, dict) else None
    return f"HTTP {exc.status_code}: {_clip(str(message or exc.message))}"


def _clip(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _scrub(reason: str, secrets: list[str]) -> str:
    """``reason`` with every URL shown masked and each secret replaced (an echoed key)."""
    reason = shown_urls(reason)
    for secret in secrets:
        if secret:
            reason = reason.replace(secret, MASK)
    return reason
