"""One node's REPL session: its REPL, its namespace, its messages and its iteration count.

Everything a node's loop changes lives here, made per node and dropped with it; nothing is
written on the RLM facade, so concurrent runs of one RLM never share a namespace, a worker or a
message list.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ..errors import RAN_AND_FAILED, MaxIterationsError, REPLError, RLMError, StepFailure
from ..events import (
    CompactionFinished,
    CompactionStarted,
    FinalAnswer,
    FinalAnswerRejected,
    FinalAnswerValidated,
    ReplStep,
)
from ..parser import FinalResolution
from ..record import Run
from ..repl import REPLExecutor
from ..settings import Settings
from ..types import Message
from .compaction import Compaction, compacted, estimate_tokens, summary_messages, variable_types
from .final import NOTHING, WITHHOLDING, FinalResolver, Outcome
from .namespace import Namespace
from .tally import Tally

__all__ = ["NodeSession", "observe", "observe_step"]


ModelCall = Callable[..., Awaitable[str]]


class NodeSession:
    """The loop of one RLM node over its own REPL session (released by :meth:`close`)."""

    def __init__(
        self,
        settings: Settings,
        run: Run,
        node: str,
        repl: REPLExecutor,
        namespace: Namespace,
        resolver: FinalResolver,
        *,
        system_prompt: str,
        query: str,
        tally: Tally,
        cancel_subcalls: Callable[[], None],
        owns_repl: bool = True,
    ) -> None:
        self.settings, self.run, self.node, self.repl = settings, run, node, repl
        self.env, self.box, self.resolver, self.tally = namespace.env, namespace.box, resolver, tally
        self.loop = asyncio.get_running_loop()
        self.messages: list[Message] = [
            Message(role="system", content=system_prompt),
            Message(role="user", content=query),
        ]
        self.iterations = 0
        self.compactions = 0
        self.compaction = _compaction(settings)
        self._compacted_to = 3
        self.steps: list[dict[str, Any]] = []
        """Each step's ``code``, ``output`` and ``error`` (a persistent session's ``history_N``)."""
        self._owns_repl = owns_repl
        self._cancel_subcalls = cancel_subcalls
        self._thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="rlm-repl")
        self._aborted = False

    @property
    def aborted(self) -> bool:
        """Whether the node's run was cancelled mid-way (its worker killed)."""
        return self._aborted

    def close(self) -> None:
        """Release the node's REPL (a persistent session's stays open for its next call)."""
        if not self._owns_repl:
            self._thread.shutdown(wait=False)
            return
        if self._aborted:
            # The worker is already killed; its step's thread still holds the REPL until it sees
            # that. Closing here would wait for it on the event loop (~0.2 s per cancelled run,
            # every other run stalled meanwhile), so the close follows the step on its own thread.
            self._thread.submit(self.repl.close)
        else:
            self.repl.close()
        self._thread.shutdown(wait=False)

    async def iterate(self, call_model: ModelCall, kwargs: dict[str, Any]) -> str:
        """Call the model and run its code until the node has an answer (or MaxIterationsError)."""
        try:
            return await self._iterate(call_model, kwargs)
        except asyncio.CancelledError:
            # The caller stopped this run: stop its sub-calls and its step now. Waiting for the
            # REPL thread here would block the loop the thread may be waiting on.
            self._cancel_subcalls()
            self.repl.abort()
            self._aborted = True
            raise

    async def _iterate(self, call_model: ModelCall, kwargs: dict[str, Any]) -> str:
        settings, messages = self.settings, self.messages
        sent = 0
        for iteration in range(1, settings.max_iterations + 1):
            self.iterations = self.tally.iterations = iteration
            if iteration > 1 and await self._compact(call_model, kwargs):
                sent = 0  # the list was rewritten: the next call records it whole
            response = await call_model(
                self.run, self.node, messages, is_leaf=False, iteration=iteration, sent=sent, **kwargs
            )
            sent = len(messages)
            feedback = settings.api.empty_response_feedback
            if feedback is not None and not response.strip():
                messages.append(Message(role="assistant", content=response))
                messages.append(Message(role="user", content=feedback))
                continue
            answer, observation = await self._turn(iteration, response)
            if answer is not None:
                return answer
            messages.append(Message(role="assistant", content=response))
            messages.append(Message(role="user", content=observation))
        raise MaxIterationsError(settings.release.max_iterations_message(settings.max_iterations))

    async def _compact(self, call_model: ModelCall, kwargs: dict[str, Any]) -> bool:
        """Replace the earlier steps by a summary if the messages reached the threshold."""
        policy, messages = self.compaction, self.messages
        tokens = None if policy is None else policy.due(messages, self._compacted_to)
        if policy is None or tokens is None:
            return False
        self.compactions += 1
        where = {"depth": self.settings.depth, "node_id": self.node, "count": self.compactions}
        self.run.emit(
            CompactionStarted,
            **where,
            tokens_before=tokens,
            threshold_tokens=policy.threshold_tokens,
            window_tokens=policy.window_tokens,
            messages_before=len(messages),
        )
        summary = await call_model(
            self.run, self.node, summary_messages(messages), is_leaf=True, iteration=None, **kwargs
        )
        listing = await self.loop.run_in_executor(self._thread, variable_types, self.env)
        messages[:] = compacted(messages, summary, self.compactions, listing)
        self._compacted_to = len(messages)
        self.run.emit(
            CompactionFinished,
            **where,
            tokens_after=estimate_tokens(messages),
            messages_after=len(messages),
            summary_chars=len(summary),
        )
        return True

    async def _turn(self, iteration: int, response: str) -> tuple[str | None, str]:
        """One reply: ``(answer, "")`` when it ends the node, else ``(None, observation)``."""
        settle = functools.partial(
            self.resolver.settle, response, self.env, functools.partial(self.repl.render, self.env)
        )
        observation: str | None = None
        # a standalone directive (0.5) is the answer, never code to run
        if self.resolver.first:
            self.run.budget.check()  # a reply that crossed a token or cost limit ends nothing
            early = await self.loop.run_in_executor(self._thread, settle)
            if early.answer is not None:
                observation = await self._rejection(str(early.answer))
                if observation is None:
                    return self._settled(str(early.answer), early.method or self.resolver.method), ""
        if observation is not None:
            return None, observation
        observation, failure = await self._step(iteration, response)
        withheld = failure is not None and self.resolver.withholds(response, failure)
        called = self.box.answer
        if withheld:
            # The model expected its code to have run: a FINAL / FINAL_VAR written beside
            # code that raised (or a FINAL it called before raising) does not end the run.
            self.box.answer = None
        outcome = await self._outcome(settle)
        if withheld and (called is not None or outcome.answer is not None):
            outcome = WITHHOLDING
        if outcome.answer is not None:
            rejection = await self._rejection(outcome.answer)
            if rejection is None:
                return self._settled(outcome.answer, outcome.method), ""
            return None, f"{observation}\n{rejection}"
        return None, f"{observation}\n{outcome.feedback}" if outcome.feedback else observation

    async def _step(self, iteration: int, response: str) -> tuple[str, StepFailure | None]:
        """Execute the response in the node's REPL and record it; the observation for the model
        and how the step failed (None: it did not)."""
        started = time.perf_counter()
        remaining = self.run.budget.remaining_seconds()
        if remaining is not None and remaining <= 0:
            self.run.budget.expire()
        observation, failure = await self.loop.run_in_executor(
            self._thread, observe_step, self.repl, response, self.env, remaining
        )
        self.steps.append({"code": response, "output": observation, "error": failure is not None})
        self.run.emit(
            ReplStep,
            depth=self.settings.depth,
            node_id=self.node,
            iteration=iteration,
            code=response,
            output=observation,
            error=failure is not None,
            duration_seconds=round(time.perf_counter() - started, 6),
            runner=self.repl.isolation,
        )
        self.run.budget.check()
        return observation, failure

    async def _outcome(self, settle: Callable[[], FinalResolution]) -> Outcome:
        """After a step: the answer it gave (the callable's, 0.5.0's ``answer`` dict, or the reply
        parsed after the code ran), else the parse's feedback."""
        if self.box.answer is not None:
            return Outcome(self.box.answer, "callable")
        published = self.repl.pop_final_answer()
        if published is not None:
            return Outcome(published, "answer")
        if self.resolver.first:
            return NOTHING
        late = await self.loop.run_in_executor(self._thread, settle)
        if late.answer is not None:
            return Outcome(str(late.answer), late.method or self.resolver.method)
        return Outcome(feedback=late.feedback)

    async def _rejection(self, answer: str) -> str | None:
        """The validator's verdict on a final answer: None to accept, else feedback for the model.

        Only the root's settings carry a validator (:meth:`Settings.child` drops it). A rejected
        answer is withdrawn from the REPL (the callable FINAL's box, the ``answer`` dict), so the
        next step starts undecided. A validator that raises, or returns anything but None or a
        non-empty string, ends the run with RLMError: it is the application's bug, not the model's.
        """
        validator = self.settings.final_answer_validator
        if validator is None:
            return None
        try:
            verdict = await asyncio.to_thread(validator, answer)
        except Exception as exc:
            raise RLMError(f"Final-answer validator failed: {type(exc).__name__}: {exc}") from exc
        self.run.budget.check()
        where = {"depth": self.settings.depth, "node_id": self.node, "answer_chars": len(answer)}
        if verdict is None:
            self.run.emit(FinalAnswerValidated, **where)
            return None
        if not isinstance(verdict, str) or not verdict.strip():
            raise RLMError(
                "Final-answer validator must return None or a non-empty string (the reason shown "
                f"to the model), not {verdict!r}"
            )
        self.run.emit(FinalAnswerRejected, **where, reason_chars=len(verdict))
        self.box.answer = None
        if self.settings.release.answer_ready(self.env.get("answer")):
            self.repl.reset_final_answer()
        return f"Final answer rejected by validator: {verdict}\nFix the answer and give a final answer again."

    def _settled(self, answer: str, method: str) -> str:
        self.run.emit(FinalAnswer, depth=self.settings.depth, node_id=self.node, answer=answer, method=method)
        return answer


def _compaction(settings: Settings) -> Compaction | None:
    window = settings.context_window_tokens
    if not settings.compaction or window is None:
        return None
    return Compaction(window, settings.compaction_threshold_pct)


def observe_step(
    repl: REPLExecutor, response: str, env: dict[str, Any], deadline: float | None = None
) -> tuple[str, StepFailure | None]:
    """Execute a response; the next user message (upstream's texts) and how the step failed
    (None: it did not).

    ``deadline``: the run's remaining wall time (``max_elapsed_seconds``), which caps the step's
    ``repl_timeout`` so one long step cannot outlive the run's budget. Replay uses it too, so a
    replayed step's observation is the loop's.
    """
    try:
        return repl.execute(response, env, timeout=deadline), None
    except REPLError as exc:
        return f"Error: {exc}", exc.failure
    except Exception as exc:  # upstream feeds any other failure back too
        return f"Unexpected error: {exc}", RAN_AND_FAILED


def observe(
    repl: REPLExecutor, response: str, env: dict[str, Any], deadline: float | None = None
) -> tuple[str, bool]:
    """:func:`observe_step`'s observation and whether the step failed."""
    observation, failure = observe_step(repl, response, env, deadline)
    return observation, failure is not None
