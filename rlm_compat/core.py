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
import inspect
import operator
from typing import Any, cast

from . import parser as _parser
from ._lazy import LazyModule
from ._loop import Engine, run_sync
from .clients import LiteLLMClient, LLMClient
from .errors import BudgetExceededError, ConfigurationError, MaxDepthError, MaxIterationsError, RLMError
from .events import TrajectoryEvent
from .options import check_call_options, split_rlm_options
from .prompts import build_system_prompt
from .record import CompletionResult, FailedCompletionResult, Observer, RunResult, TreeStats
from .repl import REPLError, REPLExecutor
from .settings import KEPT, PARAMETERS, REQUIRED, Setting, Settings, build_settings
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

    def __init__(
        self,
        model: str,
        recursive_model: str | None = None,
        api_base: str | None = None,
        api_key: str | None = None,
        max_depth: int | None = None,
        max_iterations: int = 30,
        _current_depth: int = 0,
        **llm_kwargs: Any,
    ) -> None:
        """Same positional parameters as upstream; every keyword-only addition defaults to its behaviour.

        The keywords (each listed below, from :data:`rlm_compat.settings.PARAMETERS`) are checked
        once into a frozen :class:`~rlm_compat.settings.Settings`; child RLMs inherit them. Other
        keywords are model-call options, ``provider_options={...}`` or ``api=`` (the release
        preset, ``"2fb46cc"`` or ``"0.5"``), sorted by :mod:`rlm_compat.options`: an unknown one
        gets an UnknownOptionWarning naming it, never a silent pass-through. The run record
        (0.5.0's names where it has them) is docs/trajectory.md; the REPL keywords make a
        :class:`~rlm_compat.config.ReplConfig`; the ``max_total_*`` budgets bound each run's
        whole tree (BudgetExceededError); retries are the RLM's own, each attempt a counted,
        budgeted, recorded call (the SDK's are off).
        """
        keywords = {name: llm_kwargs.pop(name) for name in list(llm_kwargs) if name in PARAMETERS}
        client: LLMClient | None = keywords.pop("client", None)
        completion_handler = keywords.pop("completion_handler", None)
        keywords.update(
            model=model,
            recursive_model=recursive_model,
            api_base=api_base,
            api_key=api_key,
            max_depth=max_depth,
            max_iterations=max_iterations,
            _current_depth=_current_depth,
        )
        api, model_call = split_rlm_options(llm_kwargs).unpack()
        self.settings: Settings = build_settings(api=api, llm_kwargs=model_call, keywords=keywords)
        if completion_handler is not None and (client is not None or not callable(completion_handler)):
            raise ConfigurationError(
                "completion_handler must be an async callable replacing litellm.acompletion, and "
                "cannot be combined with client= (pass one or the other)"
            )
        self.client: LLMClient = client or LiteLLMClient(
            _litellm_module,
            completion_handler,
            retry_switch_to_replacements=self.settings.api.retry_switch_to_replacements,
        )
        if client is None and completion_handler is None and isinstance(litellm, LazyModule):
            litellm.prefetch()  # the first model call then finds litellm imported
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
        """Synchronous :meth:`acomplete`; a single argument is taken as the context (a persistent
        RLM's as the query: it asks about what the session holds)."""
        if query and not context and not self.settings.persistent:
            query, context = "", query
        return run_sync(self.acomplete(query, context, **kwargs))

    async def acomplete(self, query: str = "", context: str = "", **kwargs: Any) -> str:
        """Run the loop until the model gives a final answer; ``**kwargs`` go to every model call.

        Raises MaxDepthError when this RLM sits at ``max_depth``, MaxIterationsError when
        ``max_iterations`` model calls pass without a final answer, BudgetExceededError when a
        ``max_total_*`` limit is spent. The run's record is kept in ``last_run``.
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

    async def atry_complete_result(
        self, query: str = "", context: str = "", *, query_as_context: bool = True, **kwargs: Any
    ) -> RunResult:
        """Like :meth:`acomplete_result`, but a failed run is returned as a FailedCompletionResult.

        ``query_as_context=False``: an empty context stays empty and the query stays the question
        (by default a query without a context becomes the context, recursive-llm's rule), for
        callers that know the context was given and is empty (``rlm-compat serve``).
        """
        return await self._run(query, context, kwargs, return_failure=True, query_as_context=query_as_context)

    def completion(self, query: str = "", context: str = "", **kwargs: Any) -> str:
        """2fb46cc's name for :meth:`complete`."""
        return self.complete(query, context, **kwargs)

    async def acompletion(self, query: str = "", context: str = "", **kwargs: Any) -> str:
        """2fb46cc's name for :meth:`acomplete`."""
        return await self.acomplete(query, context, **kwargs)

    async def _run(
        self,
        query: str,
        context: str,
        kwargs: dict[str, Any],
        *,
        return_failure: bool,
        query_as_context: bool = True,
    ) -> RunResult:
        kwargs = check_call_options(kwargs, api=self.settings.api, caller="complete()", stacklevel=5)
        return await self._engine.run(
            query,
            context,
            kwargs,
            return_failure=return_failure,
            on_end=self._ended,
            query_as_context=query_as_context,
        )

    def _ended(self, result: RunResult, messages: list[Message]) -> None:
        self.last_run, self._last_messages = result, messages

    def close(self) -> None:
        """End a persistent RLM's session, its REPL worker with it (docs/sessions.md); a later
        call starts a new one. Nothing to do for an RLM that is not persistent."""
        if self._engine.session is not None:
            self._engine.session.close()

    def __enter__(self) -> RLM:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

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
        if not self.settings.api.stats_per_run:
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


_POSITIONAL = (
    "model",
    "recursive_model",
    "api_base",
    "api_key",
    "max_depth",
    "max_iterations",
    "_current_depth",
)


def _signature() -> inspect.Signature:
    """``RLM.__init__`` as help() and IDEs show it: upstream's positional parameters, then
    every keyword of :data:`~rlm_compat.settings.PARAMETERS`, then the model-call options."""
    kinds = inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY
    parameters = [inspect.Parameter("self", kinds[0])]
    for name, row in PARAMETERS.items():
        default = inspect.Parameter.empty if row.default is REQUIRED else row.default
        kind = kinds[0] if row.positional else kinds[1]
        parameters.append(inspect.Parameter(name, kind, default=default, annotation=row.annotation))
    parameters.append(inspect.Parameter("llm_kwargs", inspect.Parameter.VAR_KEYWORD, annotation="Any"))
    return inspect.Signature(parameters)


def _keyword_docs() -> str:
    lines = [f"``{name}``: {row.doc}." for name, row in PARAMETERS.items() if name not in _POSITIONAL]
    return "\n\nKeywords:\n\n" + "\n".join(f"- {line}" for line in lines)


def _derive_from_parameters() -> None:
    """The constructor's signature and keyword docs, and a read-only attribute per kept option."""
    setattr(RLM.__init__, "__signature__", _signature())  # noqa: B010  # what inspect reads
    RLM.__init__.__doc__ = inspect.cleandoc(RLM.__init__.__doc__ or "") + _keyword_docs()
    for name in KEPT:
        if not hasattr(RLM, name):
            setattr(RLM, name, Setting(operator.attrgetter(name)))


_derive_from_parameters()


def _litellm_module() -> Any:
    """The patch point, read at call time so ``patch("...core.litellm.acompletion")`` takes effect."""
    return litellm


def _repl_executor(**options: Any) -> REPLExecutor:
    """A node's REPL, made by whatever ``rlm_compat.core.REPLExecutor`` is at call time."""
    return REPLExecutor(**options)
