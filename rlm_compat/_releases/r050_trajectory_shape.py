"""recursive-llm 0.5.0's trajectory shape, derived from rlm_compat's own events as they happen.

Code written for 0.5.0 reads ``result.trajectory`` (and what its ``event_handler`` receives) by
0.5.0's field names: ``response`` not ``reply``, ``status`` not ``error``, ``query``/``context``
on a node's start, the full ``messages`` of every model call; and by 0.5.0's privacy default:
without ``capture_trajectory_content=True`` every text is replaced by its length under
``<name>_chars`` (``messages`` by ``message_chars``, the sum of their contents' lengths). So
under the 0.5 API preset (``ApiSemantics.trajectory_shape == "0.5"``) the run hands its events
through :class:`ReleaseShaper` before keeping them for the result and before calling the user's
handlers. rlm_compat's own typed events, the stats, the budget and a ``trajectory_path`` file
still see the original events, so docs/trajectory.md's format is the same under every preset.

Events 0.5.0 does not have (``subcall_start``/``subcall_end``) are left out, and the shaped
events are numbered on their own, so ``sequence`` runs 1, 2, 3... as 0.5.0's does.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, ClassVar

from ..events import (
    FinalAnswer,
    FinalAnswerRejected,
    FinalAnswerValidated,
    ModelCallFailed,
    ModelCallFinished,
    ModelCallStarted,
    ModelRetry,
    ProviderResponseNormalized,
    ReplStep,
    RlmFailed,
    RlmFinished,
    RlmStarted,
    RunFailed,
    RunFinished,
    RunStarted,
    TrajectoryEvent,
)
from ..types import Message

__all__ = ["ReleaseEvent", "ReleaseShaper"]


@dataclass(frozen=True, kw_only=True)
class ReleaseEvent(TrajectoryEvent):
    """An event in 0.5.0's shape: the same envelope, ``data`` as 0.5.0 names it.

    A subclass of :class:`~rlm_compat.events.TrajectoryEvent` (one per ``kind``, made on first
    use) so every consumer typed for rlm_compat's events takes these too.
    """

    kind: ClassVar[str] = "event"
    fields: dict[str, Any]

    @property
    def data(self) -> dict[str, Any]:
        """0.5.0's data for this event (a copy: the event stays immutable)."""
        return dict(self.fields)


@functools.cache
def _release_class(kind: str) -> type[ReleaseEvent]:
    return type(f"ReleaseEvent_{kind}", (ReleaseEvent,), {"kind": kind, "__doc__": ReleaseEvent.__doc__})


class ReleaseShaper:
    """One run's converter to 0.5.0's shape; call it with each event, in sequence order.

    ``capture``: keep texts (0.5.0's ``capture_trajectory_content=True``), else their lengths.
    ``max_attempts``: 1 + the RLM's ``max_retries``, reported on each model call as 0.5.0 does.
    Stateful because 0.5.0 reports what rlm_compat records once: a node's context (given by
    :meth:`note_context` when the node starts), a call's full message list (rlm_compat records
    the messages a node sends for the first time), a call's attempt number on its end event.
    """

    def __init__(self, *, capture: bool, max_attempts: int = 1) -> None:
        self.capture = capture
        self.max_attempts = max_attempts
        self._sequence = 0
        self._contexts: dict[str, Any] = {}
        self._histories: dict[str, list[Message]] = {}
        self._attempts: dict[str, int] = {}

    def note_context(self, node_id: str, context: Any) -> None:
        """The context RLM node ``node_id`` was given (reported on its start events)."""
        self._contexts[node_id] = context

    def __call__(self, event: TrajectoryEvent) -> ReleaseEvent | None:
        """``event`` in 0.5.0's shape, or None for a kind 0.5.0 does not record."""
        data = self._data(event)
        if data is None:
            return None
        self._sequence += 1
        return _release_class(event.kind)(
            sequence=self._sequence,
            elapsed_seconds=event.elapsed_seconds,
            depth=event.depth,
            node_id=event.node_id,
            parent_id=event.parent_id,
            fields=data,
        )

    def _text(self, **texts: Any) -> dict[str, Any]:
        if self.capture:
            return dict(texts)
        return {f"{name}_chars": _length(value) for name, value in texts.items()}

    def _data(self, event: TrajectoryEvent) -> dict[str, Any] | None:
        if isinstance(event, (RunStarted, RlmStarted)):
            if event.node_id not in self._contexts:
                return {**self._text(query=event.query), "context_chars": event.context_chars}
            return self._text(query=event.query, context=self._contexts[event.node_id])
        if isinstance(event, (RunFinished, RlmFinished)):
            if isinstance(event, RlmFinished):
                self._contexts.pop(event.node_id, None)
                self._histories.pop(event.node_id, None)
            return self._text(answer=event.answer)
        if isinstance(event, (RunFailed, RlmFailed)):
            return {"error_type": event.error_type, "error": event.error}
        if isinstance(event, ModelCallStarted):
            return self._call_start(event)
        if isinstance(event, ModelCallFinished):
            attempt = self._attempts.pop(event.node_id, 1)
            head = {"model": event.model, "is_leaf": event.is_leaf, "attempt": attempt}
            return {**head, **self._text(response=event.reply)}
        if isinstance(event, ModelCallFailed):
            return {
                "model": event.model,
                "is_leaf": event.is_leaf,
                "attempt": self._attempts.pop(event.node_id, 1),
                "retrying": event.retrying,
                "error_type": event.error_type,
                "error": event.error,
            }
        if isinstance(event, ModelRetry):
            return {
                "model": event.model,
                "failed_attempt": event.failed_attempt,
                "next_attempt": event.next_attempt,
                "delay_seconds": event.delay_seconds,
            }
        if isinstance(event, ReplStep):
            status = "error" if event.error else "ok"
            return {"status": status, **self._text(code=event.code, output=event.output)}
        if isinstance(event, FinalAnswer):
            return {"method": event.method, **self._text(answer=event.answer)}
        if isinstance(event, FinalAnswerRejected):
            return {"answer_chars": event.answer_chars, "reason_chars": event.reason_chars}
        if isinstance(event, FinalAnswerValidated):
            return {"answer_chars": event.answer_chars}
        if isinstance(event, ProviderResponseNormalized):
            return {
                "model": event.model,
                "field": "choices[0].message.content",
                "normalized_to": "empty_string",
            }
        return None

    def _call_start(self, event: ModelCallStarted) -> dict[str, Any]:
        """0.5.0 reports the whole list sent; rlm_compat records only what is new to the node."""
        if event.is_leaf:
            messages = list(event.messages)
        else:
            history = self._histories.setdefault(event.parent_id, [])
            history.extend(event.messages)
            messages = history[-event.message_count :] if event.message_count else []
        self._attempts[event.node_id] = event.attempt
        head = {
            "model": event.model,
            "is_leaf": event.is_leaf,
            "message_count": event.message_count,
            "attempt": event.attempt,
            "max_attempts": self.max_attempts,
        }
        if self.capture:
            return {**head, "messages": [dict(m) for m in messages]}
        return {**head, "message_chars": sum(len(str(m.get("content") or "")) for m in messages)}


def _length(value: Any) -> int:
    try:
        return len(value)
    except TypeError:
        return len(str(value))
