"""The RLM facade: ``rlm.core`` of ysz/recursive-llm (2fb46cc and cc7a826), over the loop engine.

Same constructor, both method names (``completion`` / ``complete`` and their async twins), same
``stats``. The constructor only builds one frozen :class:`~rlm_compat.settings.Settings` and a
client; the loop itself is :mod:`rlm_compat._loop`, which never sees this class.
``rlm_compat.core.litellm`` is the patch point upstream's tests use
(``patch("rlm.core.litellm.acompletion")``); it is a lazy module, so importing this package does
not import litellm. ``rlm_compat.core.REPLExecutor`` is read when a node opens its REPL, so a test
that patches it there (0.5.0's do) takes effect; so is ``asyncio.sleep`` between retries.
"""

from __future__ import annotations

import asyncio  # noqa: F401  # patch point: 0.5.0's tests patch rlm.core.asyncio.sleep
import copy
import os
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, cast

from . import parser as _parser
from ._lazy import LazyModule
from ._loop import Engine, run_sync
from .clients import LiteLLMClient, LLMClient
from .config import Limits, ReplConfig
from .errors import BudgetExceededError, ConfigurationError, MaxDepthError, MaxIterationsError, RLMError
from .events import TrajectoryEvent
from .options import check_call_options, split_rlm_options
from .profiles import Profile
from .prompts import build_system_prompt
from .record import CompletionResult, FailedCompletionResult, Observer, RunResult, TreeStats
from .repl import REPLError, REPLExecutor
from .settings import Setting, Settings, build_settings
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
    "run_sync",
]

litellm = LazyModule("litellm")

is_final = _parser.is_final
parse_response = _parser.parse_response


