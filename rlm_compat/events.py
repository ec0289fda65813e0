"""Typed, immutable events of an RLM run: what happened, in order, as it happens.

The loop emits these and nothing else; everything that wants to know about a run — the trajectory
writer, the tree-wide stats, the budget guard, a progress display, a user's ``on_event`` — is an
observer of the same stream (:mod:`rlm_compat.record`). Each kind is its own frozen dataclass with
typed fields; every event also carries the envelope recursive-llm 0.5.0 gives its
``TrajectoryEvent``: ``sequence``, ``kind``, ``elapsed_seconds``, ``depth``, ``node_id`` and
``parent_id``, with the kind-specific fields as ``data``. The JSON form
(:meth:`TrajectoryEvent.to_dict`) is the trajectory line format documented in docs/trajectory.md.

Node ids name the tree: ``rlm-N`` for an RLM (the root, or a child from ``recursive_llm`` /
``rlm_query``), ``call-N`` for one model call; a call's ``parent_id`` is the RLM that made it, a
child RLM's ``parent_id`` the RLM whose REPL started it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

from .types import Message

__all__ = [
    "CONTENT_FIELDS",
    "EVENT_TYPES",
    "CompactionFinished",
    "CompactionStarted",
    "FinalAnswer",
    "FinalAnswerRejected",
    "FinalAnswerValidated",
    "ModelCallFailed",
    "ModelCallFinished",
    "ModelCallStarted",
    "ModelRetry",
    "ProviderResponseNormalized",
    "ReplStep",
    "RlmFailed",
    "RlmFinished",
    "RlmStarted",
    "RunFailed",
    "RunFinished",
    "RunStarted",
    "SubcallFinished",
    "SubcallStarted",
    "ToolCall",
    "TrajectoryEvent",
]

CONTENT_FIELDS = frozenset({"query", "reply", "code", "output", "answer", "messages", "result"})
"""Fields holding model or user text; a redacted trajectory keeps only their lengths."""


@dataclass(frozen=True, kw_only=True)
class TrajectoryEvent:
    """The envelope every event shares (recursive-llm 0.5.0's ``TrajectoryEvent`` fields)."""

    kind: ClassVar[str] = "event"
    sequence: int
    elapsed_seconds: float
    depth: int
    node_id: str
    parent_id: str = ""

    @property
    def data(self) -> dict[str, Any]:
        """The kind-specific fields, JSON-ready (messages as lists of plain dicts)."""
        return {
            f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self) if f.name not in _ENVELOPE
        }

    def to_dict(self, *, redact: bool = False) -> dict[str, Any]:
        """The trajectory line: envelope plus ``data``; ``redact`` keeps text lengths, not text."""
        data = self.data
        if redact:
            data = {k: _redacted(v) if k in CONTENT_FIELDS else v for k, v in data.items()}
        return {
            "sequence": self.sequence,
            "kind": self.kind,
            "elapsed_seconds": self.elapsed_seconds,
            "depth": self.depth,
            "node_id": self.node_id,
            "parent_id": self.parent_id,
            "data": data,
        }


_ENVELOPE = frozenset({"sequence", "elapsed_seconds", "depth", "node_id", "parent_id"})


@dataclass(frozen=True, kw_only=True)
class RunStarted(TrajectoryEvent):
    """A root ``complete()`` began; ``config`` is the RLM's settings without secrets."""

    kind: ClassVar[str] = "run_start"
    query: str
    context_chars: int
    config: dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class RunFinished(TrajectoryEvent):
    """The root produced its answer; ``stats`` are the final tree-wide figures."""

    kind: ClassVar[str] = "run_end"
    answer: str
    stats: dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class RunFailed(TrajectoryEvent):
    """The root ended with an exception (``error_type`` is its class name)."""

    kind: ClassVar[str] = "run_error"
    error_type: str
    error: str
    stats: dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class RlmStarted(TrajectoryEvent):
    """An RLM node (root or child) began its loop."""

    kind: ClassVar[str] = "rlm_start"
    model: str
    query: str
    context_chars: int


