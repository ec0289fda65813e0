"""Compaction: when the root's messages near the model's window, earlier steps become a summary.

``RLM(..., compaction=True)`` (rlms' keyword; off by default, as in 2fb46cc and 0.5.0). Before
each model call of the root after its first, the messages' size is estimated
(:func:`estimate_tokens`); at ``compaction_threshold_pct`` of the window
(``context_window_tokens``, else litellm's figure for the model), one model call asks for a summary
of the work so far, and the messages become the system prompt, the first user message, the summary
and a note that lists the REPL's variables by name and type. The REPL is not touched: every
variable stays. The call is a plain model call (counted, budgeted, recorded like any); the
:class:`~rlm_compat.events.CompactionStarted` / :class:`~rlm_compat.events.CompactionFinished`
events around it carry the estimates before and after.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from ..sandbox import namespace_listing
from ..types import Message

__all__ = ["SUMMARY_REQUEST", "Compaction", "compacted", "estimate_tokens"]

CHARS_PER_TOKEN = 4
"""The estimate's rate: about four characters a token (English text and code, common tokenizers)."""
MESSAGE_TOKENS = 4
"""What each message adds besides its text (role and separators)."""

SUMMARY_REQUEST = (
    "Your conversation is about to be compacted: everything after the first user message will be "
    "replaced by your summary. Summarize your progress so far:\n"
    "1. Which steps or sub-tasks are done and which remain.\n"
    "2. Every concrete intermediate result (numbers, values, names) and which REPL variable holds it "
    "- preserve them exactly.\n"
    "3. What your next action should be.\n"
    "Be concise (one to three paragraphs). Reply with the summary only: no code, no FINAL."
)


def estimate_tokens(messages: list[Message]) -> int:
    """The messages' size in tokens, estimated from their characters (:data:`CHARS_PER_TOKEN`)."""
    chars = sum(len(str(message.get("content") or "")) for message in messages)
    return chars // CHARS_PER_TOKEN + MESSAGE_TOKENS * len(messages)


@dataclasses.dataclass(frozen=True)
class Compaction:
    """When a node's messages are compacted: at ``threshold_pct`` of ``window_tokens``."""

    window_tokens: int
    threshold_pct: float

    @property
    def threshold_tokens(self) -> int:
        return int(self.window_tokens * self.threshold_pct)

    def due(self, messages: list[Message], floor: int = 3) -> int | None:
        """The estimate when it has reached the threshold and there is something to compact: more
        than ``floor`` messages (the first two, or the list the last compaction left)."""
        if len(messages) <= floor:
            return None
        tokens = estimate_tokens(messages)
        return tokens if tokens >= self.threshold_tokens else None


def compacted(
    messages: list[Message], summary: str, count: int, variables: Mapping[str, str]
) -> list[Message]:
    """The system prompt and first user message, the summary, and where the REPL stands."""
    listing = ", ".join(f"{name} ({kind})" for name, kind in sorted(variables.items())) or "none"
    note = (
        f"Your conversation has been compacted ({count} time{'s' if count != 1 else ''}): the summary "
        "above replaces your earlier steps. The REPL is unchanged; its variables: "
        f"{listing}. Continue from the summary; do not repeat finished work."
    )
    return [*messages[:2], Message(role="assistant", content=summary), Message(role="user", content=note)]


def summary_messages(messages: list[Message]) -> list[Message]:
    """What the summary call sends: the conversation so far and the request."""
    return [*messages, Message(role="user", content=SUMMARY_REQUEST)]


def variable_types(env: Mapping[str, object]) -> dict[str, str]:
    """The REPL's variables by type name (a value living in the worker by the type it has there)."""
    listing = namespace_listing(env)
    for name in listing:
        stand_in = getattr(type(env[name]), "__rlm_stand_in__", None)
        if stand_in is not None:
            listing[name] = str(stand_in(env[name])[0])
    return listing
