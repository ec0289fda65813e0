"""The OpenAI chat-completions parameters beyond ``model`` and ``messages``: what each one does here.

An RLM's answer is not one completion: the root model writes code over several calls, sub-calls
answer the code's questions, and the answer is what the code hands to ``FINAL``. So a parameter is
passed on only where it means the same thing for the root model's calls (sampling, a per-call output
cap, a seed); a parameter whose promise this server cannot keep (tools, a response format, stop
sequences, log-probabilities) is refused with 400 ``unsupported_parameter`` rather than dropped, so
a client never believes it got what it asked for. docs/serve.md has the table.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from .api_errors import ApiError

__all__ = ["HANDLED", "NO_EFFECT", "REFUSED", "ROOT_CALL", "root_call_options"]

HANDLED = frozenset({"model", "messages", "stream", "stream_options", "n", "rlm"})
"""Read by the request parser itself."""


def _number(low: float, high: float) -> Callable[[Any], bool]:
    def check(value: Any) -> bool:
        return (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and math.isfinite(value)
            and low <= value <= high
        )

    return check


def _integer(low: int) -> Callable[[Any], bool]:
    def check(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= low and value < 2**63

    return check


ROOT_CALL: dict[str, tuple[Callable[[Any], bool], str]] = {
    "temperature": (_number(0, 2), "a number from 0 to 2"),
    "top_p": (_number(0, 1), "a number from 0 to 1"),
    "presence_penalty": (_number(-2, 2), "a number from -2 to 2"),
    "frequency_penalty": (_number(-2, 2), "a number from -2 to 2"),
    "seed": (_integer(-(2**63)), "an integer"),
    "max_tokens": (_integer(1), "an integer >= 1"),
    "max_completion_tokens": (_integer(1), "an integer >= 1"),
    "reasoning_effort": (lambda v: v in ("minimal", "low", "medium", "high"), "minimal, low, medium or high"),
}
"""Passed to every call of the root model (each iteration of its loop), not to sub-calls: those use
the model's configured settings. ``max_tokens`` caps each root call's output, not the answer."""

NO_EFFECT: dict[str, tuple[Callable[[Any], bool], str]] = {
    "user": (lambda v: isinstance(v, str), "a string"),
    "tools": (lambda v: v == [], "empty"),
    "tool_choice": (lambda v: v in ("none", "auto"), "'none' (this server calls no client tools)"),
    "parallel_tool_calls": (lambda v: isinstance(v, bool), "true or false"),
    "response_format": (lambda v: v == {"type": "text"}, '{"type": "text"}'),
    "logprobs": (lambda v: v is False, "false"),
    "stop": (lambda v: v == [], "empty"),
    "logit_bias": (lambda v: v == {}, "empty"),
    "store": (lambda v: v is False, "false"),
}
"""Accepted only with a value that asks for nothing (or null): ``user`` is accepted and unused (this
server keeps no per-user accounting); the others asked for more are refused, with REFUSED's reason."""

REFUSED: dict[str, str] = {
    "tools": "an RLM answers in text and calls no client tools",
    "tool_choice": "an RLM answers in text and calls no client tools",
    "functions": "an RLM answers in text and calls no client functions",
    "function_call": "an RLM answers in text and calls no client functions",
    "response_format": "the answer is what the RLM's code passes to FINAL; no format can be promised",
    "stop": "the answer is not one completion: stop sequences would cut the root model's code",
    "logprobs": "the answer is not one completion: it has no token log-probabilities",
    "top_logprobs": "the answer is not one completion: it has no token log-probabilities",
    "logit_bias": "token ids belong to one model, and a run calls several",
    "store": "this server stores no completions",
    "metadata": "this server stores no completions to tag",
    "service_tier": "a run's calls go to the provider with the model's own settings",
    "audio": "an RLM answers in text only",
    "modalities": "an RLM answers in text only",
    "prediction": "the answer is not one completion to predict",
    "web_search_options": "an RLM searches nothing but its context",
}


def root_call_options(body: dict[str, Any]) -> dict[str, Any]:
    """The body's parameters that reach the root model's calls; 400 for any this server cannot honour."""
    options: dict[str, Any] = {}
    for name, value in body.items():
        if name in HANDLED or value is None:
            continue
        if name in ROOT_CALL:
            check, wanted = ROOT_CALL[name]
            if not check(value):
                raise _bad(name, f"'{name}' must be {wanted}", code=None)
            options[name] = value
        elif name in NO_EFFECT and NO_EFFECT[name][0](value):
            continue
        elif name in NO_EFFECT:
            reason = REFUSED.get(name)
            wanted = NO_EFFECT[name][1]
            raise _bad(name, f"'{name}' must be {wanted} or null here" + (f": {reason}" if reason else ""))
        elif name in REFUSED:
            raise _bad(name, f"'{name}' is not supported here: {REFUSED[name]}")
        else:
            raise _bad(
                name,
                f"unrecognized request argument '{name}'; this server's parameters are listed in "
                "docs/serve.md (RLM options go in the 'rlm' object)",
            )
    if "max_tokens" in options and "max_completion_tokens" in options:
        raise _bad("max_tokens", "give 'max_tokens' or 'max_completion_tokens', not both", code=None)
    return options


def _bad(name: str, message: str, code: str | None = "unsupported_parameter") -> ApiError:
    return ApiError(400, message, param=name, code=code, retry=False)
