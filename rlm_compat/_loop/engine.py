"""The loop engine: one run's record, its tree of nodes, each node's session.

:class:`Engine` is built from a :class:`~rlm_compat.settings.Settings` and an
:class:`~rlm_compat.clients.LLMClient`, never from the RLM facade; a child node's engine is made
from ``settings.child()``. The FINAL rule set is chosen once, when the engine is built.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable
from typing import Any

from ..clients import LLMClient
from ..errors import BudgetExceededError, MaxDepthError
from ..events import RlmFailed, RlmFinished, RlmStarted, RunFailed, RunFinished, RunStarted
from ..prompts import build_system_prompt
from ..record import CompletionResult, FailedCompletionResult, Observer, Run, RunResult
from ..record.budget import RunBudget
from ..record.trajectory import TrajectoryWriter
from ..repl import REPLExecutor
from ..settings import Settings
from ..settings.run_config import run_config
from ..types import Message
from .final import FinalResolver, choose_resolver
from .model_call import ModelCaller
from .namespace import build_namespace
from .persistent import PersistentSession, Turn
from .session import NodeSession
from .subcalls import LoopSubCalls
from .tally import Tally
from .toolcalls import ToolCalls

__all__ = ["Engine", "ReplFactory", "RunEnd"]

ReplFactory = Callable[..., REPLExecutor]
"""Makes a node's REPL (``config=``, ``api=``, ``state=``): the facade passes one that reads
``rlm_compat.core.REPLExecutor`` at call time, so a test patching it there takes effect."""

RunEnd = Callable[[RunResult, list[Message]], None]
"""Told each root run's result (finished or failed) and its root node's messages."""


class Engine:
    """Runs RLM nodes with ``settings`` through ``client``; ``tally`` counts this node level's calls.

    ``observers``: who hears each root run's events (default: the settings'); a live list, so an
    observer added to it later hears the runs that start after.
    """

    def __init__(
        self,
        settings: Settings,
        client: LLMClient,
        *,
        repl_factory: ReplFactory,
        tally: Tally | None = None,
        resolver: FinalResolver | None = None,
        observers: list[Observer] | None = None,
    ) -> None:
        self.settings, self.client, self.repl_factory = settings, client, repl_factory
        self.observers = list(settings.observers) if observers is None else observers
        self.tally = Tally() if tally is None else tally
        self.resolver = choose_resolver(settings.profile, settings.release) if resolver is None else resolver
        self.caller = ModelCaller(settings, client, self.tally)
        self.session = PersistentSession() if settings.persistent else None
        """A persistent RLM's session (``persistent=True``; children never are)."""

    def child(self) -> Engine:
        """The engine of a child node: one level deeper, its own tally, the same rule set."""
        return Engine(
            self.settings.child(), self.client, repl_factory=self.repl_factory, resolver=self.resolver
        )

    def new_run(self, turn: Turn | None = None) -> Run:
        """A run's record and budget (a persistent session's call: its budget charges the session's)."""
        settings = self.settings
        writer = None
        if settings.trajectory_path is not None:
            writer = TrajectoryWriter(
                settings.trajectory_path, redact=not settings.capture_trajectory_content
            )
        shape = settings.release.shaper(
            capture=settings.capture_trajectory_content, max_retries=settings.retry.max_retries
        )
        # every session keeps its totals (stats["budget"]["session"]); session_budget adds limits
        start: Callable[[], RunBudget] = functools.partial(RunBudget, scope="session")
        if settings.session_budget is not None:
            start = settings.session_budget.start_session
        parent = None if turn is None else turn.session_budget(start)
        budget = settings.budget.start(parent)
        return Run(budget=budget, observers=self.observers, trajectory=writer, shape=shape)

    async def run(
        self,
        query: str,
        context: str,
        kwargs: dict[str, Any],
        *,
        return_failure: bool,
        on_end: RunEnd,
        query_as_context: bool = True,
    ) -> RunResult:
        """One root run: its own :class:`Run`, the root node, then the result object.

        ``query_as_context=False`` keeps an empty context empty (the root only; children keep the rule).
        A persistent RLM's run is the next call of its session (:mod:`.persistent`).
        """
        session = contextlib.nullcontext() if self.session is None else self.session.turn()
        with session as turn:
            # a persistent session's query without a context asks about what the session holds
            if turn is not None:
                query_as_context = False
            return await self._run(query, context, kwargs, return_failure, on_end, query_as_context, turn)

    async def _run(
        self,
        query: str,
        context: str,
        kwargs: dict[str, Any],
        return_failure: bool,
        on_end: RunEnd,
        query_as_context: bool,
        turn: Turn | None,
    ) -> RunResult:
        settings = self.settings
        if query_as_context and query and not context:
            query, context = "", query
        if settings.depth >= settings.max_depth and not settings.release.root_exempt(settings.depth):
            raise MaxDepthError(f"Max recursion depth ({settings.max_depth}) exceeded")
        run = self.new_run(turn)
        config = run_config(settings, self.client, _size(context))
        root, depth = run.node_id("rlm"), settings.depth
        kept: list[list[Message]] = []
        run.note_context(root, context)
        run.emit(
            RunStarted, depth=depth, node_id=root, query=query, context_chars=_size(context), config=config
        )
        try:
            answer = await self.node(
                run, root, "", query, context, kwargs, keep=kept, query_as_context=query_as_context, turn=turn
            )
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
                type(exc).__name__, str(exc), stats, run.events(), config, run.trajectory_path, _number(turn)
            )
            run.close()
            on_end(failed, kept[0] if kept else [])
            if return_failure and isinstance(exc, Exception):
                return failed
            raise
        stats = run.snapshot()
        run.emit(RunFinished, depth=depth, node_id=root, answer=answer, stats=stats)
        result = CompletionResult(answer, stats, run.events(), config, run.trajectory_path, _number(turn))
        run.close()
        on_end(result, kept[0] if kept else [])
        return result

    async def node(
        self,
        run: Run,
        node: str,
        parent: str,
        query: str,
        context: str,
        kwargs: dict[str, Any],
        *,
        keep: list[list[Message]] | None = None,
        query_as_context: bool = True,
        turn: Turn | None = None,
    ) -> str:
        """One RLM node of the tree (the root, or a child started from its parent's REPL; ``turn``:
        the root's call of a persistent session, whose REPL it runs in and whose record it adds to)."""
        if query_as_context and query and not context:
            query, context = "", query
        depth = self.settings.depth
        where = {"depth": depth, "node_id": node, "parent_id": parent}
        run.note_context(node, context)
        run.emit(
            RlmStarted, **where, model=self.settings.node_model, query=query, context_chars=_size(context)
        )
        iterations = 0
        try:
            session = self._open(run, node, query, context, turn)
            try:
                if keep is not None:
                    keep.append(session.messages)
                answer = await session.iterate(self.caller.call, kwargs)
            except BaseException as exc:
                if turn is not None:
                    turn.add_history(query, None, f"{type(exc).__name__}: {exc}", session.steps)
                raise
            finally:
                iterations = session.iterations
                session.close()
                if turn is not None and session.aborted:
                    turn.discard_repl()
        except BaseException as exc:
            run.emit(RlmFailed, **where, error_type=type(exc).__name__, error=str(exc), iterations=iterations)
            raise
        if turn is not None:
            turn.add_history(query, answer, None, session.steps)
        run.emit(RlmFinished, **where, answer=answer, iterations=iterations)
        return answer

    def _open(self, run: Run, node: str, query: str, context: str, turn: Turn | None) -> NodeSession:
        """A REPL session for the node with its namespace preloaded."""
        settings = self.settings
        # One REPL session per node: concurrent runs of one RLM never share a namespace or worker.
        # state="worker": the namespace stays in the worker; env names what it holds (see repl.py)
        # for_context: the step timeout this node's context earns (profile fixed, none given)
        config = settings.repl.for_context(_size(context))

        def make() -> REPLExecutor:
            return self.repl_factory(config=config, api=settings.api, state="worker")

        repl = make() if turn is None else turn.repl(make)
        if turn is not None:
            context = turn.take_context(context)
        calls = LoopSubCalls(
            settings,
            run,
            node,
            asyncio.get_running_loop(),
            leaf=lambda messages, model: self.caller.call(
                run, node, messages, is_leaf=True, iteration=None, model=model or settings.recursive_model
            ),
            child=lambda q, c: self.child().node(run, run.node_id("rlm"), node, q, c, {}),
        )
        tools = ToolCalls(run, node, settings.depth, asyncio.get_running_loop(), settings.custom_tools)
        namespace = build_namespace(
            query,
            context,
            calls,
            release=settings.release,
            profile=settings.profile,
            max_depth=settings.max_depth,
            tools=tools.entries(),
            into=None if turn is None else turn.env,
        )
        repl.preload(namespace.env)  # the context crosses to the worker during the first model call
        prompt = build_system_prompt(
            len(context),
            settings.depth,
            settings.max_depth,
            version=settings.effective_prompt_version,
            tools=[tool.prompt_line() for tool in settings.custom_tools],
        )
        return NodeSession(
            settings,
            run,
            node,
            repl,
            namespace,
            self.resolver,
            system_prompt=prompt,
            query=query if turn is None else query + turn.note(),
            owns_repl=turn is None,
            tally=self.tally,
            cancel_subcalls=functools.partial(_cancel_all, calls, tools),
        )


def _number(turn: Turn | None) -> int | None:
    return None if turn is None else turn.number


def _cancel_all(calls: LoopSubCalls, tools: ToolCalls) -> None:
    calls.cancel()
    tools.cancel()


def _size(context: Any) -> int:
    try:
        return len(context)
    except TypeError:
        return 0
