"""Typed shapes of the data upstream exposes in ``rlm.types`` (same names, same fields)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypedDict

__all__ = ["CompletionResult", "Message", "REPLEnvironment", "RLMConfig"]


class Message(TypedDict):
    """One chat message as sent to the model."""

    role: str
    content: str


class RLMConfig(TypedDict, total=False):
    """Configuration for an RLM instance."""

    model: str
    recursive_model: str | None
    api_base: str | None
    api_key: str | None
    max_depth: int
    max_iterations: int
    temperature: float
    timeout: int


class REPLEnvironment(TypedDict, total=False):
    """What the loop puts into the REPL namespace."""

    context: str
    query: str
    recursive_llm: Callable[[str, str], Awaitable[str]]
    re: Any


class CompletionResult(TypedDict):
    """Result of one completion, with the numbers ``RLM.stats`` reports."""

    answer: str
    iterations: int
    depth: int
    llm_calls: int
