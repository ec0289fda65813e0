"""The RLM loop: prompt -> response -> code -> observation -> message.

Drop-in for ``rlm.core`` of ysz/recursive-llm (2fb46cc and cc7a826): same constructor, both method
names (``completion`` / ``complete`` and their async twins), same message layout, same error strings
fed back to the model, same ``stats``. ``rlm_compat.core.litellm`` is the patch point upstream's tests
use (``patch("rlm.core.litellm.acompletion")``); it is a lazy module, so importing this package does
not import litellm.

What differs is chosen by the :class:`~rlm_compat.profiles.Profile` handed in; the loop reads its
switches as data (``final_before_exec``, ``upstream_parser``, ``minimal_env``) in one place each.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import functools
import os
import re
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from typing import Any, TypeVar, cast

from . import parser as _parser
from . import parser_v050 as _parser_v050
from ._lazy import LazyModule
from .clients import LiteLLMClient, LLMClient, ModelReply
from .config import Limits, ReplConfig, WorkerResourceLimits
from .errors import (
    BudgetExceededError,
    ConfigurationError,
    MaxDepthError,
    MaxIterationsError,
    ProviderResponseError,
    RLMError,
)
from .events import (
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
    SubcallFinished,
    SubcallStarted,
    TrajectoryEvent,
)
from .options import check_call_options, split_rlm_options
from .profiles import Profile, resolve_profile
from .prompts import build_system_prompt
from .record import CompletionResult, FailedCompletionResult, Observer, Run, RunBudget, RunResult, TreeStats
from .record.run_config import messages_digest, run_config
from .record.shape_v050 import ReleaseShaper
from .record.trajectory import TrajectoryWriter
from .repl import REPLError, REPLExecutor
from .repl_v050 import DEFAULT_SNAPSHOT_BYTES, check_snapshot_bytes
from .retry import RetryPolicy
from .sandbox import host_call
from .sandbox.fences import fenced_blocks
from .types import Message

__all__ = [
    "RLM",
    "BudgetExceededError",
    "CompletionResult",
    "FailedCompletionResult",
    "MaxDepthError",
    "MaxIterationsError",
    "Message",
    "REPLError",
    "REPLExecutor",
    "RLMError",
    "build_system_prompt",
    "is_final",
    "litellm",
    "parse_response",
]

litellm = LazyModule("litellm")

is_final = _parser.is_final
parse_response = _parser.parse_response

_T = TypeVar("_T")


def _resource_limits(memory_mb: Any, cpu_seconds: Any, open_files: Any) -> WorkerResourceLimits:
    """0.5.0's ``repl_*`` limit keywords, checked; an error names the keyword the caller used."""
    try:
        return WorkerResourceLimits(
            memory_mb=memory_mb, cpu_time_seconds=cpu_seconds, max_open_files=open_files
        )
    except ConfigurationError as exc:
        text = str(exc)
        for field, keyword in _RESOURCE_KEYWORDS:
            if text.startswith(field):
                text = keyword + text[len(field) :]
        raise ConfigurationError(text) from None


_RESOURCE_KEYWORDS = (
    ("memory_mb", "repl_memory_limit_mb"),
    ("cpu_time_seconds", "repl_cpu_time_limit_seconds"),
    ("max_open_files", "repl_max_open_files"),
)


