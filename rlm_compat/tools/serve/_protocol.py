"""The OpenAI chat-completions wire format as this server speaks it: requests in, answers and errors out.

Pure data: nothing here touches sockets, so every rule (what a valid request is, which limit a request
may lower, which status an outcome gets) is one small function a test can call directly.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from ...errors import (
    BudgetExceededError,
    ConfigurationError,
    LLMCallError,
    MaxDepthError,
    MaxIterationsError,
)
from ..tool_errors import ToolUsageError

__all__ = [
    "ApiError",
    "ChatRequest",
    "ServeLimits",
    "chunk",
    "completion",
    "error_for_failure",
    "parse_request",
]

EXTENSION = "rlm"
"""The request's extension field: ``{"context": ..., "documents": [...], "max_calls": ...}``."""


@dataclass(frozen=True)
class ServeLimits:
    """Server-wide caps; a request may lower the per-run ones in its ``rlm`` field, never raise them.

    ``max_concurrent`` runs at once, ``max_queue`` more waiting (up to ``queue_timeout`` seconds)
    before 429. None for a per-run cap means unbounded.
    """

    max_body_bytes: int = 64 * 1024 * 1024
    max_context_chars: int = 50_000_000
    max_calls: int | None = 200
    max_tokens: int | None = None
    max_cost_usd: float | None = None
    max_seconds: float | None = 600.0
    max_concurrent: int = 16
    max_queue: int = 64
    queue_timeout: float = 30.0

    def __post_init__(self) -> None:
        for name in ("max_body_bytes", "max_context_chars", "max_concurrent"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ToolUsageError(f"{name} must be an integer >= 1, not {value!r}")
        if isinstance(self.max_queue, bool) or not isinstance(self.max_queue, int) or self.max_queue < 0:
            raise ToolUsageError(f"max_queue must be an integer >= 0, not {self.max_queue!r}")
        for name in ("max_calls", "max_tokens", "max_cost_usd", "max_seconds", "queue_timeout"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0
            ):
                raise ToolUsageError(f"{name} must be a positive number, not {value!r}")


_PER_RUN = {
    "max_calls": ("max_total_calls", int),
    "max_tokens": ("max_total_tokens", int),
    "max_cost_usd": ("max_total_cost_usd", float),
    "max_seconds": ("max_elapsed_seconds", float),
}


class ApiError(Exception):
    """An OpenAI-shaped error answer: HTTP status, ``error.type``, ``error.code`` and message.

    ``retry``: the ``x-should-retry`` header the official client obeys (False for outcomes a retry
    would only repeat at the same cost, such as a spent budget); ``retry_after`` seconds for 429.
    """

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        retry: bool | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.code, self.param = status, message, type, code, param
        self.retry, self.retry_after = retry, retry_after

    def body(self) -> dict[str, Any]:
        """``{"error": {...}}`` as OpenAI sends it."""
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def headers(self) -> dict[str, str]:
        """``x-should-retry`` / ``Retry-After`` where they apply."""
        out: dict[str, str] = {}
        if self.retry is not None:
            out["x-should-retry"] = "true" if self.retry else "false"
        if self.retry_after is not None:
            out["Retry-After"] = f"{self.retry_after:g}"
        return out


def bad(message: str, *, param: str | None = None, code: str | None = None) -> ApiError:
    """A 400 for a request the client must change."""
    return ApiError(400, message, param=param, code=code, retry=False)


@dataclass(frozen=True)
class ChatRequest:
    """A checked request: the model name, the query, where the context comes from, and run limits."""

    model: str
    query: str
    context: str | None
    documents: tuple[str, ...]
    earlier: str
    stream: bool
    include_usage: bool
    budget: dict[str, Any] = field(default_factory=dict)


def parse_request(raw: bytes, limits: ServeLimits) -> ChatRequest:
    """The request body checked; ApiError (400) naming the field for anything wrong with it."""
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise bad(f"request body is not valid JSON: {exc}") from None
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
    if last_role != "user":
        raise bad("the last message must be the user's: it is the query the RLM answers", param="messages")
    earlier = "\n\n".join(f"{role}: {text}" for role, text in texts[:-1])
    n = body.get("n", 1)
    if n not in (1, None):
        raise bad("'n' must be 1: one RLM run answers one request", param="n")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise bad("'stream' must be true or false", param="stream")
    options = body.get("stream_options") or {}
    include_usage = bool(isinstance(options, dict) and options.get("include_usage"))
    extension = body.get(EXTENSION) or {}
    if not isinstance(extension, dict):
        raise bad(f"'{EXTENSION}' must be an object", param=EXTENSION)
    unknown = set(extension) - {"context", "documents", *_PER_RUN}
    if unknown:
        raise bad(
            f"'{EXTENSION}' has unknown field(s) {sorted(unknown)}; known: context, documents, "
            + ", ".join(_PER_RUN),
            param=EXTENSION,
        )
    context = extension.get("context")
    if context is not None and not isinstance(context, str):
        raise bad(f"'{EXTENSION}.context' must be a string", param=f"{EXTENSION}.context")
    documents = extension.get("documents") or []
    if not isinstance(documents, list) or not all(isinstance(d, str) and d for d in documents):
        raise bad(f"'{EXTENSION}.documents' must be a list of relative paths", param=f"{EXTENSION}.documents")
    budget = _budget(extension, limits)
    if context is not None and len(context) > limits.max_context_chars:
        raise context_too_large(len(context), limits)
    return ChatRequest(model, query, context, tuple(documents), earlier, stream, include_usage, budget)


def context_too_large(chars: int, limits: ServeLimits) -> ApiError:
    """400 ``context_length_exceeded`` (OpenAI's code for a prompt over the window)."""
    return bad(
        f"the context has {chars:,} characters; this server takes at most {limits.max_context_chars:,}",
        code="context_length_exceeded",
        param=f"{EXTENSION}.context",
    )


def _message_text(message: Any, index: int) -> tuple[str, str]:
    if not isinstance(message, dict) or not isinstance(message.get("role"), str):
        raise bad(f"messages[{index}] must be an object with a 'role'", param="messages")
    content = message.get("content")
    if isinstance(content, str):
        return message["role"], content
    if isinstance(content, list):  # content parts: the text ones, in order
        parts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        if len(parts) == len(content) and all(isinstance(p, str) for p in parts):
            return message["role"], "".join(parts)  # type: ignore[arg-type]
        raise bad(f"messages[{index}]: only text content parts are supported", param="messages")
    if content is None and message["role"] != "user":
        return message["role"], ""
    raise bad(f"messages[{index}].content must be a string or text parts", param="messages")


def _budget(extension: dict[str, Any], limits: ServeLimits) -> dict[str, Any]:
    """The run's ``max_total_*`` keywords: the server's caps, lowered where the request asks."""
    out: dict[str, Any] = {}
    for key, (keyword, kind) in _PER_RUN.items():
        cap = getattr(limits, key)
        asked = extension.get(key)
        if asked is None:
            out[keyword] = cap
            continue
        if isinstance(asked, bool) or not isinstance(asked, (int, float)) or asked <= 0:
            raise bad(f"'{EXTENSION}.{key}' must be a positive number", param=f"{EXTENSION}.{key}")
        if kind is int and not isinstance(asked, int):
            raise bad(f"'{EXTENSION}.{key}' must be an integer", param=f"{EXTENSION}.{key}")
        if cap is not None and asked > cap:
            raise bad(
                f"'{EXTENSION}.{key}' is {asked}; this server allows at most {cap} per request",
                param=f"{EXTENSION}.{key}",
                code="limit_exceeded",
            )
        out[keyword] = kind(asked)
    return out


# --- outcomes ---------------------------------------------------------------------------------

_PROVIDER_STATUS = {
    "RateLimitError": (429, "provider_rate_limited"),
    "Timeout": (504, "provider_timeout"),
    "APITimeoutError": (504, "provider_timeout"),
    "AuthenticationError": (502, "provider_authentication"),
    "ProviderRateLimitError": (429, "provider_rate_limited"),
    "ProviderTimeoutError": (504, "provider_timeout"),
}


def error_for_failure(exc: BaseException | None, error_type: str, message: str) -> ApiError:
    """The answer for a run that ended without a final answer (``exc`` if it was raised here)."""
    if isinstance(exc, BudgetExceededError) or error_type == "BudgetExceededError":
        metric = getattr(exc, "metric", "")
        if metric == "elapsed_seconds" or "exceeded for elapsed_seconds" in message:
            return ApiError(504, message, type="timeout_error", code="run_timeout", retry=False)
        return ApiError(422, message, type="budget_exceeded_error", code="budget_exceeded", retry=False)
    if isinstance(exc, MaxIterationsError) or error_type == "MaxIterationsError":
        return ApiError(422, message, type="rlm_error", code="max_iterations", retry=False)
    if isinstance(exc, MaxDepthError) or error_type == "MaxDepthError":
        return ApiError(422, message, type="rlm_error", code="max_depth", retry=False)
    if isinstance(exc, (ConfigurationError, ToolUsageError)) or error_type in (
        "ConfigurationError",
        "UnsupportedOptionError",
        "ToolUsageError",
    ):
        return ApiError(400, message, code="bad_configuration", retry=False)
    if error_type in _PROVIDER_STATUS:
        status, code = _PROVIDER_STATUS[error_type]
        return ApiError(status, f"model provider: {message}", type="provider_error", code=code, retry=False)
    if isinstance(exc, LLMCallError) or error_type in (
        "ProviderResponseError",
        "LLMCallError",
        "ProviderStatusError",
    ):
        return ApiError(
            502, f"model provider: {message}", type="provider_error", code="provider_error", retry=False
        )
    if _looks_like_provider(error_type):
        return ApiError(
            502, f"model provider: {message}", type="provider_error", code="provider_error", retry=False
        )
    return ApiError(
        500, f"the run failed: {error_type}: {message}", type="server_error", code="run_failed", retry=False
    )


def _looks_like_provider(error_type: str) -> bool:
    """litellm's exception classes (its own, not LLMCallError): what a failed provider call raises."""
    return error_type in {
        "APIError",
        "APIConnectionError",
        "InternalServerError",
        "ServiceUnavailableError",
        "BadRequestError",
        "NotFoundError",
        "BadGatewayError",
        "UnprocessableEntityError",
        "JSONSchemaValidationError",
        "PermissionDeniedError",
        "ContextWindowExceededError",
        "ContentPolicyViolationError",
    }


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
