"""Where model calls go: litellm (default), a scripted list of replies, or a recorded replay.

A client turns ``(model, messages, **kwargs)`` into the reply text. The loop never imports litellm
itself: :class:`LiteLLMClient` reads the module through a getter at call time, so patching
``rlm_compat.core.litellm.acompletion`` (upstream's test recipe) is honoured.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

from .errors import LLMCallError
from .types import Message

__all__ = ["LLMClient", "LiteLLMClient", "RecordedCall", "ReplayClient", "ScriptedClient"]


@runtime_checkable
class LLMClient(Protocol):
    """Anything that can answer a chat: returns the assistant's text (or None if it sent none)."""

    async def complete(self, model: str, messages: list[Message], **kwargs: Any) -> str | None: ...


class LiteLLMClient:
    """Calls ``litellm.acompletion`` and reads ``response.choices[0].message.content``, as upstream."""

    def __init__(self, module: Callable[[], Any]) -> None:
        self._module = module

    async def complete(self, model: str, messages: list[Message], **kwargs: Any) -> str | None:
        response = await self._module().acompletion(model=model, messages=messages, **kwargs)
        try:
            content = response.choices[0].message.content
        except (AttributeError, IndexError, KeyError, TypeError) as exc:
            raise LLMCallError(
                f"model {model!r} answered without choices[0].message.content: {exc!r}"
            ) from None
        return content  # type: ignore[no-any-return]


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
            "kwargs": {k: v for k, v in self.kwargs.items() if _jsonable(v)},
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

    async def complete(self, model: str, messages: list[Message], **kwargs: Any) -> str | None:
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

    @staticmethod
    def key(model: str, messages: Sequence[Message] | Sequence[dict[str, Any]]) -> str:
        """A stable digest of a request."""
        blob = json.dumps([model, [dict(m) for m in messages]], sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    async def complete(self, model: str, messages: list[Message], **kwargs: Any) -> str | None:
        key = self.key(model, messages)
        with self._lock:
            queue = self._replies.get(key)
            if not queue:
                raise LLMCallError(
                    f"replay has no recorded reply for request {key} "
                    f"(model {model!r}, {len(messages)} messages): the run diverged from the recording"
                )
            return queue.pop(0)


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True