def run_sync(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coro`` to completion from synchronous code, even inside a running event loop.

    Upstream calls ``asyncio.run`` and so fails when a loop is already running in this thread
    (Jupyter, an async web handler); here the coroutine then runs on a loop in a helper thread.
    """
    if not _loop_running():
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="rlm-sync") as pool:
        return pool.submit(asyncio.run, coro).result()


class _FinalBox:
    """Where the REPL's callable ``FINAL`` / ``FINAL_VAR`` leave the answer for the loop.

    The texts arrive already made on the sandbox's side (host function kinds ``answer`` and
    ``answer_var``): a model-defined ``__str__`` never runs here.
    """

    def __init__(self, env: Mapping[str, Any]) -> None:
        self._env = env
        self.answer: str | None = None
        self.missing = False
        """The step's callable FINAL_VAR raised for want of the variable: the step failed at the
        directive itself, after the code before it ran (``FINAL_VAR(answer)`` passes a value)."""

    def final(self, text: str) -> None:
        """FINAL(value): end the run after this step with ``str(value)``."""
        if self.answer is None:
            self.answer = text

    def final_var(self, name: Any, text: str | None) -> None:
        """FINAL_VAR(name): end the run after this step with ``str(env[name])``."""
        if text is None:
            key = name if isinstance(name, str) else repr(name)
            self.missing = True
            raise _parser.missing_variable_error(key, self._env)
        self.final(text)


class RLM:
    """Recursive Language Model: answers a query over ``context`` held in a REPL, not in the prompt."""

    def __init__(
        self,
        model: str,
        recursive_model: str | None = None,
        api_base: str | None = None,
        api_key: str | None = None,
        max_depth: int | None = None,
        max_iterations: int = 30,
        _current_depth: int = 0,
        *,
        profile: str | Profile | None = None,
        prompt_version: str | None = None,
        client: LLMClient | None = None,
        repl_timeout: float | None = 5,
        max_output_chars: int = 2000,
        isolation: str | None = None,
        limits: Limits | None = None,
        repl_config: ReplConfig | None = None,
        on_event: Observer | None = None,
        event_handler: Observer | None = None,
        observers: Iterable[Observer] = (),
        trajectory_path: str | os.PathLike[str] | None = None,
        capture_trajectory_content: bool | None = None,
        max_total_calls: int | None = None,
        max_total_tokens: int | None = None,
        max_total_cost_usd: float | None = None,
        max_elapsed_seconds: float | None = None,
        max_concurrent_subcalls: int | None = None,
        max_retries: int | None = None,
        final_answer_validator: Callable[[str], str | None] | None = None,
        completion_handler: Callable[..., Awaitable[Any]] | None = None,
        retry_backoff_seconds: float | None = None,
        repl_max_snapshot_bytes: int | None = None,
        repl_memory_limit_mb: int | None = None,
        repl_cpu_time_limit_seconds: int | None = None,
        repl_max_open_files: int | None = None,
        **llm_kwargs: Any,
    ) -> None:
        """Same positional parameters as upstream; keyword-only additions default to its behaviour.

        ``profile``: ``"fixed"`` (default, or ``$RLM_COMPAT_PROFILE``), ``"upstream"`` or a Profile.
        ``prompt_version``: ``"cc7a826"``, ``"2fb46cc"`` or ``"0.5.0"``, that release's exact
        system prompt (None: the API preset's, cc7a826 or under ``api="0.5"`` 0.5.0).
        ``client``: where model calls go; default litellm through ``rlm_compat.core.litellm``.
        ``repl_timeout``, ``max_output_chars``, ``isolation``, ``limits``: the REPL's
        :class:`~rlm_compat.config.ReplConfig` (or pass ``repl_config`` whole); child RLMs
        inherit it. Other keywords: model-call options, ``provider_options={...}`` or ``api=``,
        sorted by :mod:`rlm_compat.options` (an unknown one gets an UnknownOptionWarning naming it,
        never a silent pass-through).

        The run record (recursive-llm 0.5.0's names where it has them): ``on_event`` /
        ``event_handler`` / ``observers`` are called with every
        :class:`~rlm_compat.events.TrajectoryEvent` of a run, in order; ``trajectory_path`` writes
        each run's events there as JSON lines (``capture_trajectory_content=False``: lengths
        instead of texts; its default is the API preset's, False under ``api="0.5"``, whose
        result trajectory and handlers get 0.5.0's event shape); ``max_total_calls`` /
        ``max_total_tokens`` / ``max_total_cost_usd`` /
        ``max_elapsed_seconds`` bound each run's whole tree (BudgetExceededError);
        ``max_concurrent_subcalls`` bounds the model calls of one ``llm_query_batched`` /
        ``rlm_query_batched``; ``max_retries`` / ``retry_backoff_seconds``: how often the RLM
        retries a transient provider failure (429, 5xx, timeout, dropped connection) and the
        first delay, doubled per attempt, or the provider's ``Retry-After`` when longer (None:
        the API preset's, 2 and 0.5 s as the openai SDK 2fb46cc relied on; 0.5.0's 0 and 1 s);
        every attempt is a counted, budgeted, recorded call (the SDK's own retries are off).
        ``final_answer_validator(answer)`` checks the root's final answer: None accepts it, a
        non-empty string rejects it and is shown to the model, which continues (child RLMs are
        not validated). ``completion_handler``: an async callable called instead of
        ``litellm.acompletion`` (same keywords, same response shape).

        recursive-llm 0.5.0's REPL keywords: ``repl_memory_limit_mb``,
        ``repl_cpu_time_limit_seconds``, ``repl_max_open_files`` replace the matching
        :class:`~rlm_compat.config.Limits` (as :class:`~rlm_compat.config.WorkerResourceLimits`
        does; not with ``repl_config``, whose limits are whole). ``repl_max_snapshot_bytes`` is
        checked and kept (``result.config``): in 0.5.0 it bounds the parent's copy of the REPL
        state; an RLM's state never leaves it here, and every plain-data variable is kept (what a
        step sends back is bounded by ``limits.reply_bytes``).
        """
        if not isinstance(model, str) or not model:
            raise ConfigurationError("model must be a non-empty string such as 'gpt-4o-mini'")
        self.api, self.llm_kwargs = split_rlm_options(llm_kwargs).unpack()
        if max_depth is None:
            max_depth = self.api.max_depth_default
        least = 1 if self.api.strict_limits else 0
        for name, value, floor in (
            ("max_depth", max_depth, 0),
            ("max_iterations", max_iterations, least),
            ("max_output_chars", max_output_chars, least),
            ("_current_depth", _current_depth, 0),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < floor:
                raise ConfigurationError(f"{name} must be an integer >= {floor}, not {value!r}")
        self.model = model
        self.recursive_model = recursive_model or model
        self.api_base = api_base
        self.api_key = api_key
        self.max_depth = max_depth
        self.max_iterations = max_iterations
        self._current_depth = _current_depth
        resources = _resource_limits(repl_memory_limit_mb, repl_cpu_time_limit_seconds, repl_max_open_files)
        self.repl_max_snapshot_bytes = check_snapshot_bytes(
            "repl_max_snapshot_bytes",
            DEFAULT_SNAPSHOT_BYTES if repl_max_snapshot_bytes is None else repl_max_snapshot_bytes,
        )
        self.repl_resource_limits = resources
        if resources.configured:
            if repl_config is not None:
                raise ConfigurationError(
                    "repl_memory_limit_mb / repl_cpu_time_limit_seconds / repl_max_open_files cannot "
                    "be combined with repl_config=: set them in its limits (Limits(memory_mb=..., "
                    "cpu_seconds=..., open_files=...))"
                )
            limits = resources.to_limits(limits)
        if repl_config is None:
            repl_config = ReplConfig(
                profile=resolve_profile(profile),
                timeout=repl_timeout,  # type: ignore[arg-type]  # None -> inf, validated
                max_output_chars=max_output_chars,
                isolation=isolation,
                limits=Limits() if limits is None else limits,
            )
        elif not isinstance(repl_config, ReplConfig):
            raise ConfigurationError(f"repl_config must be a ReplConfig, not {type(repl_config).__name__}")
        self.repl_config = repl_config
        self.profile = repl_config.profile
        self.prompt_version = prompt_version
        build_system_prompt(0, version=prompt_version)  # fail now on an unknown version
        if completion_handler is not None and (client is not None or not callable(completion_handler)):
            raise ConfigurationError(
                "completion_handler must be an async callable replacing litellm.acompletion, and "
                "cannot be combined with client= (pass one or the other)"
            )
        self.client: LLMClient = (
            client
            if client is not None
            else LiteLLMClient(
                _litellm_module,
                completion_handler,
                retry_switch_to_replacements=self.api.retry_switch_to_replacements,
            )
        )
        if client is None and completion_handler is None and isinstance(litellm, LazyModule):
            litellm.prefetch()  # the first model call then finds litellm imported (issue 26)
        self.repl = REPLExecutor(config=repl_config, api=self.api)
        self._llm_calls = 0
        self._iterations = 0
        self._count_lock = threading.Lock()
        self.messages: list[Message] = []
        # the run record (issue 12): validated here, used by _new_run and the sub-call functions
        RunBudget(
            max_calls=max_total_calls,
            max_tokens=max_total_tokens,
            max_cost_usd=max_total_cost_usd,
            max_elapsed_seconds=max_elapsed_seconds,
        )
        if max_concurrent_subcalls is None:
            max_concurrent_subcalls = self.api.max_concurrent_subcalls_default
        for name, value, least in (
            ("max_concurrent_subcalls", max_concurrent_subcalls, 1),
            ("max_retries", 0 if max_retries is None else max_retries, 0),  # RetryPolicy re-checks
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ConfigurationError(f"{name} must be an integer >= {least}, not {value!r}")
        handlers = [h for h in (on_event, event_handler, *observers) if h is not None]
        for handler in handlers:
            if not callable(handler):
                raise ConfigurationError(f"event observers must be callables, not {handler!r}")
        self.observers: list[Observer] = handlers
        self.trajectory_path = trajectory_path
        if capture_trajectory_content is None:
            capture_trajectory_content = self.api.capture_trajectory_content_default
        self.capture_trajectory_content = bool(capture_trajectory_content)
        self.max_total_calls = max_total_calls
        self.max_total_tokens = max_total_tokens
        self.max_total_cost_usd = max_total_cost_usd
        self.max_elapsed_seconds = max_elapsed_seconds
        self.max_concurrent_subcalls = max_concurrent_subcalls
        self.max_retries = self.api.max_retries_default if max_retries is None else max_retries
        if final_answer_validator is not None and not callable(final_answer_validator):
            raise ConfigurationError(
                "final_answer_validator must be a callable (answer) -> None | reason, "
                f"not {final_answer_validator!r}"
            )
        self.final_answer_validator = final_answer_validator
        if retry_backoff_seconds is None:
            retry_backoff_seconds = self.api.retry_backoff_default
        self.retry_backoff_seconds = retry_backoff_seconds
        self.retry_policy = RetryPolicy(self.max_retries, retry_backoff_seconds)
        self.last_run: RunResult | None = None

    # --- public API (both upstream spellings, one implementation) -----------------------------

    def complete(self, query: str = "", context: str = "", **kwargs: Any) -> str:
        """Synchronous :meth:`acomplete`; a single argument is taken as the context."""
        if query and not context:
            query, context = "", query
        return run_sync(self.acomplete(query, context, **kwargs))

    async def acomplete(self, query: str = "", context: str = "", **kwargs: Any) -> str:
        """Run the loop until the model gives a final answer; ``**kwargs`` go to every model call.

        Raises MaxDepthError when this RLM sits at ``max_depth``, MaxIterationsError when
        ``max_iterations`` model calls pass without a final answer, BudgetExceededError when a
        ``max_total_*`` limit is spent. The run's record is kept in :attr:`last_run`.
        """
        result = await self.acomplete_result(query, context, **kwargs)
        return result.answer

    def complete_result(self, query: str = "", context: str = "", **kwargs: Any) -> CompletionResult:
        """Synchronous :meth:`acomplete_result`."""
        return run_sync(self.acomplete_result(query, context, **kwargs))

    async def acomplete_result(self, query: str = "", context: str = "", **kwargs: Any) -> CompletionResult:
        """Like :meth:`acomplete`, returning the answer with this run's tree stats and trajectory."""
        # without return_failure a failed run raises, so what comes back answered
        return cast(CompletionResult, await self._run(query, context, kwargs, return_failure=False))

    def try_complete_result(self, query: str = "", context: str = "", **kwargs: Any) -> RunResult:
        """Synchronous :meth:`atry_complete_result`."""
        return run_sync(self.atry_complete_result(query, context, **kwargs))

    async def atry_complete_result(self, query: str = "", context: str = "", **kwargs: Any) -> RunResult:
        """Like :meth:`acomplete_result`, but a failed run is returned as a FailedCompletionResult."""
        return await self._run(query, context, kwargs, return_failure=True)

    @property
    def trajectory(self) -> tuple[TrajectoryEvent, ...]:
        """The events of the last finished run (empty before any)."""
        return () if self.last_run is None else self.last_run.trajectory

    # --- one run: its record, then the root node ------------------------------------------------

    def _budget(self) -> RunBudget:
        return RunBudget(
            max_calls=self.max_total_calls,
            max_tokens=self.max_total_tokens,
            max_cost_usd=self.max_total_cost_usd,
            max_elapsed_seconds=self.max_elapsed_seconds,
        )

    def _idle_stats(self) -> dict[str, Any]:
        """What a run's stats look like before it made any call (per-run ``stats`` before a run)."""
        return {**TreeStats().snapshot(), "budget": self._budget().snapshot()}

    def _new_run(self) -> Run:
        budget = self._budget()
        writer = None
        if self.trajectory_path is not None:
            writer = TrajectoryWriter(self.trajectory_path, redact=not self.capture_trajectory_content)
        shape = None
        if self.api.trajectory_shape == "0.5":
            attempts = 1 + self.max_retries
            shape = ReleaseShaper(capture=self.capture_trajectory_content, max_attempts=attempts)
        return Run(budget=budget, observers=self.observers, trajectory=writer, shape=shape)

    async def _run(
        self, query: str, context: str, kwargs: dict[str, Any], *, return_failure: bool
    ) -> RunResult:
        """One root run: its own :class:`Run`, the root node, then the result object."""
        if query and not context:
            query, context = "", query
        kwargs = check_call_options(kwargs, api=self.api, caller="complete()", stacklevel=5)
        # 0.5.0's max_depth bounds what a run may call, so a root run is always allowed
        root_exempt = self.api.depth_is_subcall_capability and self._current_depth == 0
        if self._current_depth >= self.max_depth and not root_exempt:
            raise MaxDepthError(f"Max recursion depth ({self.max_depth}) exceeded")
        run = self._new_run()
        config = run_config(self)
        root = run.node_id("rlm")
        depth = self._current_depth
        run.note_context(root, context)
        run.emit(
            RunStarted, depth=depth, node_id=root, query=query, context_chars=_size(context), config=config
        )
        try:
            answer = await self._node(run, root, "", query, context, kwargs)
        except BaseException as exc:
            stats = run.snapshot()
            run.emit(
                RunFailed,
                depth=depth,
                node_id=root,
                error_type=type(exc).__name__,
                error=str(exc),
                stats=stats,
            )
            if isinstance(exc, BudgetExceededError):
                exc.stats, exc.trajectory_path = stats, run.trajectory_path
            failed = FailedCompletionResult(
                type(exc).__name__, str(exc), stats, run.events(), config, run.trajectory_path
            )
            run.close()
            self.last_run = failed
            if return_failure and isinstance(exc, Exception):
                return failed
            raise
        stats = run.snapshot()
        run.emit(RunFinished, depth=depth, node_id=root, answer=answer, stats=stats)
        result = CompletionResult(answer, stats, run.events(), config, run.trajectory_path)
        run.close()
        self.last_run = result
        return result

    async def _node(
        self, run: Run, node: str, parent: str, query: str, context: str, kwargs: dict[str, Any]
    ) -> str:
        """One RLM node of the tree (the root, or a child started from its parent's REPL)."""
        if query and not context:
            query, context = "", query
        depth = self._current_depth
        run.note_context(node, context)
        run.emit(
            RlmStarted,
            depth=depth,
            node_id=node,
            parent_id=parent,
            model=self._default_model(),
            query=query,
            context_chars=_size(context),
        )
        iterations = [0]
        try:
            answer = await self._session(run, node, query, context, kwargs, iterations)
        except BaseException as exc:
            run.emit(
                RlmFailed,
                depth=depth,
                node_id=node,
                parent_id=parent,
                error_type=type(exc).__name__,
                error=str(exc),
                iterations=iterations[0],
            )
            raise
        run.emit(
            RlmFinished, depth=depth, node_id=node, parent_id=parent, answer=answer, iterations=iterations[0]
        )
        return answer

    async def _session(
        self,
        run: Run,
        node: str,
        query: str,
        context: str,
        kwargs: dict[str, Any],
        iterations: list[int],
    ) -> str:
        """A REPL session for the node, the loop in it, and the session's release."""
        loop = asyncio.get_running_loop()
        # One REPL session per node: concurrent runs of one RLM never share a namespace or worker.
        # state="worker": the namespace stays in the worker; env names what it holds (see repl.py)
        self.repl = repl = REPLExecutor(config=self.repl_config, api=self.api, state="worker")
        calls = _SubCalls(self, run, node, loop)
        env = self._build_repl_env(query, context, calls)
        box = _FinalBox(env)
        if not self.profile.minimal_env:
            env["FINAL"] = host_call(box.final, "answer")
            env["FINAL_VAR"] = host_call(box.final_var, "answer_var")
        repl.preload(env)  # the context crosses to the worker during the first model call

        self.messages = messages = [
            Message(role="system", content=self._system_prompt(context)),
            Message(role="user", content=query),
        ]
        if self.api.standalone_final_only:
            resolve = _parser_v050.resolve_final
        elif self.profile.upstream_parser:
            resolve = _upstream_resolution
        else:
            resolve = _parser.resolve_final
        resolve_first = self.profile.final_before_exec or self.api.standalone_final_only
        step = _Step(run, node, repl, env, box, resolve, loop, iterations, resolve_first)
        repl_thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="rlm-repl")
        try:
            return await self._loop(step, messages, repl_thread, kwargs)
        except asyncio.CancelledError:
            # The caller stopped this run: stop its sub-calls and its step now. Waiting for the
            # REPL thread here would block the loop the thread may be waiting on.
            calls.cancel()
            repl.abort()
            raise
        finally:
            repl.close()
            repl_thread.shutdown(wait=False)

    async def _loop(
        self,
        step: _Step,
        messages: list[Message],
        repl_thread: concurrent.futures.ThreadPoolExecutor,
        kwargs: dict[str, Any],
    ) -> str:
        """The iterations of one node (the REPL session is released by the caller)."""
        run, node, repl, env, loop = step.run, step.node, step.repl, step.env, step.loop
        depth = self._current_depth
        sent = 0
        for iteration in range(self.max_iterations):
            self._iterations = step.iterations[0] = iteration + 1
            response = await self._call_llm(
                run, node, messages, is_leaf=False, iteration=iteration + 1, sent=sent, **kwargs
            )
            sent = len(messages)
            if self.api.empty_response_feedback is not None and not response.strip():
                messages.append(Message(role="assistant", content=response))
                messages.append(Message(role="user", content=self.api.empty_response_feedback))
                continue

            settle = functools.partial(
                step.resolve, response, env, render=functools.partial(repl.render, env)
            )
            observation: str | None = None
            # a standalone directive (0.5) is the answer, never code to run
            if step.resolve_first:
                run.budget.check()  # a reply that crossed a token or cost limit ends nothing
                early = await loop.run_in_executor(repl_thread, settle)
                if early.answer is not None:
                    observation = await self._rejection(step, str(early.answer))
                    if observation is None:
                        method = early.method or self.api.parsed_final_method
                        return _settled(run, depth, node, str(early.answer), method)

            if observation is None:
                observation, failed = await self._step(step, iteration, response, repl_thread)
                withheld = failed and not step.resolve_first and _withholds(step.box, response, observation)
                step.box.missing = False
                called = step.box.answer
                if withheld:
                    # The model expected its code to have run: a FINAL / FINAL_VAR written beside
                    # code that raised (or a FINAL it called before raising) does not end the run.
                    step.box.answer = None
                candidate = await self._candidate(step, settle, repl_thread)
                if withheld and (called is not None or isinstance(candidate, tuple)):
                    candidate = _WITHHELD
                if isinstance(candidate, tuple):
                    answer, method = candidate
                    rejection = await self._rejection(step, answer)
                    if rejection is None:
                        return _settled(run, depth, node, answer, method)
                    observation = f"{observation}\n{rejection}"
                elif candidate:
                    observation = f"{observation}\n{candidate}"

            messages.append(Message(role="assistant", content=response))
            messages.append(Message(role="user", content=observation))

        raise MaxIterationsError(self.api.max_iterations_message.format(limit=self.max_iterations))

    async def _step(
        self, step: _Step, iteration: int, response: str, repl_thread: concurrent.futures.ThreadPoolExecutor
    ) -> tuple[str, bool]:
        """Execute the response in the node's REPL and record it; the observation for the model
        and whether the step failed."""
        started = time.perf_counter()
        remaining = step.run.budget.remaining_seconds()
        if remaining is not None and remaining <= 0:
            step.run.budget.expire()
        observation, failed = await step.loop.run_in_executor(
            repl_thread, self._observe, step.repl, response, step.env, remaining
        )
        step.run.emit(
            ReplStep,
            depth=self._current_depth,
            node_id=step.node,
            iteration=iteration + 1,
            code=response,
            output=observation,
            error=failed,
            duration_seconds=round(time.perf_counter() - started, 6),
            runner=step.repl.isolation,
        )
        step.run.budget.check()
        return observation, failed

    async def _candidate(
        self,
        step: _Step,
        settle: Callable[[], _parser.FinalResolution],
        repl_thread: concurrent.futures.ThreadPoolExecutor,
    ) -> tuple[str, str] | str | None:
        """After a step: ``(answer, method)`` if it ends the node, else feedback text or None."""
        if step.box.answer is not None:
            return step.box.answer, "callable"
        published = step.repl.pop_final_answer()
        if published is not None:
            return published, "answer"
        if step.resolve_first:
            return None
        late = await step.loop.run_in_executor(repl_thread, settle)
        if late.answer is not None:
            return str(late.answer), late.method or self.api.parsed_final_method
        return late.feedback

    async def _rejection(self, step: _Step, answer: str) -> str | None:
        """The validator's verdict on a final answer: None to accept, else feedback for the model.

        Only the RLM it was given to validates (children are built without one). A rejected
        answer is withdrawn from the REPL (the callable FINAL's box, the ``answer`` dict), so the
        next step starts undecided. A validator that raises, or returns anything but None or a
        non-empty string, ends the run with RLMError: it is the application's bug, not the model's.
        """
        validator = self.final_answer_validator
        if validator is None:
            return None
        try:
            verdict = await asyncio.to_thread(validator, answer)
        except Exception as exc:
            raise RLMError(f"Final-answer validator failed: {type(exc).__name__}: {exc}") from exc
        step.run.budget.check()
        if verdict is None:
            step.run.emit(
                FinalAnswerValidated, depth=self._current_depth, node_id=step.node, answer_chars=len(answer)
            )
            return None
        if not isinstance(verdict, str) or not verdict.strip():
            raise RLMError(
                "Final-answer validator must return None or a non-empty string (the reason shown "
                f"to the model), not {verdict!r}"
            )
        step.run.emit(
            FinalAnswerRejected,
            depth=self._current_depth,
            node_id=step.node,
            answer_chars=len(answer),
            reason_chars=len(verdict),
        )
        step.box.answer = None
        published = step.env.get("answer")
        if step.repl.api.answer_object and isinstance(published, dict) and published.get("ready"):
            step.repl.reset_final_answer()
        return f"Final answer rejected by validator: {verdict}\nFix the answer and give a final answer again."

    def completion(self, query: str = "", context: str = "", **kwargs: Any) -> str:
        """2fb46cc's name for :meth:`complete`."""
        return self.complete(query, context, **kwargs)

    async def acompletion(self, query: str = "", context: str = "", **kwargs: Any) -> str:
        """2fb46cc's name for :meth:`acomplete`."""
        return await self.acomplete(query, context, **kwargs)

    @property
    def stats(self) -> dict[str, Any]:
        """``llm_calls``, ``iterations`` (of the last run) and ``depth``.

        2fb46cc's contract: ``llm_calls`` adds up across runs of this RLM. With a preset whose
        ``stats_per_run`` is set (0.5.0's), every figure is the latest run's whole tree (its
        :class:`~rlm_compat.record.stats.TreeStats` keys and ``budget``; zeros before any run).
        """
        own = {"llm_calls": self._llm_calls, "iterations": self._iterations, "depth": self._current_depth}
        if not self.api.stats_per_run:
            return own
        tree = self.last_run.stats if self.last_run is not None else self._idle_stats()
        return {**copy.deepcopy(tree), "iterations": self._iterations, "depth": self._current_depth}

    def __repr__(self) -> str:
        return (
            f"RLM(model={self.model!r}, recursive_model={self.recursive_model!r}, "
            f"depth={self._current_depth}/{self.max_depth}, max_iterations={self.max_iterations}, "
            f"profile={self.profile.name!r})"
        )

    # --- steps ----------------------------------------------------------------------------------

    def _system_prompt(self, context: Any) -> str:
        return build_system_prompt(
            len(context),
            self._current_depth,
            self.max_depth,
            version=self.prompt_version or self.api.prompt_version,
        )

    @staticmethod
    def _observe(
        repl: REPLExecutor, response: str, env: dict[str, Any], deadline: float | None = None
    ) -> tuple[str, bool]:
        """Execute a response; the next user message (upstream's texts) and whether it failed.

        ``deadline``: the run's remaining wall time (``max_elapsed_seconds``), which caps the
        step's ``repl_timeout`` so one long step cannot outlive the run's budget.
        """
        try:
            return repl.execute(response, env, timeout=deadline), False
        except REPLError as exc:
            return f"Error: {exc}", True
        except Exception as exc:  # upstream feeds any other failure back too
            return f"Unexpected error: {exc}", True

    def _default_model(self) -> str:
        return self.model if self._current_depth == 0 else self.recursive_model

    async def _call_llm(
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
        """One model call: reserved in the budget, recorded as it starts, retries and ends.

        A transient failure is retried here by :attr:`retry_policy`, each attempt its own reserved
        and recorded call. The client never retries (:class:`LiteLLMClient` switches litellm's and
        the provider SDK's retries off): retries made below this loop would be invisible to the
        stats, the budget and the trajectory.
        """
        model = kwargs.pop("model", None) or self._default_model()
        call_kwargs = {**self.llm_kwargs, **kwargs}
        if self.api_base:
            call_kwargs["api_base"] = self.api_base
        if self.api_key:
            call_kwargs["api_key"] = self.api_key
        policy = self.retry_policy
        attempt = 1
        while True:
            outcome = await self._attempt(
                run, node, messages, model, call_kwargs, is_leaf, iteration, sent, attempt, policy
            )
            if isinstance(outcome, str):
                return outcome
            remaining = run.budget.remaining_seconds()
            if remaining is not None and outcome >= remaining:
                run.budget.expire()  # the next attempt could not start before the deadline
            depth = self._current_depth + 1 if is_leaf else self._current_depth
            run.emit(
                ModelRetry,
                depth=depth,
                node_id=node,
                parent_id=node,
                model=model,
                attempt=attempt + 1,
                delay_seconds=round(outcome, 6),
                failed_attempt=attempt,
                next_attempt=attempt + 1,
            )
            await asyncio.sleep(outcome)
            attempt += 1

    async def _attempt(
        self,
        run: Run,
        node: str,
        messages: list[Message],
        model: str,
        call_kwargs: dict[str, Any],
        is_leaf: bool,
        iteration: int | None,
        sent: int,
        attempt: int,
        policy: RetryPolicy,
    ) -> str | float:
        """One provider request: its reply, or the delay before the next attempt."""
        run.budget.reserve_call()
        with self._count_lock:
            self._llm_calls += 1
        depth = self._current_depth + 1 if is_leaf else self._current_depth
        call = run.node_id("call")
        where = {"depth": depth, "node_id": call, "parent_id": node, "model": model}
        run.emit(
            ModelCallStarted,
            **where,
            is_leaf=is_leaf,
            iteration=iteration,
            message_count=len(messages),
            messages_digest=messages_digest(messages),
            messages=tuple(Message(role=m["role"], content=m["content"]) for m in messages[sent:]),
            attempt=attempt,
        )
        started = time.perf_counter()
        try:
            # A copy, so a client (or a mock recording call args) never sees later appends.
            request = self.client.complete(model, list(messages), **call_kwargs)
            reply = await _within_budget(run.budget, request)
            figures = reply if isinstance(reply, ModelReply) else ModelReply(content=reply)
            content = figures.content
            if content is None and self.api.null_content_is_empty:
                run.emit(
                    ProviderResponseNormalized,
                    **where,
                    reason="null content read as an empty response",
                )
                content = ""
            if not isinstance(content, str):
                raise ProviderResponseError(
                    f"model {model!r} returned {type(content).__name__} content instead of text; "
                    "RLM needs a plain text reply (tool calls and empty replies are not supported)"
                )
        except BaseException as exc:
            delay = None if isinstance(exc, BudgetExceededError) else policy.delay(attempt, exc)
            run.emit(
                ModelCallFailed,
                **where,
                is_leaf=is_leaf,
                error_type=type(exc).__name__,
                error=str(exc),
                latency_seconds=round(time.perf_counter() - started, 6),
                retrying=delay is not None,
            )
            if delay is not None:
                return delay
            raise
        run.emit(
            ModelCallFinished,
            **where,
            is_leaf=is_leaf,
            reply=content,
            prompt_tokens=figures.prompt_tokens,
            completion_tokens=figures.completion_tokens,
            total_tokens=figures.total_tokens,
            cached_tokens=figures.cached_tokens,
            cost_usd=figures.cost_usd,
            latency_seconds=round(time.perf_counter() - started, 6),
        )
        return content

    def _build_repl_env(self, query: str, context: Any, calls: _SubCalls) -> dict[str, Any]:
        env: dict[str, Any] = {"context": context, "query": query}
        if self.api.answer_object:
            env["answer"] = {"content": "", "ready": False}
        capability = self.api.depth_is_subcall_capability
        if capability and self.max_depth == 0:
            env["re"] = re  # 0.5.0: a run that may call nothing gets no query functions
            return env
        recursive = calls.rlm_query() if capability else self._make_recursive_fn(calls)
        env["recursive_llm"] = host_call(recursive)
        env["re"] = re
        if not self.profile.minimal_env:
            leaf = calls.llm_query_with_context() if self.api.llm_query_takes_context else calls.llm_query()
            env["llm_query"] = host_call(leaf)
            env["llm_query_batched"] = host_call(calls.llm_query_batched())
            env["rlm_query"] = host_call(calls.rlm_query())
            env["rlm_query_batched"] = host_call(calls.rlm_query_batched())
        return env

    @staticmethod
    def _make_recursive_fn(calls: _SubCalls) -> Callable[[str, str], str]:
        # The name is observable: a wrong-arity call's TypeError names it (its qualified name
        # too), as upstream's does.
        def sync_recursive_llm(sub_query: str, sub_context: str) -> str:
            """Answer ``sub_query`` over ``sub_context`` with a child RLM one level deeper."""
            return calls.recursive_llm(sub_query, sub_context)

        return sync_recursive_llm

    def _child(self) -> RLM:
        """One level deeper on the recursive model; every other setting inherited whole."""
        child = copy.copy(self)
        child.model = self.recursive_model
        child._current_depth = self._current_depth + 1
        child._llm_calls = child._iterations = 0
        child.messages = []
        child.final_answer_validator = None  # the root's answer rules, not a sub-task's
        return child


_WITHHELD = (
    "The code in this reply raised an error, so its FINAL / FINAL_VAR did not end the run. "
    "Fix the error, then give the final answer again."
)
# profile switch minimal_env: executing the directive itself is what failed
_DIRECTIVE_UNDEFINED = re.compile(r"name 'FINAL(?:_VAR)?' is not defined")
_COMPILE_FAILURE = re.compile(
    r"Error: Execution error: (?:Compilation error: |SyntaxError|IndentationError|TabError)"
)


def _withholds(box: _FinalBox, response: str, observation: str) -> bool:
    """Whether a failed step's FINAL / FINAL_VAR is withheld (profile fixed; docs/parser.md).

    Not when the directive itself is what failed, after the code before it ran (the callable
    FINAL_VAR handed a value, or no callable at all under ``minimal_env``), and not when the reply
    is prose rather than code: no fence line, and the whole text did not compile, so nothing ran
    (``I found it.`` then ``FINAL("42")``). Code that raised, fenced or not, is withheld.
    """
    if box.missing or _DIRECTIVE_UNDEFINED.search(observation):
        return False
    return not (fenced_blocks(response) is None and _COMPILE_FAILURE.match(observation))


class _Step:
    """What one node's loop works with (kept together so the loop's signature stays short)."""

    __slots__ = ("box", "env", "iterations", "loop", "node", "repl", "resolve", "resolve_first", "run")

    def __init__(
        self,
        run: Run,
        node: str,
        repl: REPLExecutor,
        env: dict[str, Any],
        box: _FinalBox,
        resolve: Callable[..., _parser.FinalResolution],
        loop: asyncio.AbstractEventLoop,
        iterations: list[int],
        resolve_first: bool,
    ) -> None:
        self.run, self.node, self.repl, self.env, self.box = run, node, repl, env, box
        self.resolve, self.loop, self.iterations = resolve, loop, iterations
        self.resolve_first = resolve_first


class _SubCalls:
    """The REPL's model-calling host functions for one node.

    They are called from the REPL thread while the node's loop waits for the step; each hands its
    work to that loop (one thread hop per call, however many model calls it makes) and records a
    sub-call start and end. Batches run up to ``max_concurrent_subcalls`` at once and answer in
    input order; a failed item reads ``"Error: <Type>: <message>"`` so the model sees which one
    failed, except a spent budget, which stops the whole batch and then the run.
    """

    def __init__(self, rlm: RLM, run: Run, node: str, loop: asyncio.AbstractEventLoop) -> None:
        self.rlm, self.run, self.node, self.loop = rlm, run, node, loop
        self._lock = threading.Lock()
        self._pending: set[concurrent.futures.Future[Any]] = set()
        self._cancelled = False

    def _call(self, function: str, count: int, work: Awaitable[_T]) -> _T:
        coro = self._recorded(function, count, work)
        if not self.loop.is_running() or _loop_running(self.loop):
            return _run_on_loop(self.loop, coro)
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

    def cancel(self) -> None:
        """Cancel the sub-calls in flight (their run was cancelled); their callers see CancelledError."""
        with self._lock:
            self._cancelled = True
            pending = list(self._pending)
        for future in pending:
            future.cancel()

    async def _recorded(self, function: str, count: int, work: Awaitable[_T]) -> _T:
        depth = self.rlm._current_depth
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

    # --- the functions ---------------------------------------------------------------------------

    def recursive_llm(self, sub_query: str, sub_context: str) -> str:
        """2fb46cc's ``recursive_llm``: a child RLM, or upstream's text at the depth limit."""
        rlm = self.rlm
        if rlm._current_depth + 1 >= rlm.max_depth:
            return f"Max recursion depth ({rlm.max_depth}) reached"
        return self._call("recursive_llm", 1, self._child(sub_query, sub_context))

    def llm_query(self) -> Callable[..., str]:
        def llm_query(prompt: str, model: str | None = None) -> str:
            """One plain model call (no REPL) with ``prompt`` as the user message."""
            _check_text("llm_query(prompt)", prompt)
            return self._call("llm_query", 1, self._leaf(prompt, model))

        return llm_query

    def llm_query_with_context(self) -> Callable[..., str]:
        def llm_query(query: str, context: str = "", model: str | None = None) -> str:
            """One plain model call (no REPL) answering ``query`` over ``context``."""
            _check_text("llm_query(query)", query)
            _check_text("llm_query(context)", context)
            return self._call("llm_query", 1, self._leaf(self._leaf_prompt(query, context), model))

        return llm_query

    def llm_query_batched(self) -> Callable[..., list[str]]:
        def llm_query_batched(prompts: Iterable[Any], model: str | None = None) -> list[str]:
            """Concurrent plain model calls, answers in prompt order; a failed one reads 'Error: ...'."""
            items = _texts("llm_query_batched(prompts)", prompts)
            work = self._batch([functools.partial(self._leaf, p, model) for p in items])
            return self._call("llm_query_batched", len(items), work)

        return llm_query_batched

    def rlm_query(self) -> Callable[..., str]:
        def rlm_query(query: str, context: str = "") -> str:
            """Answer ``query`` over ``context`` with a child RLM (its own REPL) one level deeper."""
            _check_text("rlm_query(query)", query)
            _check_text("rlm_query(context)", context)
            return self._call("rlm_query", 1, self._rlm(query, context))

        return rlm_query

    def rlm_query_batched(self) -> Callable[..., list[str]]:
        def rlm_query_batched(queries: Iterable[Any], contexts: Iterable[Any] | None = None) -> list[str]:
            """Child RLMs run concurrently, answers in order; a failed one reads 'Error: ...'."""
            items, texts = _query_pairs(queries, contexts)
            work = self._batch(
                [functools.partial(self._rlm, q, c) for q, c in zip(items, texts, strict=True)]
            )
            return self._call("rlm_query_batched", len(items), work)

        return rlm_query_batched

    # --- what they run on the loop ---------------------------------------------------------------

    def _leaf_prompt(self, query: str, context: str) -> str:
        """The user message of a plain model call asked ``query`` over ``context``."""
        if not context:
            return query
        values = {"query": query, "context": context}
        return re.sub(r"\{(query|context)\}", lambda m: values[m[1]], self.rlm.api.leaf_with_context)

    async def _leaf(self, prompt: str, model: str | None) -> str:
        messages = [Message(role="user", content=prompt)]
        system = self.rlm.api.leaf_system_prompt
        if system is not None:
            messages.insert(0, Message(role="system", content=system))
        return await self.rlm._call_llm(
            self.run,
            self.node,
            messages,
            is_leaf=True,
            iteration=None,
            model=model or self.rlm.recursive_model,
        )

    async def _child(self, query: str, context: str) -> str:
        child = self.rlm._child()
        return await child._node(self.run, self.run.node_id("rlm"), self.node, query, context, {})

    async def _rlm(self, query: str, context: str) -> str:
        """A child RLM; at the depth limit a plain model call over query and context instead."""
        if self.rlm._current_depth + 1 >= self.rlm.max_depth:
            return await self._leaf(self._leaf_prompt(query, context), None)
        return await self._child(query, context)

    async def _batch(self, jobs: list[Callable[[], Awaitable[str]]]) -> list[str]:
        limit = asyncio.Semaphore(self.rlm.max_concurrent_subcalls)
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


async def _within_budget(budget: RunBudget, call: Awaitable[_T]) -> _T:
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


def _settled(run: Run, depth: int, node: str, answer: str, method: str) -> str:
    run.emit(FinalAnswer, depth=depth, node_id=node, answer=answer, method=method)
    return answer


def _size(context: Any) -> int:
    try:
        return len(context)
    except TypeError:
        return 0


def _check_text(what: str, value: Any) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{what} needs a str, not {type(value).__name__}")


def _texts(what: str, values: Any) -> list[str]:
    items = [] if isinstance(values, str) else list(values)
    if isinstance(values, str) or not all(isinstance(v, str) for v in items):
        raise TypeError(f"{what} needs a list of str")
    return items


def _query_pairs(queries: Iterable[Any], contexts: Iterable[Any] | None) -> tuple[list[str], list[str]]:
    """rlm_query_batched's arguments checked: the queries and one context per query ("" if none)."""
    items = _texts("rlm_query_batched(queries)", queries)
    texts = [""] * len(items) if contexts is None else _texts("rlm_query_batched(contexts)", contexts)
    if len(texts) != len(items):
        raise ValueError(
            f"rlm_query_batched got {len(items)} queries but {len(texts)} contexts; pass one context "
            "per query, or none"
        )
    return items, texts


def _run_on_loop(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coro`` on the RLM's own loop from the REPL thread (or privately, on the loop's thread)."""
    if loop.is_running() and not _loop_running(loop):
        return asyncio.run_coroutine_threadsafe(coro, loop).result()
    return run_sync(coro)


def _loop_running(loop: asyncio.AbstractEventLoop | None = None) -> bool:
    """Whether an event loop (``loop``, if given) is running in the current thread."""
    try:
        current = asyncio.get_running_loop()
    except RuntimeError:
        return False
    return loop is None or current is loop


def _litellm_module() -> Any:
    """The patch point, read at call time so ``patch("...core.litellm.acompletion")`` takes effect."""
    return litellm


def _upstream_resolution(
    response: str, env: Mapping[str, Any], *, render: Callable[[str], str] | None = None
) -> _parser.FinalResolution:
    """Upstream's rule: the response ends the run if ``is_final`` and ``parse_response`` agree."""
    if is_final(response):
        return _parser.FinalResolution(parse_response(response, env, render=render), None)
    return _parser.FinalResolution(None, None)
