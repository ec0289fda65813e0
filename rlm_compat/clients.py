"""Where model calls go: litellm (default), a scripted list of replies, or a recorded replay.

A client turns ``(model, messages, **kwargs)`` into the reply: its text, or a :class:`ModelReply`
with the provider's token usage and litellm's cost estimate. The loop never imports litellm
itself: :class:`LiteLLMClient` reads the module through a getter at call time, so patching
``rlm_compat.core.litellm.acompletion`` (upstream's test recipe) is honoured.

A client makes one request per call and never retries: the RLM retries transient failures
itself (:mod:`rlm_compat.retry`), so that each attempt is a counted, budgeted, recorded call.
:class:`LiteLLMClient` switches litellm's retries (and through them the provider SDK's) off with
``num_retries=0``, a documented litellm parameter, rather than watching another library's retry
logging.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import threading
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ._lazy import ensure_offline_litellm
from .errors import LLMCallError, ProviderResponseError
from .types import Message

__all__ = [
    "LLMClient",
    "LiteLLMClient",
    "ModelReply",
    "RecordedCall",
    "ReplayClient",
    "ScriptedClient",
    "ensure_offline_litellm",
    "model_window",
]


@dataclass(frozen=True)
class ModelReply:
    """A reply with what the provider reported about it (None where it reported nothing)."""

    content: str | None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    cached_tokens: int | None = None
    cost_usd: float | None = None


@runtime_checkable
class LLMClient(Protocol):
    """Anything that can answer a chat: the assistant's text (None if it sent none) or a ModelReply."""

    async def complete(
        self, model: str, messages: list[Message], **kwargs: Any
    ) -> str | ModelReply | None: ...


class LiteLLMClient:
    """Calls ``litellm.acompletion`` and reads ``response.choices[0].message.content``, as upstream.

    Usage and cost are read defensively: a patched ``acompletion`` returning a bare mock (upstream's
    tests do) yields a reply without figures rather than an error.
    """

    def __init__(
        self,
        module: Callable[[], Any],
        acompletion: Callable[..., Awaitable[Any]] | None = None,
        *,
        retry_switch_to_replacements: bool = False,
    ) -> None:
        """``acompletion``: called instead of ``litellm.acompletion`` with the same keywords and
        expected to return a response of the same shape (0.5.0's ``completion_handler``).
        ``retry_switch_to_replacements``: send ``num_retries=0`` to a function patched over the
        patch point too (0.5.0 does; 2fb46cc's keywords have none)."""
        self._module = module
        self._acompletion = acompletion
        self._switch_always = retry_switch_to_replacements

    async def complete(self, model: str, messages: list[Message], **kwargs: Any) -> ModelReply:
        try:
            module = self._module()
            call = self._acompletion or module.acompletion
            replaced = self._acompletion is None and _overridden(module, "acompletion")
            if self._switch_always or not replaced:
                # litellm's own retries off; a function patched over the patch point gets the
                # keywords 2fb46cc sent (upstream's tests compare them), as it has no retries
                kwargs = {**kwargs, "num_retries": 0}
            response = await call(model=model, messages=messages, **kwargs)
        except Exception as exc:
            if _caused_by(exc, json.JSONDecodeError):
                raise ProviderResponseError(
                    f"model {model!r}: the provider's reply body is not valid JSON ({exc}); "
                    "check that api_base points at an OpenAI-compatible chat-completions endpoint"
                ) from exc
            raise
        try:  # an object (litellm's ModelResponse) or plain JSON-shaped dicts (a custom handler's)
            choice = field(response, "choices")[0]
            message = field(choice, "message")
            if message is None or (isinstance(message, dict) and "content" not in message):
                raise KeyError("message.content")
            content = field(message, "content") if isinstance(message, dict) else message.content
        except (AttributeError, IndexError, KeyError, TypeError) as exc:
            raise ProviderResponseError(
                f"model {model!r} answered without choices[0].message.content ({exc!r}); "
                "the provider sent no completion choice"
            ) from None
        usage = field(response, "usage")
        cached = _count(field(field(usage, "prompt_tokens_details"), "cached_tokens"))
        return ModelReply(
            content=content,
            prompt_tokens=_count(field(usage, "prompt_tokens")),
            completion_tokens=_count(field(usage, "completion_tokens")),
            total_tokens=_count(field(usage, "total_tokens")),
            cached_tokens=cached or _count(field(usage, "cache_read_input_tokens")) or cached,
            cost_usd=self._cost(response),
        )

    def _cost(self, response: Any) -> float | None:
        """litellm's estimate from its bundled price map; None for models it has no price for.

        litellm attaches it to the response (``response_cost``, None when it found no price: then
        nothing more is asked). A response without it (a custom handler's, an older litellm's) is
        priced with ``litellm.completion_cost``, which refuses unknown models and, on the way, prints
        a red "Provider List" banner on stdout: it is called with litellm's ``suppress_debug_info``
        on, so nothing of litellm's reaches a user's program's stdout.
        """
        hidden = getattr(response, "_hidden_params", None)
        if isinstance(hidden, dict) and "response_cost" in hidden:
            cost = hidden["response_cost"]
        else:
            try:
                price = self._module().completion_cost  # loads litellm (or is the patched one)
                with _litellm_quiet():
                    cost = price(completion_response=response)
            except Exception:  # litellm raises assorted errors for unpriced models
                return None
        if isinstance(cost, (int, float)) and not isinstance(cost, bool):
            return float(cost)
        return None