class RLM:
    """Recursive Language Model: answers a query over ``context`` held in a REPL, not in the prompt."""

    # 2fb46cc's and 0.5.0's attribute names for the settings, read-only (the settings are frozen)
    model = Setting(lambda s: s.model)
    recursive_model = Setting(lambda s: s.recursive_model)
    api_base = Setting(lambda s: s.api_base)
    api_key = Setting(lambda s: s.api_key)
    max_depth = Setting(lambda s: s.max_depth)
    max_iterations = Setting(lambda s: s.max_iterations)
    recursive_max_iterations = Setting(lambda s: s.recursive_max_iterations)
    _current_depth = Setting(lambda s: s.depth)
    api = Setting(lambda s: s.api)
    llm_kwargs = Setting(lambda s: dict(s.llm_kwargs))
    profile = Setting(lambda s: s.profile)
    prompt_version = Setting(lambda s: s.prompt_version)
    repl_config = Setting(lambda s: s.repl)
    retry_policy = Setting(lambda s: s.retry)
    max_retries = Setting(lambda s: s.retry.max_retries)
    retry_backoff_seconds = Setting(lambda s: s.retry.backoff_seconds)
    max_total_calls = Setting(lambda s: s.budget.max_calls)
    max_total_tokens = Setting(lambda s: s.budget.max_tokens)
    max_total_cost_usd = Setting(lambda s: s.budget.max_cost_usd)
    max_elapsed_seconds = Setting(lambda s: s.budget.max_elapsed_seconds)
    max_concurrent_subcalls = Setting(lambda s: s.max_concurrent_subcalls)
    repl_max_snapshot_bytes = Setting(lambda s: s.repl_max_snapshot_bytes)
    repl_resource_limits = Setting(lambda s: s.repl_resource_limits)
    capture_trajectory_content = Setting(lambda s: s.capture_trajectory_content)
    final_answer_validator = Setting(lambda s: s.final_answer_validator)
    trajectory_path = Setting(lambda s: s.trajectory_path)

    # Over 80 lines for a reason: the signature is the public API (upstream's positional parameters,
    # then one keyword per PARAMETERS row) and the docstring documents each; the body is 15 lines.
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
        recursive_max_iterations: int | None = None,
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
        not validated). ``recursive_max_iterations``: the iteration limit of child RLMs (None:
        ``max_iterations``), so sub-tasks can be held shorter than the root.
        ``completion_handler``: an async callable called instead of ``litellm.acompletion``
        (same keywords, same response shape).

        recursive-llm 0.5.0's REPL keywords: ``repl_memory_limit_mb``,
        ``repl_cpu_time_limit_seconds``, ``repl_max_open_files`` replace the matching
        :class:`~rlm_compat.config.Limits` (as :class:`~rlm_compat.config.WorkerResourceLimits`
        does; not with ``repl_config``, whose limits are whole). ``repl_max_snapshot_bytes`` is
        checked and kept (``result.config``): in 0.5.0 it bounds the parent's copy of the REPL
        state; an RLM's state never leaves it here, and every plain-data variable is kept (what a
        step sends back is bounded by ``limits.reply_bytes``).
        """
        arguments = dict(locals())
        del arguments["self"], arguments["client"], arguments["completion_handler"], arguments["llm_kwargs"]
        api, model_call = split_rlm_options(llm_kwargs).unpack()
        self.settings: Settings = build_settings(api=api, llm_kwargs=model_call, **arguments)
        if completion_handler is not None and (client is not None or not callable(completion_handler)):
            raise ConfigurationError(
                "completion_handler must be an async callable replacing litellm.acompletion, and "
                "cannot be combined with client= (pass one or the other)"
            )
        self.client: LLMClient = client or LiteLLMClient(
            _litellm_module,
            completion_handler,
            retry_switch_to_replacements=self.settings.release.retry_switch_to_replacements,
        )
        if client is None and completion_handler is None and isinstance(litellm, LazyModule):
            litellm.prefetch()  # the first model call then finds litellm imported (issue 26)
        self.observers: list[Observer] = list(self.settings.observers)
        """Called with every event of each run; appendable after construction (the CLI adds its
        progress display this way)."""
        self._engine = Engine(
            self.settings, self.client, repl_factory=_repl_executor, observers=self.observers
        )
        self.last_run: RunResult | None = None
        self._last_messages: list[Message] = []

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

    def completion(self, query: str = "", context: str = "", **kwargs: Any) -> str:
        """2fb46cc's name for :meth:`complete`."""
        return self.complete(query, context, **kwargs)

    async def acompletion(self, query: str = "", context: str = "", **kwargs: Any) -> str:
        """2fb46cc's name for :meth:`acomplete`."""
        return await self.acomplete(query, context, **kwargs)

    async def _run(
        self, query: str, context: str, kwargs: dict[str, Any], *, return_failure: bool
    ) -> RunResult:
        kwargs = check_call_options(kwargs, api=self.settings.api, caller="complete()", stacklevel=5)
        return await self._engine.run(
            query, context, kwargs, return_failure=return_failure, on_end=self._ended
        )

    def _ended(self, result: RunResult, messages: list[Message]) -> None:
        self.last_run, self._last_messages = result, messages

    # --- what the last run left, and the settings --------------------------------------------

    @property
    def trajectory(self) -> tuple[TrajectoryEvent, ...]:
        """The events of the last finished run (empty before any)."""
        return () if self.last_run is None else self.last_run.trajectory

    @property
    def messages(self) -> list[Message]:
        """The root node's conversation in the last finished run (empty before any)."""
        return list(self._last_messages)

    @property
    def stats(self) -> dict[str, Any]:
        """``llm_calls``, ``iterations`` (of the last run) and ``depth``.

        2fb46cc's contract: ``llm_calls`` adds up across runs of this RLM. With a preset whose
        ``stats_per_run`` is set (0.5.0's), every figure is the latest run's whole tree (its
        :class:`~rlm_compat.record.stats.TreeStats` keys and ``budget``; zeros before any run).
        """
        tally, depth = self._engine.tally, self.settings.depth
        if not self.settings.release.stats_per_run:
            return {"llm_calls": tally.llm_calls, "iterations": tally.iterations, "depth": depth}
        if self.last_run is not None:
            tree = copy.deepcopy(self.last_run.stats)
        else:
            tree = {**TreeStats().snapshot(), "budget": self.settings.budget.start().snapshot()}
        return {**tree, "iterations": tally.iterations, "depth": depth}

    def __repr__(self) -> str:
        s = self.settings
        return (
            f"RLM(model={s.model!r}, recursive_model={s.recursive_model!r}, "
            f"depth={s.depth}/{s.max_depth}, max_iterations={s.max_iterations}, "
            f"profile={s.profile.name!r})"
        )


def _litellm_module() -> Any:
    """The patch point, read at call time so ``patch("...core.litellm.acompletion")`` takes effect."""
    return litellm


def _repl_executor(**options: Any) -> REPLExecutor:
    """A node's REPL, made by whatever ``rlm_compat.core.REPLExecutor`` is at call time."""
    return REPLExecutor(**options)
