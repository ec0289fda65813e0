"""The one REPL namespace contract: what a node's code finds in its REPL, for the loop and replay.

``context`` and ``query``; 0.5.0's ``answer`` dict; ``re``; the model-calling functions, each a
host function delegating to a :class:`~rlm_compat._loop.subcalls.SubCallProvider`; the user's
custom tools (host functions and plain values); and the
callable ``FINAL`` / ``FINAL_VAR`` writing into a :class:`~rlm_compat._loop.final.FinalBox`
(unless the profile's ``minimal_env`` leaves them out, as 2fb46cc does). A new REPL function is
added here once and reaches the loop and replay alike.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .._releases import Release
from ..profiles import Profile
from ..sandbox import host_call
from .final import FinalBox
from .subcalls import SubCallProvider

__all__ = ["Namespace", "build_namespace"]


@dataclasses.dataclass(frozen=True)
class Namespace:
    """A node's REPL namespace and the box its ``FINAL`` / ``FINAL_VAR`` fill."""

    env: dict[str, Any]
    box: FinalBox


def build_namespace(
    query: str,
    context: Any,
    provider: SubCallProvider,
    *,
    release: Release,
    profile: Profile,
    max_depth: int | None,
    tools: Mapping[str, Any] | None = None,
    into: dict[str, Any] | None = None,
) -> Namespace:
    """The namespace of a node asked ``query`` over ``context`` (``max_depth``: the run's limit).

    ``tools``: the node's custom tools (:meth:`~rlm_compat._loop.toolcalls.ToolCalls.entries`), a
    function each made a host function, a value placed as it is; their names never clash with the
    REPL's own (:data:`~rlm_compat.custom_tools.RESERVED_NAMES`, checked when the RLM is made).
    ``into``: a persistent session's namespace, whose other variables stay (default: a new one).
    """
    env: dict[str, Any] = {} if into is None else into
    env.update({"context": context, "query": query, **release.namespace_extras()})
    if not release.offers_query_functions(max_depth):
        env["re"] = re
    else:
        functions = _functions(provider, release)
        env["recursive_llm"] = host_call(functions["recursive_llm"])
        env["re"] = re
        if not profile.minimal_env:
            for name in ("llm_query", "llm_query_batched", "rlm_query", "rlm_query_batched"):
                env[name] = host_call(functions[name])
    for name, entry in (tools or {}).items():
        env[name] = host_call(entry) if callable(entry) else entry
    box = FinalBox(env)
    if not profile.minimal_env:
        env["FINAL"] = host_call(box.final, "answer")
        env["FINAL_VAR"] = host_call(box.final_var, "answer_var")
    return Namespace(env, box)


def _functions(provider: SubCallProvider, release: Release) -> dict[str, Callable[..., Any]]:
    """The functions as the model sees them: their names, signatures and docstrings."""

    def sync_recursive_llm(sub_query: str, sub_context: str) -> str:
        """Answer ``sub_query`` over ``sub_context`` with a child RLM one level deeper."""
        return provider.recursive_llm(sub_query, sub_context)

    # Observable: a wrong-arity call's TypeError names the qualified name, as 2fb46cc's does.
    sync_recursive_llm.__qualname__ = "RLM._make_recursive_fn.<locals>.sync_recursive_llm"

    def llm_query(prompt: str, model: str | None = None) -> str:
        """One plain model call (no REPL) with ``prompt`` as the user message."""
        return provider.llm_query(prompt, model)

    def llm_query_with_context(query: str, context: str = "", model: str | None = None) -> str:
        """One plain model call (no REPL) answering ``query`` over ``context``."""
        return provider.llm_query_with_context(query, context, model)

    llm_query_with_context.__name__ = "llm_query"

    def llm_query_batched(prompts: Iterable[Any], model: str | None = None) -> list[str]:
        """Concurrent plain model calls, answers in prompt order; a failed one reads 'Error: ...'."""
        return provider.llm_query_batched(prompts, model)

    def rlm_query(query: str, context: str = "") -> str:
        """Answer ``query`` over ``context`` with a child RLM (its own REPL) one level deeper."""
        return provider.rlm_query(query, context)

    def rlm_query_batched(queries: Iterable[Any], contexts: Iterable[Any] | None = None) -> list[str]:
        """Child RLMs run concurrently, answers in order; a failed one reads 'Error: ...'."""
        return provider.rlm_query_batched(queries, contexts)

    functions: list[Callable[..., Any]] = [
        llm_query_with_context if release.api.llm_query_takes_context else llm_query,
        llm_query_batched,
        rlm_query,
        rlm_query_batched,
    ]
    for function in functions:
        function.__qualname__ = function.__name__
    named = {f.__name__: f for f in functions}
    named["recursive_llm"] = rlm_query if release.api.depth_is_subcall_capability else sync_recursive_llm
    return named
