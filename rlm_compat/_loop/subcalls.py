"""The REPL's model-calling functions: one provider protocol, the loop's provider, argument checks.

:class:`SubCallProvider` is what a REPL namespace's ``recursive_llm`` / ``llm_query`` /
``rlm_query`` ... functions call (:mod:`rlm_compat._loop.namespace` wraps them). The loop's
provider, :class:`LoopSubCalls`, runs them as model calls and child RLMs; replay's serves a
recording's answers. Both check arguments with the functions here, so a call the loop refuses
before asking the model is refused alike in replay.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol, TypeVar, cast

from ..errors import BudgetExceededError
from ..events import SubcallFinished, SubcallStarted
from ..record import Run
from ..settings import Settings
from ..types import Message
from .bridge import loop_running, run_on_loop

__all__ = [
    "DEPTH_TEXT",
    "LoopSubCalls",
    "SubCallProvider",
    "check_text",
    "query_pairs",
    "texts",
]

_T = TypeVar("_T")

DEPTH_TEXT = "Max recursion depth ({limit}) reached"
"""What 2fb46cc's ``recursive_llm`` returns at the depth limit, without starting a child."""

LeafCall = Callable[[list[Message], str | None], Awaitable[str]]
ChildCall = Callable[[str, str], Awaitable[str]]


class SubCallProvider(Protocol):
    """The model-calling functions of one node's REPL namespace (called from the REPL thread)."""

    def recursive_llm(self, sub_query: str, sub_context: str) -> str: ...

    def llm_query(self, prompt: str, model: str | None = None) -> str: ...

    def llm_query_with_context(self, query: str, context: str = "", model: str | None = None) -> str: ...

    def llm_query_batched(self, prompts: Iterable[Any], model: str | None = None) -> list[str]: ...

    def rlm_query(self, query: str, context: str = "") -> str: ...

    def rlm_query_batched(
        self, queries: Iterable[Any], contexts: Iterable[Any] | None = None
    ) -> list[str]: ...


