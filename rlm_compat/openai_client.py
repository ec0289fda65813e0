"""A lean model-call path for OpenAI-compatible endpoints: one JSON POST per call, no SDK, no litellm.

litellm turns every call into the ``openai`` SDK's call plus its own routing, logging and pricing,
and the SDK adds request building and response models of its own; for an endpoint that already
speaks the OpenAI chat-completions API none of it is needed to get the reply and its usage.
benchmarks/client_floor.py measures the three side by side (docs/performance.md, "Model-call
floor"): per call, litellm costs about twice the SDK, which costs several times a bare aiohttp POST.
:class:`OpenAICompatibleClient` is that bare POST, with one aiohttp session (one connection pool)
per event loop, shared by every call made on that loop.

It is opt-in (``RLM(..., client=OpenAICompatibleClient())``, ``rlm-compat serve --client
openai-compatible``): litellm stays the default path, for every provider it supports and for
``rlm_compat.core.litellm.acompletion`` patching. It does not price calls (``cost_usd`` is None,
so a ``max_total_cost_usd`` budget has nothing to count), route other providers, or retry (a
failed call raises at once; retries belong to the caller: the RLM retries the same failures on this
path as on litellm's, :func:`rlm_compat.retry.is_retryable`).
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import weakref
from typing import Any

from .clients import ModelReply, field
from .errors import LLMCallError, ProviderResponseError
from .types import Message

__all__ = [
    "OpenAICompatibleClient",
    "ProviderConnectionError",
    "ProviderRateLimitError",
    "ProviderStatusError",
    "ProviderTimeoutError",
]

_PREFIXES = ("openai/",)
_LOCAL = frozenset({"api_base", "base_url", "api_key", "max_retries", "num_retries", "timeout"})


class ProviderStatusError(LLMCallError):
    """The endpoint answered with an HTTP error status (``status``; ``retry_after`` if it said)."""

    def __init__(self, message: str, status: int, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status, self.retry_after = status, retry_after
        self.status_code = status  # the name litellm's and the SDK's errors use: one retry rule for all


class ProviderRateLimitError(ProviderStatusError):
    """HTTP 429 from the endpoint."""


class ProviderTimeoutError(LLMCallError):
    """The endpoint did not answer within the call's ``timeout``."""


class ProviderConnectionError(LLMCallError):
    """The endpoint could not be reached (refused, reset, DNS): transient, as litellm's
    ``APIConnectionError`` is, so the RLM retries it the same on both paths."""


class OpenAICompatibleClient:
    """``POST {api_base}/chat/completions`` with aiohttp; ``api_base`` / ``api_key`` per call or here.

    The model name may carry litellm's ``openai/`` prefix (so one model string works on both
    paths); it is stripped. Call keywords other than ``api_base``, ``api_key``, ``timeout`` and the
    retry counts (ignored: this client does not retry) are sent as request fields.
    """

    def __init__(
        self,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        timeout: float | None = 600.0,
    ) -> None:
        self.api_base, self.api_key, self.timeout = api_base, api_key, timeout
        self._lock = threading.Lock()
        self._sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = (
            weakref.WeakKeyDictionary()
        )
        self._closers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()

    def _session(self) -> Any:
        import aiohttp

        loop = asyncio.get_running_loop()
        with self._lock:
            session = self._sessions.get(loop)
            if session is None or session.closed:
                connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
                session = aiohttp.ClientSession(connector=connector)
                self._sessions[loop] = session
                self._closers[loop] = _close_with_loop(loop, session)
        return session

    async def complete(self, model: str, messages: list[Message], **kwargs: Any) -> ModelReply:
        import aiohttp

        base = kwargs.get("api_base") or kwargs.get("base_url") or self.api_base
        if not base:
            raise LLMCallError("OpenAICompatibleClient needs api_base (the endpoint's .../v1 URL)")
        key = kwargs.get("api_key") or self.api_key or os.environ.get("OPENAI_API_KEY")
        timeout = kwargs.get("timeout") or self.timeout
        for prefix in _PREFIXES:
            if model.startswith(prefix):
                model = model[len(prefix) :]
        body = {k: v for k, v in kwargs.items() if k not in _LOCAL}
        body.update(model=model, messages=messages)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        url = f"{str(base).rstrip('/')}/chat/completions"
        try:
            async with self._session().post(
                url, json=body, headers=headers, timeout=aiohttp.ClientTimeout(total=timeout)
            ) as response:
                raw = await response.read()
                status, retry_after = response.status, response.headers.get("Retry-After")
        except asyncio.TimeoutError:
            raise ProviderTimeoutError(f"model {model!r}: no answer from {url} within {timeout} s") from None
        except aiohttp.ClientError as exc:
            raise ProviderConnectionError(
                f"model {model!r}: cannot reach {url}: {type(exc).__name__}: {exc}"
            ) from None
        if status >= 400:
            raise _status_error(model, status, raw, retry_after)
        try:
            data = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ProviderResponseError(
                f"model {model!r}: the provider's reply body is not valid JSON ({exc}); check that "
                "api_base points at an OpenAI-compatible chat-completions endpoint"
            ) from None
        return _reply(model, data)


def _status_error(model: str, status: int, raw: bytes, retry_after: str | None) -> ProviderStatusError:
    try:
        detail = field(field(json.loads(raw), "error"), "message")
    except (UnicodeDecodeError, json.JSONDecodeError):
        detail = None
    text = f"model {model!r}: the provider answered HTTP {status}: {detail or raw[:200]!r}"
    try:
        after = None if retry_after is None else float(retry_after)
    except ValueError:
        after = None
    kind = ProviderRateLimitError if status == 429 else ProviderStatusError
    return kind(text, status, after)


def _reply(model: str, data: Any) -> ModelReply:
    choices = field(data, "choices")
    message = field(choices[0], "message") if isinstance(choices, list) and choices else None
    if not isinstance(message, dict) or "content" not in message:
        raise ProviderResponseError(
            f"model {model!r} answered without choices[0].message.content; "
            "the provider sent no completion choice"
        )
    usage = field(data, "usage")
    return ModelReply(
        content=message["content"],
        prompt_tokens=_count(field(usage, "prompt_tokens")),
        completion_tokens=_count(field(usage, "completion_tokens")),
        total_tokens=_count(field(usage, "total_tokens")),
        cached_tokens=_count(field(field(usage, "prompt_tokens_details"), "cached_tokens")),
        cost_usd=None,
    )


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _close_with_loop(loop: asyncio.AbstractEventLoop, session: Any) -> Any:
    """Close the session when its loop's ``asyncio.run`` shuts down its async generators (the
    returned generator must be kept referenced until then)."""

    async def closer() -> Any:
        try:
            yield None
        finally:
            await session.close()

    generator = closer()
    loop.call_soon_threadsafe(lambda: asyncio.ensure_future(generator.__anext__()))
    return generator
