"""The OpenAI chat-completions wire format as this server speaks it: requests in, answers out.

Pure data: nothing here touches sockets, so every rule (what a valid request is, which limit a request
may lower, where the context comes from) is one small function a test can call directly.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from ..shared.tooling_errors import ToolUsageError
from .api_errors import ApiError, bad
from .body import load_body
from .params import root_call_options
from .sessions import SESSION_ID

__all__ = [
    "ApiError",
    "ChatRequest",
    "ServeLimits",
    "bad",
    "chunk",
    "completion",
    "parse_request",
]

EXTENSION = "rlm"
"""The request's extension field: ``{"context": ..., "documents": [...], "max_calls": ...}``."""

MAX_DOCUMENTS = 256
"""Names one request may list in ``rlm.documents``."""


@dataclass(frozen=True)
class ServeLimits:
    """Server-wide caps; a request may lower the per-run ones in its ``rlm`` field, never raise them.

    ``max_concurrent`` runs at once, ``max_queue`` more waiting (up to ``queue_timeout`` seconds)
    before 429. None for a per-run cap means unbounded. ``max_query_chars`` bounds the question
    (sent to the root model on every call); ``max_context_chars`` everything that becomes the
    context: ``rlm.context``, the documents (counted in bytes, read no further than the limit), the
    earlier messages, or the query itself when it is the context.
    """

    max_body_bytes: int = 64 * 1024 * 1024
    max_context_chars: int = 50_000_000
    max_query_chars: int = 100_000
    max_calls: int | None = 200
    max_tokens: int | None = None
    max_cost_usd: float | None = None
    max_seconds: float | None = 600.0
    max_concurrent: int = 16
    max_queue: int = 64
    queue_timeout: float = 30.0

    def __post_init__(self) -> None:
        for name in ("max_body_bytes", "max_context_chars", "max_query_chars", "max_concurrent"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ToolUsageError(f"{name} must be an integer >= 1, not {value!r}")
        if isinstance(self.max_queue, bool) or not isinstance(self.max_queue, int) or self.max_queue < 0:
            raise ToolUsageError(f"max_queue must be an integer >= 0, not {self.max_queue!r}")
        for name in ("max_calls", "max_tokens", "max_cost_usd", "max_seconds", "queue_timeout"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not value > 0
                or not math.isfinite(value)
            ):
                raise ToolUsageError(f"{name} must be a positive number, not {value!r}")


_PER_RUN = {
    "max_calls": ("max_total_calls", int),
    "max_tokens": ("max_total_tokens", int),
    "max_cost_usd": ("max_total_cost_usd", float),
    "max_seconds": ("max_elapsed_seconds", float),
}


@dataclass(frozen=True)
class ChatRequest:
    """A checked request: the model name, the query, where the context comes from, and run limits.

    ``context_source`` says where the run's context comes from: ``rlm`` (``rlm.context`` and/or
    ``rlm.documents``, even when empty), ``messages`` (the earlier messages), ``query`` (nothing
    else: the query is the context, as with ``RLM.complete(text)``) or ``session`` (a session's
    turn that brings no context: it asks about what the session holds). ``options`` reach the root
    model's calls (docs/serve.md, parameters).
    """

    model: str
    query: str
    context: str | None
    documents: tuple[str, ...]
    earlier: str
    stream: bool
    include_usage: bool
    budget: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    context_source: str = "rlm"
    session: str | None = None
    """``"new"``, a session id, or None (docs/serve.md, sessions)."""


def parse_request(raw: bytes, limits: ServeLimits) -> ChatRequest:
    """The request body checked; ApiError (400) naming the field, as the client sent it, for anything
    wrong with it; every text counted against its limit here, before it costs a provider call."""
    body = load_body(raw)
    if not isinstance(body, dict):
        raise bad("request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise bad("'model' must be a non-empty string (see GET /v1/models)", param="model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad("'messages' must be a non-empty list", param="messages")
    texts = [_message_text(m, i) for i, m in enumerate(messages)]
    last_role, query = texts[-1]
    last = f"messages[{len(messages) - 1}]"
    if last_role != "user":
        raise bad(
            "the last message must be the user's: it is the query the RLM answers", param=f"{last}.role"
        )
    earlier = "\n\n".join(f"{role}: {text}" for role, text in texts[:-1])
    n = body.get("n", 1)
    if n not in (1, None) or isinstance(n, bool):
        raise bad("'n' must be 1: one RLM run answers one request", param="n")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise bad("'stream' must be true or false", param="stream")
    include_usage = _include_usage(body.get("stream_options"))
    extension = _extension(body.get(EXTENSION))
    context = extension.get("context")
    if context is not None and not isinstance(context, str):
        raise bad(f"'{EXTENSION}.context' must be a string", param=f"{EXTENSION}.context")
    documents = _documents(extension.get("documents"))
    budget = _budget(extension, limits)
    options = root_call_options(body)
    session = _session(extension.get("session"))
    if context is not None or documents:
        source = "rlm"
        if context is not None and len(context) > limits.max_context_chars:
            raise context_too_large(len(context), limits)
    elif session is not None:
        source = "session"
    elif texts[:-1]:
        source = "messages"
        if len(earlier) > limits.max_context_chars:
            raise context_too_large(len(earlier), limits, param="messages")
    else:
        source = "query"
        if len(query) > limits.max_context_chars:
            raise context_too_large(len(query), limits, param=f"{last}.content")
    if source != "query" and len(query) > limits.max_query_chars:
        raise bad(
            f"the query (the last user message) has {len(query):,} characters; this server takes at most "
            f"{limits.max_query_chars:,} (it goes to the root model on every call: send long text as "
            f"'{EXTENSION}.context')",
            param=f"{last}.content",
            code="query_too_large",
        )
    return ChatRequest(
        model, query, context, documents, earlier, stream, include_usage, budget, options, source, session
    )


def _session(session: Any) -> str | None:
    param = f"{EXTENSION}.session"
    if session is None:
        return None
    if not isinstance(session, str) or not (session == "new" or SESSION_ID.match(session)):
        raise bad(f"'{param}' must be \"new\" or a session id this API returned", param=param)
    return session


def context_too_large(chars: int, limits: ServeLimits, param: str = f"{EXTENSION}.context") -> ApiError:
    """400 ``context_length_exceeded`` (OpenAI's code for a prompt over the window)."""
    return bad(
        f"the context has {chars:,} characters; this server takes at most {limits.max_context_chars:,}",
        code="context_length_exceeded",
        param=param,
    )


def _include_usage(options: Any) -> bool:
    if options is None:
        return False
    if not isinstance(options, dict):
        raise bad("'stream_options' must be an object", param="stream_options")
    usage = options.get("include_usage", False)
    if not isinstance(usage, bool) and usage is not None:
        param = "stream_options.include_usage"
        raise bad(f"'{param}' must be true or false", param=param)
    return bool(usage)


def _extension(extension: Any) -> dict[str, Any]:
    if extension is None:
        return {}
    if not isinstance(extension, dict):
        raise bad(f"'{EXTENSION}' must be an object", param=EXTENSION)
    unknown = set(extension) - {"context", "documents", "session", *_PER_RUN}
    if unknown:
        raise bad(
            f"'{EXTENSION}' has unknown field(s) {sorted(unknown)}; known: context, documents, session, "
            + ", ".join(_PER_RUN),
            param=EXTENSION,
        )
    return extension


def _documents(documents: Any) -> tuple[str, ...]:
    param = f"{EXTENSION}.documents"
    if documents is None:
        return ()
    if not isinstance(documents, list):
        raise bad(f"'{param}' must be a list of relative paths", param=param)
    if len(documents) > MAX_DOCUMENTS:
        raise bad(f"'{param}' names {len(documents)} files; at most {MAX_DOCUMENTS} per request", param=param)
    for i, name in enumerate(documents):
        if not isinstance(name, str) or not name or "\x00" in name or len(name) > 4096:
            raise bad(
                f"'{param}[{i}]' must be a relative path: a non-empty string without NUL bytes",
                param=f"{param}[{i}]",
            )
    return tuple(documents)


def _message_text(message: Any, index: int) -> tuple[str, str]:
    where = f"messages[{index}]"
    if not isinstance(message, dict) or not isinstance(message.get("role"), str):
        raise bad(f"'{where}' must be an object with a string 'role'", param=where)
    content = message.get("content")
    if isinstance(content, str):
        return message["role"], content
    if isinstance(content, list):  # content parts: the text ones, in order
        parts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        if len(parts) == len(content) and all(isinstance(p, str) for p in parts):
            return message["role"], "".join(parts)  # type: ignore[arg-type]
        raise bad(f"'{where}.content': only text content parts are supported", param=f"{where}.content")
    if content is None and message["role"] != "user":
        return message["role"], ""
    raise bad(f"'{where}.content' must be a string or text parts", param=f"{where}.content")


def _budget(extension: dict[str, Any], limits: ServeLimits) -> dict[str, Any]:
    """The run's ``max_total_*`` keywords: the server's caps, lowered where the request asks."""
    out: dict[str, Any] = {}
    for key, (keyword, kind) in _PER_RUN.items():
        cap = getattr(limits, key)
        asked = extension.get(key)
        param = f"{EXTENSION}.{key}"
        if asked is None:
            out[keyword] = cap
            continue
        if isinstance(asked, bool) or not isinstance(asked, (int, float)) or not asked > 0:
            raise bad(f"'{param}' must be a positive number", param=param)
        if kind is int and not isinstance(asked, int):
            raise bad(f"'{param}' must be an integer", param=param)
        if cap is not None and asked > cap:
            raise bad(
                f"'{param}' is {asked}; this server allows at most {cap} per request",
                param=param,
                code="limit_exceeded",
            )
        if asked >= 2**63:
            raise bad(f"'{param}' is too large to be a limit; leave it out for the server's cap", param=param)
        out[keyword] = kind(asked)
    return out


# --- answers ----------------------------------------------------------------------------------


def usage_of(stats: dict[str, Any]) -> dict[str, int]:
    """The run tree's tokens as OpenAI's ``usage``."""
    prompt = int(stats.get("prompt_tokens") or 0)
    completion_tokens = int(stats.get("completion_tokens") or 0)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion_tokens,
        "total_tokens": int(stats.get("total_tokens") or prompt + completion_tokens),
    }


def completion(
    run_id: str, model: str, answer: str, stats: dict[str, Any], extra: dict[str, Any]
) -> dict[str, Any]:
    """A ``chat.completion`` object: the answer as the assistant message, the tree's usage."""
    return {
        "id": run_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": answer},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": usage_of(stats),
        "system_fingerprint": None,
        EXTENSION: extra,
    }


def chunk(
    run_id: str,
    model: str,
    delta: dict[str, Any] | None,
    *,
    finish: str | None = None,
    usage: dict[str, int] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``chat.completion.chunk``; ``delta=None`` with usage is the final usage-only chunk."""
    body: dict[str, Any] = {
        "id": run_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage is not None:
        body["usage"] = usage
    if extra is not None:
        body[EXTENSION] = extra
    return body
