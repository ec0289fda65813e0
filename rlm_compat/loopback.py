"""A real OpenAI-compatible chat-completions server on 127.0.0.1 that answers from a script.

Tests, demos and the conformance loop cases drive the whole stack — RLM -> litellm -> HTTP -> server —
without an API key or the network. The server binds only to the loopback address; every request it
receives is kept (``requests``) so a test can assert on what the model was really sent.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

__all__ = ["ScriptedChatServer"]

Reply = str | Callable[[dict[str, Any]], str]


class ScriptedChatServer:
    """Serve ``POST /v1/chat/completions`` with scripted replies, in order.

    ``replies`` is a sequence of reply texts, or a single callable ``(request_json) -> str`` used for
    every request (for replies that depend on what was asked, e.g. per-depth scripts). When the
    script is exhausted the server answers HTTP 400 with an error naming the count, which litellm
    turns into an exception instead of retrying forever.

    Use as a context manager; ``base_url`` is what to pass as ``api_base``.
    """

    def __init__(self, replies: Sequence[str] | Callable[[dict[str, Any]], str] = ()) -> None:
        self._replies = replies
        self._next = 0
        self._lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="scripted-chat-server", daemon=True
        )

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> ScriptedChatServer:
        """Start serving in a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedChatServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def messages(self) -> list[list[dict[str, Any]]]:
        """The ``messages`` list of every request, in arrival order."""
        return [r.get("messages", []) for r in self.requests]

    def _answer(self, request: dict[str, Any]) -> str | None:
        with self._lock:
            self.requests.append(request)
            if callable(self._replies):
                return self._replies(request)
            if self._next >= len(self._replies):
                return None
            reply = self._replies[self._next]
            self._next += 1
            return reply


def _completion_body(model: str, content: str, prompt: list[dict[str, Any]]) -> dict[str, Any]:
    prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in prompt)
    completion_tokens = len(content.split())
    return {
        "id": f"chatcmpl-loopback-{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _make_handler(owner: ScriptedChatServer) -> type[BaseHTTPRequestHandler]:
    class _Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go as two writes: no delayed-ACK stall

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: tests read ``requests`` instead of a log."""

        def _send(self, status: HTTPStatus, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                self._send(HTTPStatus.OK, {"object": "list", "data": []})
            else:
                self._send(HTTPStatus.NOT_FOUND, _error(f"no route GET {self.path}"))

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            try:
                request = json.loads(self.rfile.read(length) or b"{}")
            except json.JSONDecodeError as exc:
                self._send(HTTPStatus.BAD_REQUEST, _error(f"request body is not JSON: {exc}"))
                return
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(HTTPStatus.NOT_FOUND, _error(f"no route POST {self.path}"))
                return
            if request.get("stream"):
                self._send(HTTPStatus.BAD_REQUEST, _error("streaming is not scripted"))
                return
            request["_headers"] = {k.lower(): v for k, v in self.headers.items()}
            try:
                reply = owner._answer(request)
            except Exception as exc:  # a scripting bug must reach the test, not kill the server
                self._send(HTTPStatus.BAD_REQUEST, _error(f"reply script failed: {exc!r}"))
                return
            if reply is None:
                self._send(
                    HTTPStatus.BAD_REQUEST,
                    _error(f"script exhausted after {owner._next} scripted replies"),
                )
                return
            self._send(
                HTTPStatus.OK,
                _completion_body(str(request.get("model", "")), reply, request.get("messages", [])),
            )

    return _Handler


def _error(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "code": None}}
