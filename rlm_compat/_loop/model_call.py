"""One model call of the loop: reserved in the budget, recorded as it starts, retries and ends.

An attempt returns a typed outcome, :class:`Reply` or :class:`RetryAfter`; the caller loops on the
second. A transient failure is retried here by the settings' :class:`~rlm_compat.retry.RetryPolicy`,
each attempt its own reserved and recorded call. The client never retries
(:class:`~rlm_compat.clients.LiteLLMClient` switches litellm's and the provider SDK's retries off):
retries made below this loop would be invisible to the stats, the budget and the trajectory.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable
from typing import Any, TypeVar

from ..clients import LLMClient, ModelReply
from ..errors import BudgetExceededError, ProviderResponseError
from ..events import (
    ModelCallFailed,
    ModelCallFinished,
    ModelCallStarted,
    ModelRetry,
    ProviderResponseNormalized,
)
from ..record import Run, RunBudget
from ..settings import Settings
from ..settings.run_config import messages_digest
from ..types import Message
from .tally import Tally

__all__ = ["ModelCaller", "Reply", "RetryAfter"]

_T = TypeVar("_T")


@dataclasses.dataclass(frozen=True)
class Reply:
    """The model's text."""

    content: str


@dataclasses.dataclass(frozen=True)
class RetryAfter:
    """The attempt failed transiently: try again after ``seconds``."""

    seconds: float


@dataclasses.dataclass(frozen=True)
class _Call:
    """What every attempt of one call shares."""

    run: Run
    node: str
    messages: list[Message]
    model: str
    kwargs: dict[str, Any]
    is_leaf: bool
    iteration: int | None
    sent: int
    depth: int


class ModelCaller:
    """The model calls of one RLM node, through ``client``, counted in ``tally``."""

    def __init__(self, settings: Settings, client: LLMClient, tally: Tally) -> None:
        self.settings, self.client, self.tally = settings, client, tally

    async def call(
        self,
        run: Run,
        node: str,
        messages: list[Message],
        *,
        is_leaf: bool,
        iteration: int | None,
        sent: int = 0,
        **kwargs: Any,
    ) -> str:
        """The reply text; ``sent``: how many of ``messages`` the record already holds."""
        settings = self.settings
        model = kwargs.pop("model", None) or settings.node_model
        call_kwargs = {**settings.llm_kwargs, **kwargs}
        if settings.api_base:
            call_kwargs["api_base"] = settings.api_base
        if settings.api_key:
            call_kwargs["api_key"] = settings.api_key
        depth = settings.depth + 1 if is_leaf else settings.depth
        call = _Call(run, node, messages, model, call_kwargs, is_leaf, iteration, sent, depth)
        attempt = 1
        while True:
            outcome = await self._attempt(call, attempt)
            if isinstance(outcome, Reply):
                return outcome.content
            remaining = run.budget.remaining_seconds()
            if remaining is not None and outcome.seconds >= remaining:
                run.budget.expire()  # the next attempt could not start before the deadline
            run.emit(
                ModelRetry,
                depth=depth,
                node_id=node,
                parent_id=node,
                model=model,
                attempt=attempt + 1,
                delay_seconds=round(outcome.seconds, 6),
                failed_attempt=attempt,
                next_attempt=attempt + 1,
            )
            await asyncio.sleep(outcome.seconds)
            attempt += 1

    async def _attempt(self, call: _Call, attempt: int) -> Reply | RetryAfter:
        """One provider request: its reply, or the delay before the next attempt."""
        run = call.run
        run.budget.reserve_call()
        self.tally.count_call()
        where = {
            "depth": call.depth,
            "node_id": run.node_id("call"),
            "parent_id": call.node,
            "model": call.model,
        }
        run.emit(
            ModelCallStarted,
            **where,
            is_leaf=call.is_leaf,
            iteration=call.iteration,
            message_count=len(call.messages),
            messages_digest=messages_digest(call.messages),
            messages=tuple(Message(role=m["role"], content=m["content"]) for m in call.messages[call.sent :]),
            attempt=attempt,
        )
        started = time.perf_counter()
        try:
            figures = await self._request(call, where)
        except BaseException as exc:
            delay = None if isinstance(exc, BudgetExceededError) else self.settings.retry.delay(attempt, exc)
            run.emit(
                ModelCallFailed,
                **where,
                is_leaf=call.is_leaf,
                error_type=type(exc).__name__,
                error=str(exc),
                latency_seconds=round(time.perf_counter() - started, 6),
                retrying=delay is not None,
            )
            if delay is not None:
                return RetryAfter(delay)
            raise
        content = figures.content
        assert isinstance(content, str)  # _request checked it
        run.emit(
            ModelCallFinished,
            **where,
            is_leaf=call.is_leaf,
            reply=content,
            prompt_tokens=figures.prompt_tokens,
            completion_tokens=figures.completion_tokens,
            total_tokens=figures.total_tokens,
            cached_tokens=figures.cached_tokens,
            cost_usd=figures.cost_usd,
            latency_seconds=round(time.perf_counter() - started, 6),
        )
        return Reply(content)

    async def _request(self, call: _Call, where: dict[str, Any]) -> ModelReply:
        """The client's reply with text content (a null content read as "" where the preset says)."""
        # A copy, so a client (or a mock recording call args) never sees later appends.
        request = self.client.complete(call.model, list(call.messages), **call.kwargs)
        reply = await within_budget(call.run.budget, request)
        figures = reply if isinstance(reply, ModelReply) else ModelReply(content=reply)
        if figures.content is None and self.settings.api.null_content_is_empty:
            call.run.emit(
                ProviderResponseNormalized, **where, reason="null content read as an empty response"
            )
            figures = dataclasses.replace(figures, content="")
        if not isinstance(figures.content, str):
            raise ProviderResponseError(
                f"model {call.model!r} returned {type(figures.content).__name__} content instead of text; "
                "RLM needs a plain text reply (tool calls and empty replies are not supported)"
            )
        return figures


async def within_budget(budget: RunBudget, call: Awaitable[_T]) -> _T:
    """Await a model call, cut off when the run's wall-time budget runs out."""
    remaining = budget.remaining_seconds()
    if remaining is None:
        return await call
    # not wait_for: a provider's own timeout error must stay its own (retryable), not the deadline
    task = asyncio.ensure_future(call)
    try:
        done, _ = await asyncio.wait({task}, timeout=remaining)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if not done:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        budget.expire()
    return task.result()