@dataclass(frozen=True, kw_only=True)
class RlmFinished(TrajectoryEvent):
    """An RLM node answered after ``iterations`` model calls of its own."""

    kind: ClassVar[str] = "rlm_end"
    answer: str
    iterations: int


@dataclass(frozen=True, kw_only=True)
class RlmFailed(TrajectoryEvent):
    """An RLM node ended with an exception."""

    kind: ClassVar[str] = "rlm_error"
    error_type: str
    error: str
    iterations: int


@dataclass(frozen=True, kw_only=True)
class ModelCallStarted(TrajectoryEvent):
    """A model call is about to be sent (its budget already reserved).

    ``messages`` holds only what this node sends for the first time (the whole list on an RLM's
    first call, then the two messages each iteration appends); ``message_count`` and
    ``messages_digest`` describe the full list sent. ``is_leaf``: a plain ``llm_query`` call, not
    an RLM iteration; ``iteration`` is the RLM's iteration number (None for leaf calls).
    """

    kind: ClassVar[str] = "model_call_start"
    model: str
    is_leaf: bool
    iteration: int | None
    message_count: int
    messages_digest: str
    messages: tuple[Message, ...]
    attempt: int = 1
    """1, or the number of an RLM-level retry's attempt (0.5 API)."""


@dataclass(frozen=True, kw_only=True)
class ModelRetry(TrajectoryEvent):
    """The provider failed transiently; the RLM waits ``delay_seconds`` and tries again."""

    kind: ClassVar[str] = "model_retry"
    model: str
    attempt: int
    delay_seconds: float
    failed_attempt: int = 0
    """The attempt that failed and the one about to start."""
    next_attempt: int = 0


@dataclass(frozen=True, kw_only=True)
class ModelCallFinished(TrajectoryEvent):
    """A model call answered. Token figures are the provider's (None if it sent no usage);
    ``cost_usd`` is litellm's estimate from its bundled price map (None for unknown models)."""

    kind: ClassVar[str] = "model_call_end"
    model: str
    is_leaf: bool
    reply: str
    prompt_tokens: int | None
    completion_tokens: int | None
    total_tokens: int | None
    cached_tokens: int | None
    cost_usd: float | None
    latency_seconds: float
    retries: int = 0
    """Retries the provider SDK made inside this call: always 0 now that the RLM makes every
    retry itself (each its own call); kept for trajectories written before, which count them."""


@dataclass(frozen=True, kw_only=True)
class ModelCallFailed(TrajectoryEvent):
    """A model call raised."""

    kind: ClassVar[str] = "model_call_error"
    model: str
    is_leaf: bool
    error_type: str
    error: str
    latency_seconds: float
    retries: int = 0
    """As :attr:`ModelCallFinished.retries`: always 0 in new trajectories."""
    retrying: bool = False
    """The RLM retries this call, so the failure does not end the run."""


@dataclass(frozen=True, kw_only=True)
class ReplStep(TrajectoryEvent):
    """The REPL ran a model response: ``code`` is the response, ``output`` what the model reads next."""

    kind: ClassVar[str] = "repl_step"
    iteration: int
    code: str
    output: str
    error: bool
    duration_seconds: float
    runner: str


@dataclass(frozen=True, kw_only=True)
class SubcallStarted(TrajectoryEvent):
    """REPL code called a host function that reaches a model (``llm_query``, ``rlm_query``...)."""

    kind: ClassVar[str] = "subcall_start"
    function: str
    count: int


@dataclass(frozen=True, kw_only=True)
class SubcallFinished(TrajectoryEvent):
    """The host function returned; ``errors`` items of a batch came back as error texts."""

    kind: ClassVar[str] = "subcall_end"
    function: str
    count: int
    errors: int
    duration_seconds: float


