"""Public fakes for tests, demos and benchmarks: scripted and replay clients, a loopback chat server.

:class:`ScriptedChatServer` is a real OpenAI-compatible chat-completions server on 127.0.0.1 that
answers from a script, so the whole stack — RLM -> litellm -> HTTP -> server — runs without an API
key or the network. Besides reply texts a script can hold :class:`ErrorReply` (an HTTP error such as
429 or 500, optionally with ``Retry-After``), :class:`RawReply` (any body, e.g. malformed or empty
JSON) and :class:`Disconnect` (the connection dropped without an answer), and the server can wait
``latency`` seconds before every answer, as a remote provider would. Every request it receives is
kept (``requests``) so a test can assert on what the model was sent.

:class:`~rlm_compat.clients.ScriptedClient` and :class:`~rlm_compat.clients.ReplayClient` answer
without HTTP at all; they live in :mod:`rlm_compat.clients` and are re-exported here.
"""

from __future__ import annotations

import json
import re
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from .clients import RecordedCall, ReplayClient, ScriptedClient

__all__ = [
    "Disconnect",
    "ErrorReply",
    "RawReply",
    "RecordedCall",
    "ReplayClient",
    "Reply",
    "ScriptedChatServer",
    "ScriptedClient",
    "terminal_screen",
]


@dataclass(frozen=True)
class ErrorReply:
    """An HTTP error answer: ``status`` (429, 500, 503...) with an OpenAI-style error body.

    ``retry_after`` (seconds) becomes a ``Retry-After`` header, which providers send with 429 and
    503 and which retrying clients must honour.
    """

    status: int = 500
    message: str = "scripted provider error"
    retry_after: float | None = None


@dataclass(frozen=True)
class RawReply:
    """A verbatim answer body (``b""`` for an empty one, ``b"{not json"`` for a malformed one)."""

    body: bytes = b""
    status: int = 200
    content_type: str = "application/json"


@dataclass(frozen=True)
class Disconnect:
    """No answer at all: the connection is closed as if the provider died mid-request."""


Reply = str | ErrorReply | RawReply | Disconnect
"""One scripted answer: reply text, an HTTP error, a raw body, or a dropped connection."""


