"""A small real OpenAI-compatible HTTP server on 127.0.0.1 for tests.

It serves ``POST /v1/chat/completions`` with scripted replies, one per request in order (good
JSON, malformed JSON, an HTTP error, a slow reply for timeouts), and records every request so
tests can assert on prompts and headers. Use it as a context manager::

    with OpenAIServer() as server:
        server.script(Reply.answer({"decision": "STOP"}), Reply.error(500))
        ...  # point a client at server.base_url
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Reply:
    """One scripted reply: an assistant message (status 200) or an error status."""

    status: int = 200
    content: str = ""
    delay: float = 0.0
    """Seconds to wait before answering (longer than the client's timeout makes a timeout)."""

    @classmethod
    def answer(cls, payload: dict[str, Any] | str, delay: float = 0.0) -> Reply:
        """The assistant says ``payload`` (a dict is sent as JSON text, a str verbatim)."""
        content = payload if isinstance(payload, str) else json.dumps(payload)
        return cls(content=content, delay=delay)

    @classmethod
    def error(cls, status: int = 500) -> Reply:
        return cls(status=status)


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]
    """Header names in lower case."""
    body: dict[str, Any]

    @property
    def prompt(self) -> str:
        """All message contents of the request, joined."""
        return "\n".join(str(m.get("content", "")) for m in self.body.get("messages", []))


class OpenAIServer:
    """Scripted ``/v1/chat/completions`` on an ephemeral port of 127.0.0.1."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def script(self, *replies: Reply) -> None:
        """Queue replies, answered in order; a request with none left gets HTTP 500."""
        with self._lock:
            self._replies.extend(replies)

    @property
    def unused(self) -> int:
        with self._lock:
            return len(self._replies)

    def __enter__(self) -> OpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def _next_reply(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            return self._replies.popleft() if self._replies else Reply.error(500)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: tests read ``server.requests`` instead."""

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                request = RecordedRequest(
                    self.path, {k.lower(): v for k, v in self.headers.items()}, body
                )
                reply = server._next_reply(request)
                if reply.delay and server._stopping.wait(reply.delay):
                    return
                if self.path != "/v1/chat/completions":
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                elif reply.status != 200:
                    self._send(reply.status, {"error": {"message": "scripted failure"}})
                else:
                    self._send(200, _completion(body.get("model", ""), reply.content))

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

        return Handler


def _completion(model: str, content: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