@contextlib.contextmanager
def _litellm_quiet() -> Iterator[None]:
    """litellm's ``suppress_debug_info`` on for the block, then back to what it was. Set on the
    real module, where litellm reads it (the patch point is a proxy that keeps writes to itself);
    the block is synchronous, so no other task of the event loop runs with the flag changed."""
    litellm: Any = sys.modules.get("litellm")
    if litellm is None:
        yield
        return
    before = litellm.suppress_debug_info
    litellm.suppress_debug_info = True
    try:
        yield
    finally:
        litellm.suppress_debug_info = before


def model_window(model: str) -> int | None:
    """litellm's input window for ``model`` in tokens, from its bundled model map (None: litellm
    does not know the model). Imports litellm (offline: the map is the local one)."""
    ensure_offline_litellm()
    import litellm

    try:
        with _litellm_quiet():
            info: Any = litellm.get_model_info(model)
    except Exception:  # litellm raises assorted errors for models it does not know
        return None
    window = info.get("max_input_tokens") or info.get("max_tokens")
    return window if isinstance(window, int) and window > 0 else None


def _overridden(module: Any, name: str) -> bool:
    check = getattr(type(module), "is_overridden", None)
    return bool(check(module, name)) if callable(check) else False


def field(obj: Any, name: str) -> Any:
    """``obj[name]`` for a mapping, ``obj.name`` otherwise: providers report usage either way."""
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, kind):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


class RecordedCall:
    """One call a client answered: what was asked and what it said."""

    __slots__ = ("kwargs", "messages", "model", "reply")

    def __init__(self, model: str, messages: list[Message], kwargs: dict[str, Any], reply: str):
        self.model, self.messages, self.kwargs, self.reply = model, messages, kwargs, reply

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready view (kwargs reduced to their JSON-able part)."""
        return {
            "model": self.model,
            "messages": [dict(m) for m in self.messages],
            "kwargs": {k: v for k, v in self.kwargs.items() if jsonable(v)},
            "reply": self.reply,
        }


class ScriptedClient:
    """Replies from a script, in order: for offline runs, tests and research baselines.

    ``replies`` is a sequence of strings, or a callable ``(model, messages) -> str`` for replies that
    depend on what was asked. Every call is kept in ``calls``. Running out of replies raises
    LLMCallError naming how many were scripted, instead of hanging or repeating.
    """

    def __init__(self, replies: Sequence[str] | Callable[[str, list[Message]], str]) -> None:
        self._script = replies
        self._next = 0
        self._lock = threading.Lock()
        self.calls: list[RecordedCall] = []

    async def complete(self, model: str, messages: list[Message], **kwargs: Any) -> str:
        with self._lock:
            if callable(self._script):
                reply = self._script(model, messages)
            else:
                if self._next >= len(self._script):
                    raise LLMCallError(
                        f"scripted client ran out of replies after {len(self._script)} call(s)"
                    )
                reply = self._script[self._next]
                self._next += 1
            self.calls.append(RecordedCall(model, [dict(m) for m in messages], kwargs, reply))  # type: ignore[misc]
        return reply


class ReplayClient:
    """Answers each call with the reply recorded for the same model and messages.

    Built from :meth:`RecordedCall.as_dict` records (a trajectory); an unrecorded request raises
    LLMCallError with the request's key, so a replay that diverges says where.
    """

    def __init__(self, records: Iterable[dict[str, Any]]) -> None:
        self._replies: dict[str, list[str]] = {}
        for record in records:
            key = self.key(record["model"], record["messages"])
            self._replies.setdefault(key, []).append(record["reply"])
        self._lock = threading.Lock()

    @classmethod
    def from_trajectory(cls, path: str | os.PathLike[str]) -> ReplayClient:
        """A client that answers every call a trajectory file recorded, with its recorded reply."""
        from .record.trajectory import read_trajectory, recorded_calls

        _, events = read_trajectory(path)
        return cls(recorded_calls(events))

    @staticmethod
    def key(model: str, messages: Sequence[Message] | Sequence[dict[str, Any]]) -> str:
        """A stable digest of a request."""
        blob = json.dumps([model, [dict(m) for m in messages]], sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    async def complete(self, model: str, messages: list[Message], **kwargs: Any) -> str:
        key = self.key(model, messages)
        with self._lock:
            queue = self._replies.get(key)
            if not queue:
                raise LLMCallError(
                    f"replay has no recorded reply for request {key} "
                    f"(model {model!r}, {len(messages)} messages): the run diverged from the recording"
                )
            return queue.pop(0)


def jsonable(value: Any) -> bool:
    """Whether ``json.dumps`` takes the value: what a record keeps of free-form call arguments."""
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True