@dataclass(frozen=True, kw_only=True)
class ToolCall(TrajectoryEvent):
    """REPL code called a custom tool (:mod:`rlm_compat.custom_tools`), which ran in the host.

    ``argument_bytes`` / ``result_bytes``: their weight as :func:`~rlm_compat.custom_tools.plain_size`
    counts it (None: not reached). ``result``: what it returned, as tagged JSON text
    (:func:`rlm_compat.plain_json.dumps`), so a replay answers the call from the record.
    ``error_type`` / ``error``: what the model's code got instead; ``traceback``: the tool's own,
    kept here and never sent to the REPL.
    """

    kind: ClassVar[str] = "tool_call"
    function: str
    duration_seconds: float
    argument_bytes: int | None
    result_bytes: int | None
    result: str | None
    error_type: str | None
    error: str | None
    traceback: str | None


@dataclass(frozen=True, kw_only=True)
class CompactionStarted(TrajectoryEvent):
    """The root's messages reached the compaction threshold (``compaction=True``): a summary is
    asked for next, by one plain model call (``tokens``: estimates, docs/sessions.md)."""

    kind: ClassVar[str] = "compaction_start"
    count: int
    tokens_before: int
    threshold_tokens: int
    window_tokens: int
    messages_before: int


@dataclass(frozen=True, kw_only=True)
class CompactionFinished(TrajectoryEvent):
    """The messages were replaced by the summary; the REPL was not touched."""

    kind: ClassVar[str] = "compaction_end"
    count: int
    tokens_after: int
    messages_after: int
    summary_chars: int


@dataclass(frozen=True, kw_only=True)
class FinalAnswer(TrajectoryEvent):
    """An RLM node settled its answer; ``method`` is how (``FINAL``, ``FINAL_VAR``, ``callable``)."""

    kind: ClassVar[str] = "final_answer"
    answer: str
    method: str


@dataclass(frozen=True, kw_only=True)
class FinalAnswerRejected(TrajectoryEvent):
    """The run's ``final_answer_validator`` refused an answer; the model was shown the reason.

    Only sizes are kept: the answer and the reason may carry the context's text, and the reason
    reaches the trajectory through the next model call's messages anyway.
    """

    kind: ClassVar[str] = "final_answer_rejected"
    answer_chars: int
    reason_chars: int


@dataclass(frozen=True, kw_only=True)
class FinalAnswerValidated(TrajectoryEvent):
    """The run's ``final_answer_validator`` accepted the answer that ends the run."""

    kind: ClassVar[str] = "final_answer_validated"
    answer_chars: int


@dataclass(frozen=True, kw_only=True)
class ProviderResponseNormalized(TrajectoryEvent):
    """A reply was read in a documented non-literal way (0.5 API: null content as empty text)."""

    kind: ClassVar[str] = "provider_response_normalized"
    model: str
    reason: str


EVENT_TYPES: dict[str, type[TrajectoryEvent]] = {
    cls.kind: cls
    for cls in (
        RunStarted,
        RunFinished,
        RunFailed,
        RlmStarted,
        RlmFinished,
        RlmFailed,
        ModelCallStarted,
        ModelRetry,
        ModelCallFinished,
        ModelCallFailed,
        ReplStep,
        SubcallStarted,
        SubcallFinished,
        ToolCall,
        CompactionStarted,
        CompactionFinished,
        FinalAnswer,
        FinalAnswerRejected,
        FinalAnswerValidated,
        ProviderResponseNormalized,
    )
}
"""Every event class by its ``kind``."""


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [dict(m) if isinstance(m, dict) else m for m in value]
    if isinstance(value, dict):
        return dict(value)
    return value


def _redacted(value: Any) -> Any:
    """Text becomes ``{"chars": n}``; message lists keep roles with content lengths."""
    if isinstance(value, str):
        return {"chars": len(value)}
    if isinstance(value, list):
        return [{"role": m.get("role"), "content": {"chars": len(str(m.get("content", "")))}} for m in value]
    return value