class ScriptedChatServer:
    """Serve ``POST /v1/chat/completions`` with scripted replies, in order.

    ``replies`` is a sequence of :data:`Reply` values, or a single callable ``(request_json) ->
    Reply`` used for every request (for replies that depend on what was asked, e.g. per-depth
    scripts). When the script is exhausted the server answers HTTP 400 with an error naming the
    count, which litellm turns into an exception instead of retrying forever. ``latency``: seconds
    each request waits before it is answered (requests are served concurrently, one thread each).

    Use as a context manager; ``base_url`` is what to pass as ``api_base``.
    """

    def __init__(
        self,
        replies: Sequence[Reply] | Callable[[dict[str, Any]], Reply] = (),
        *,
        latency: float = 0.0,
    ) -> None:
        self._replies = replies
        self._next = 0
        self._lock = threading.Lock()
        self.latency = latency
        self.requests: list[dict[str, Any]] = []
        self._server = _Server(("127.0.0.1", 0), _make_handler(self))
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

    def _answer(self, request: dict[str, Any]) -> Reply | None:
        with self._lock:
            self.requests.append(request)
            if callable(self._replies):
                script = self._replies
            else:
                if self._next >= len(self._replies):
                    return None
                reply = self._replies[self._next]
                self._next += 1
                return reply
        return script(request)  # outside the lock: a script may block, requests stay concurrent


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # a fan-out of 64 connects at once; the default backlog of 5 drops SYNs

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up (a cancelled call, a timed-out test) is normal here, not a traceback."""
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)


def _completion_body(model: str, content: str, prompt: list[dict[str, Any]]) -> dict[str, Any]:
    """A chat.completion whose usage counts words: deterministic token figures for tests."""
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


class _Handler(BaseHTTPRequestHandler):
    """Answers one connection's requests from ``owner``'s script (bound by :func:`_make_handler`)."""

    owner: ScriptedChatServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # no delayed-ACK stall between the header and body writes

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read ``requests`` instead of a log."""

    def _send_bytes(
        self,
        status: int,
        data: bytes,
        content_type: str = "application/json",
        headers: Sequence[tuple[str, str]] = (),
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _send(self, status: HTTPStatus, body: dict[str, Any]) -> None:
        self._send_bytes(status, json.dumps(body).encode())

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
        request["_received"] = time.monotonic()
        try:
            reply = self.owner._answer(request)
        except Exception as exc:  # a scripting bug must reach the test, not kill the server
            self._send(HTTPStatus.BAD_REQUEST, _error(f"reply script failed: {exc!r}"))
            return
        if self.owner.latency > 0:
            time.sleep(self.owner.latency)
        self._reply(request, reply)

    def _reply(self, request: dict[str, Any], reply: object) -> None:
        if reply is None:
            self._send(
                HTTPStatus.BAD_REQUEST,
                _error(f"script exhausted after {self.owner._next} scripted replies"),
            )
        elif isinstance(reply, ErrorReply):
            headers = [] if reply.retry_after is None else [("Retry-After", f"{reply.retry_after:g}")]
            kind = "rate_limit_error" if reply.status == 429 else "server_error"
            body = {"error": {"message": reply.message, "type": kind, "code": None}}
            self._send_bytes(reply.status, json.dumps(body).encode(), headers=headers)
        elif isinstance(reply, RawReply):
            self._send_bytes(reply.status, reply.body, reply.content_type)
        elif isinstance(reply, Disconnect):
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
        elif isinstance(reply, str):
            model = str(request.get("model", ""))
            self._send(HTTPStatus.OK, _completion_body(model, reply, request.get("messages", [])))
        else:
            self._send(
                HTTPStatus.BAD_REQUEST,
                _error(f"reply script returned {type(reply).__name__}, not a Reply"),
            )


def _make_handler(owner: ScriptedChatServer) -> type[BaseHTTPRequestHandler]:
    """The handler class of one server: the stdlib makes an instance per connection, from the class."""

    class _Bound(_Handler):
        pass

    _Bound.owner = owner
    return _Bound


def _error(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "code": None}}


_CONTROL = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])|\r|\n|\x1b\][^\x07]*\x07")


def terminal_screen(raw: str) -> list[str]:
    """What a terminal shows after ``raw`` output: the lines left once redraws are applied.

    Understands what a live status line uses — carriage return, line feed, cursor up (``ESC[nA``),
    erase line (``ESC[2K``) — and drops colours and other escape sequences, so tests and the docs
    capture (docs/run.md) can read a live display as a person would see it, without a terminal
    emulator dependency.
    """
    lines: list[list[str]] = [[]]
    row = col = 0
    position = 0
    for match in _CONTROL.finditer(raw):
        row, col = _put(lines, row, col, raw[position : match.start()])
        position = match.end()
        token = match.group(0)
        if token == "\r":
            col = 0
        elif token == "\n":
            row += 1
            col = 0 if raw[match.start() - 1 : match.start()] == "\r" else col
            while len(lines) <= row:
                lines.append([])
        elif match.group(2) == "A":
            row = max(0, row - int(match.group(1) or 1))
        elif match.group(2) == "K" and match.group(1) in ("2", ""):
            lines[row] = [] if match.group(1) == "2" else lines[row][:col]
    _put(lines, row, col, raw[position:])
    text = ["".join(line).rstrip() for line in lines]
    while text and not text[-1]:
        text.pop()
    return text


def _put(lines: list[list[str]], row: int, col: int, text: str) -> tuple[int, int]:
    line = lines[row]
    for char in text:
        if col < len(line):
            line[col] = char
        else:
            line.extend(" " * (col - len(line)))
            line.append(char)
        col += 1
    return row, col