class LoopSubCalls:
    """The loop's provider for one node.

    Its functions are called from the REPL thread while the node's loop waits for the step; each
    hands its work to that loop (one thread hop per call, however many model calls it makes) and
    records a sub-call start and end. Batches run up to ``max_concurrent_subcalls`` at once and
    answer in input order; a failed item reads ``"Error: <Type>: <message>"`` so the model sees
    which one failed, except a spent budget, which stops the whole batch and then the run.
    ``leaf(messages, model)`` makes a plain model call; ``child(query, context)`` runs a child node.
    """

    def __init__(
        self,
        settings: Settings,
        run: Run,
        node: str,
        loop: asyncio.AbstractEventLoop,
        *,
        leaf: LeafCall,
        child: ChildCall,
    ) -> None:
        self.settings, self.run, self.node, self.loop = settings, run, node, loop
        self._leaf_call, self._child_call = leaf, child
        self._lock = threading.Lock()
        self._pending: set[concurrent.futures.Future[Any]] = set()
        self._cancelled = False

    def cancel(self) -> None:
        """Cancel the sub-calls in flight (their run was cancelled); their callers see CancelledError."""
        with self._lock:
            self._cancelled = True
            pending = list(self._pending)
        for future in pending:
            future.cancel()

    # --- the functions ---------------------------------------------------------------------------

    def recursive_llm(self, sub_query: str, sub_context: str) -> str:
        """2fb46cc's ``recursive_llm``: a child RLM, or upstream's text at the depth limit."""
        if self._at_limit():
            return DEPTH_TEXT.format(limit=self.settings.max_depth)
        return self._call("recursive_llm", 1, self._child_call(sub_query, sub_context))

    def llm_query(self, prompt: str, model: str | None = None) -> str:
        check_text("llm_query(prompt)", prompt)
        return self._call("llm_query", 1, self._leaf(prompt, model))

    def llm_query_with_context(self, query: str, context: str = "", model: str | None = None) -> str:
        check_text("llm_query(query)", query)
        check_text("llm_query(context)", context)
        return self._call("llm_query", 1, self._leaf(self._leaf_prompt(query, context), model))

    def llm_query_batched(self, prompts: Iterable[Any], model: str | None = None) -> list[str]:
        items = texts("llm_query_batched(prompts)", prompts)
        work = self._batch([functools.partial(self._leaf, p, model) for p in items])
        return self._call("llm_query_batched", len(items), work)

    def rlm_query(self, query: str, context: str = "") -> str:
        check_text("rlm_query(query)", query)
        check_text("rlm_query(context)", context)
        return self._call("rlm_query", 1, self._rlm(query, context))

    def rlm_query_batched(self, queries: Iterable[Any], contexts: Iterable[Any] | None = None) -> list[str]:
        items, given = query_pairs(queries, contexts)
        work = self._batch([functools.partial(self._rlm, q, c) for q, c in zip(items, given, strict=True)])
        return self._call("rlm_query_batched", len(items), work)

    # --- what they run on the loop ---------------------------------------------------------------

    def _at_limit(self) -> bool:
        return self.settings.depth + 1 >= self.settings.max_depth

    def _call(self, function: str, count: int, work: Awaitable[_T]) -> _T:
        coro = self._recorded(function, count, work)
        if not self.loop.is_running() or loop_running(self.loop):
            return run_on_loop(self.loop, coro)
        with self._lock:  # scheduled and registered at once: a cancel() in between would miss it
            if self._cancelled:
                coro.close()
                raise concurrent.futures.CancelledError()
            future = asyncio.run_coroutine_threadsafe(coro, self.loop)
            self._pending.add(future)
        try:
            return future.result()
        finally:
            with self._lock:
                self._pending.discard(future)

    async def _recorded(self, function: str, count: int, work: Awaitable[_T]) -> _T:
        depth = self.settings.depth
        self.run.emit(SubcallStarted, depth=depth, node_id=self.node, function=function, count=count)
        started = time.perf_counter()
        errors = count
        try:
            result = await work
            if isinstance(result, list):
                errors = sum(1 for r in result if isinstance(r, _ItemError))
                return cast(_T, [str(r) for r in result])  # plain str into the sandbox
            errors = 0
            return result
        finally:
            self.run.emit(
                SubcallFinished,
                depth=depth,
                node_id=self.node,
                function=function,
                count=count,
                errors=errors,
                duration_seconds=round(time.perf_counter() - started, 6),
            )

    def _leaf_prompt(self, query: str, context: str) -> str:
        """The user message of a plain model call asked ``query`` over ``context``."""
        return self.settings.release.leaf_prompt(query, context)

    async def _leaf(self, prompt: str, model: str | None) -> str:
        messages = [Message(role="user", content=prompt)]
        system = self.settings.api.leaf_system_prompt
        if system is not None:
            messages.insert(0, Message(role="system", content=system))
        return await self._leaf_call(messages, model)

    async def _rlm(self, query: str, context: str) -> str:
        """A child RLM; at the depth limit a plain model call over query and context instead."""
        if self._at_limit():
            return await self._leaf(self._leaf_prompt(query, context), None)
        return await self._child_call(query, context)

    async def _batch(self, jobs: list[Callable[[], Awaitable[str]]]) -> list[str]:
        limit = asyncio.Semaphore(self.settings.max_concurrent_subcalls)
        spent: list[BudgetExceededError] = []

        async def one(job: Callable[[], Awaitable[str]]) -> str:
            async with limit:
                if spent:
                    return _ItemError(f"Error: BudgetExceededError: {spent[0]}")
                try:
                    return await job()
                except BudgetExceededError as exc:
                    spent.append(exc)
                    return _ItemError(f"Error: BudgetExceededError: {exc}")
                except Exception as exc:
                    return _ItemError(f"Error: {type(exc).__name__}: {exc}")

        answers = list(await asyncio.gather(*(one(job) for job in jobs)))
        if spent:
            raise spent[0]
        return answers


class _ItemError(str):
    """A batch item's error text (a plain str to the model; counted as an error in the record)."""

    __slots__ = ()


def check_text(what: str, value: Any) -> None:
    """A sub-call's text argument, or TypeError naming it."""
    if not isinstance(value, str):
        raise TypeError(f"{what} needs a str, not {type(value).__name__}")


def texts(what: str, values: Any) -> list[str]:
    """A batch's list of str, or TypeError naming it."""
    items = [] if isinstance(values, str) else list(values)
    if isinstance(values, str) or not all(isinstance(v, str) for v in items):
        raise TypeError(f"{what} needs a list of str")
    return items


def query_pairs(queries: Iterable[Any], contexts: Iterable[Any] | None) -> tuple[list[str], list[str]]:
    """rlm_query_batched's arguments checked: the queries and one context per query ("" if none)."""
    items = texts("rlm_query_batched(queries)", queries)
    given = [""] * len(items) if contexts is None else texts("rlm_query_batched(contexts)", contexts)
    if len(given) != len(items):
        raise ValueError(
            f"rlm_query_batched got {len(items)} queries but {len(given)} contexts; pass one context "
            "per query, or none"
        )
    return items, given
