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
import re
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import Any, TypeVar

from . import parser as _parser
from ._lazy import LazyModule
from .clients import LiteLLMClient, LLMClient
from .config import Limits, ReplConfig
from .errors import ConfigurationError, LLMCallError, MaxDepthError, MaxIterationsError, RLMError
from .options import split_rlm_options
from .profiles import Profile, resolve_profile
from .prompts import build_system_prompt
from .repl import REPLError, REPLExecutor
from .sandbox import host_call
from .types import Message

__all__ = [
    "RLM",
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
_BATCH_CONCURRENCY = 8


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

    def final(self, text: str) -> None:
        """FINAL(value): end the run after this step with ``str(value)``."""
        if self.answer is None:
            self.answer = text

    def final_var(self, name: Any, text: str | None) -> None:
        """FINAL_VAR(name): end the run after this step with ``str(env[name])``."""
        if text is None:
            key = name if isinstance(name, str) else repr(name)
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
        max_depth: int = 5,
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
        **llm_kwargs: Any,
    ) -> None:
        """Same positional parameters as upstream; keyword-only additions default to its behaviour.

        ``profile``: ``"fixed"`` (default, or ``$RLM_COMPAT_PROFILE``), ``"upstream"`` or a Profile.
        ``prompt_version``: ``"cc7a826"`` (default) or ``"2fb46cc"``, upstream's exact system prompt.
        ``client``: where model calls go; default litellm through ``rlm_compat.core.litellm``.
        ``repl_timeout``, ``max_output_chars``, ``isolation``, ``limits``: the REPL's
        :class:`~rlm_compat.config.ReplConfig` (or pass ``repl_config`` whole); child RLMs
        inherit it. Other keywords: model-call options, ``provider_options={...}`` or ``api=``,
        sorted by :mod:`rlm_compat.options` (an unknown one is an error, not a pass-through).
        """
        if not isinstance(model, str) or not model:
            raise ConfigurationError("model must be a non-empty string such as 'gpt-4o-mini'")
        for name, value in (("max_depth", max_depth), ("max_iterations", max_iterations)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigurationError(f"{name} must be a non-negative integer, not {value!r}")
        self.model = model
        self.recursive_model = recursive_model or model
        self.api_base = api_base
        self.api_key = api_key
        self.max_depth = max_depth
        self.max_iterations = max_iterations
        self._current_depth = _current_depth
        self.api, self.llm_kwargs = split_rlm_options(llm_kwargs).unpack()
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
        self.client: LLMClient = client if client is not None else LiteLLMClient(_litellm_module)
        self.repl = REPLExecutor(config=repl_config)
        self._llm_calls = 0
        self._iterations = 0
        self.messages: list[Message] = []

    # --- public API (both upstream spellings, one implementation) -----------------------------

    def complete(self, query: str = "", context: str = "", **kwargs: Any) -> str:
        """Synchronous :meth:`acomplete`; a single argument is taken as the context."""
        if query and not context:
            query, context = "", query
        return run_sync(self.acomplete(query, context, **kwargs))

    async def acomplete(self, query: str = "", context: str = "", **kwargs: Any) -> str:
        """Run the loop until the model gives a final answer; ``**kwargs`` go to every model call.

        Raises MaxDepthError when this RLM sits at ``max_depth``, MaxIterationsError when
        ``max_iterations`` model calls pass without a final answer.
        """
        if query and not context:
            query, context = "", query
        if self._current_depth >= self.max_depth:
            raise MaxDepthError(f"Max recursion depth ({self.max_depth}) exceeded")

        loop = asyncio.get_running_loop()
        # One REPL session per run: concurrent runs of one RLM never share a namespace or worker.
        self.repl = repl = REPLExecutor(config=self.repl_config)
        env = self._build_repl_env(query, context, loop)
        box = _FinalBox(env)
        if not self.profile.minimal_env:
            env["FINAL"] = host_call(box.final, "answer")
            env["FINAL_VAR"] = host_call(box.final_var, "answer_var")

        self.messages = messages = [
            Message(role="system", content=self._system_prompt(context)),
            Message(role="user", content=query),
        ]
        resolve = _upstream_resolution if self.profile.upstream_parser else _parser.resolve_final
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="rlm-repl") as repl_thread:
            try:
                return await self._loop(repl, messages, env, box, resolve, loop, repl_thread, kwargs)
            finally:
                repl.close()

    async def _loop(
        self,
        repl: REPLExecutor,
        messages: list[Message],
        env: dict[str, Any],
        box: _FinalBox,
        resolve: Callable[..., _parser.FinalResolution],
        loop: asyncio.AbstractEventLoop,
        repl_thread: concurrent.futures.ThreadPoolExecutor,
        kwargs: dict[str, Any],
    ) -> str:
        """The iterations of one run (the REPL session is released by the caller)."""
        for iteration in range(self.max_iterations):
            self._iterations = iteration + 1
            response = await self._call_llm(messages, **kwargs)

            settle = functools.partial(resolve, response, env, render=functools.partial(repl.render, env))
            if self.profile.final_before_exec:
                early = await loop.run_in_executor(repl_thread, settle)
                if early.answer is not None:
                    return str(early.answer)

            observation = await loop.run_in_executor(repl_thread, self._observe, repl, response, env)
            if box.answer is not None:
                return box.answer
            if not self.profile.final_before_exec:
                late = await loop.run_in_executor(repl_thread, settle)
                if late.answer is not None:
                    return str(late.answer)
                if late.feedback:
                    observation = f"{observation}\n{late.feedback}"

            messages.append(Message(role="assistant", content=response))
            messages.append(Message(role="user", content=observation))

        raise MaxIterationsError(f"Max iterations ({self.max_iterations}) exceeded without FINAL()")

    def completion(self, query: str = "", context: str = "", **kwargs: Any) -> str:
        """2fb46cc's name for :meth:`complete`."""
        return self.complete(query, context, **kwargs)

    async def acompletion(self, query: str = "", context: str = "", **kwargs: Any) -> str:
        """2fb46cc's name for :meth:`acomplete`."""
        return await self.acomplete(query, context, **kwargs)

    @property
    def stats(self) -> dict[str, int]:
        """``llm_calls`` (cumulative), ``iterations`` (of the last run) and ``depth``."""
        return {
            "llm_calls": self._llm_calls,
            "iterations": self._iterations,
            "depth": self._current_depth,
        }

    def __repr__(self) -> str:
        return (
            f"RLM(model={self.model!r}, recursive_model={self.recursive_model!r}, "
            f"depth={self._current_depth}/{self.max_depth}, max_iterations={self.max_iterations}, "
            f"profile={self.profile.name!r})"
        )

    # --- steps ----------------------------------------------------------------------------------

    def _system_prompt(self, context: Any) -> str:
        return build_system_prompt(len(context), self._current_depth, version=self.prompt_version)

    @staticmethod
    def _observe(repl: REPLExecutor, response: str, env: dict[str, Any]) -> str:
        """Execute a response and turn the outcome into the next user message (upstream's texts)."""
        try:
            return repl.execute(response, env)
        except REPLError as exc:
            return f"Error: {exc}"
        except Exception as exc:  # upstream feeds any other failure back too
            return f"Unexpected error: {exc}"

    async def _call_llm(self, messages: list[Message], **kwargs: Any) -> str:
        self._llm_calls += 1
        default_model = self.model if self._current_depth == 0 else self.recursive_model
        model = kwargs.pop("model", default_model)
        call_kwargs = {**self.llm_kwargs, **kwargs}
        if self.api_base:
            call_kwargs["api_base"] = self.api_base
        if self.api_key:
            call_kwargs["api_key"] = self.api_key
        # A copy, so a client (or a mock recording call args) never sees later appends.
        content = await self.client.complete(model, list(messages), **call_kwargs)
        if not isinstance(content, str):
            raise LLMCallError(
                f"model {model!r} returned {type(content).__name__} content instead of text; "
                "RLM needs a plain text reply (tool calls and empty replies are not supported)"
            )
        return content

    def _build_repl_env(self, query: str, context: Any, loop: asyncio.AbstractEventLoop) -> dict[str, Any]:
        env: dict[str, Any] = {
            "context": context,
            "query": query,
            "recursive_llm": host_call(self._make_recursive_fn(loop)),
            "re": re,
        }
        if not self.profile.minimal_env:
            env["llm_query"] = host_call(self._make_llm_query(loop))
            env["llm_query_batched"] = host_call(self._make_llm_query_batched(loop))
        return env

    def _child(self) -> RLM:
        """One level deeper on the recursive model; every other setting inherited whole."""
        child = copy.copy(self)
        child.model = self.recursive_model
        child._current_depth = self._current_depth + 1
        child._llm_calls = child._iterations = 0
        child.messages = []
        return child

    def _make_recursive_fn(self, loop: asyncio.AbstractEventLoop) -> Callable[[str, str], str]:
        # The name is observable: a wrong-arity call's TypeError names it, as upstream's does.
        def sync_recursive_llm(sub_query: str, sub_context: str) -> str:
            """Answer ``sub_query`` over ``sub_context`` with a child RLM one level deeper."""
            if self._current_depth + 1 >= self.max_depth:
                return f"Max recursion depth ({self.max_depth}) reached"
            return _run_on_loop(loop, self._child().acomplete(sub_query, sub_context))

        return sync_recursive_llm

    def _make_llm_query(self, loop: asyncio.AbstractEventLoop) -> Callable[..., str]:
        def llm_query(prompt: str, model: str | None = None) -> str:
            """One plain model call (no REPL) with ``prompt`` as the user message."""
            return _run_on_loop(loop, self._query(prompt, model))

        return llm_query

    def _make_llm_query_batched(self, loop: asyncio.AbstractEventLoop) -> Callable[..., list[str]]:
        def llm_query_batched(prompts: Iterable[Any], model: str | None = None) -> list[str]:
            """Concurrent plain model calls, answers in prompt order; a failed one reads 'Error: ...'."""
            items = [] if isinstance(prompts, str) else list(prompts)
            if isinstance(prompts, str) or not all(isinstance(p, str) for p in items):
                raise TypeError("llm_query_batched(prompts) needs a list of str prompts")
            return _run_on_loop(loop, self._query_batched(items, model))

        return llm_query_batched

    async def _query(self, prompt: str, model: str | None) -> str:
        if not isinstance(prompt, str):
            raise TypeError(f"llm_query(prompt) needs a str prompt, not {type(prompt).__name__}")
        messages = [Message(role="user", content=prompt)]
        return await self._call_llm(messages, model=model or self.recursive_model)

    async def _query_batched(self, prompts: list[str], model: str | None) -> list[str]:
        limit = asyncio.Semaphore(_BATCH_CONCURRENCY)

        async def one(prompt: str) -> str:
            async with limit:
                try:
                    return await self._query(prompt, model)
                except Exception as exc:
                    return f"Error: {type(exc).__name__}: {exc}"

        return list(await asyncio.gather(*(one(p) for p in prompts)))


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
