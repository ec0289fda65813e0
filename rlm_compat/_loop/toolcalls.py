"""Custom tools called from a node's REPL: run in the host, plain data in and out, each call recorded.

A tool function (:class:`~rlm_compat.custom_tools.Tool`) becomes a host function of the node's
namespace. In the worker the model's code holds only a stub of its name; a call is one round trip
on the worker's channel and runs here, on the REPL thread the step is waiting on (a sync tool
without a timeout: directly, so a call costs the round trip and the tool), on the node's event
loop (an ``async def`` tool), or on a thread of its own that the caller stops waiting for at the
tool's ``timeout`` (the tool cannot be stopped: it is left running and its result dropped).

Arguments and result are checked as plain data within the tool's byte limits
(:func:`~rlm_compat.custom_tools.plain_size`) and handed over as copies, so a tool keeps no
reference into the REPL's state and the REPL none into the tool's, inline as across the boundary.
Each call is a :class:`~rlm_compat.events.ToolCall` event: the stats count it, the record keeps the
result for replay and the tool's traceback, which never reaches the REPL.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import threading
import time
import traceback
from collections.abc import Callable, Coroutine
from typing import Any

from .. import plain_json
from ..custom_tools import Tool, plain_size
from ..errors import ToolError
from ..events import ToolCall
from ..record import Run
from .bridge import loop_running, run_sync

__all__ = ["ToolCalls"]

_IMMUTABLE = frozenset({str, bytes, int, float, bool, type(None)})


class ToolCalls:
    """The tools of one node: its namespace entries, and each call's run and record."""

    def __init__(
        self, run: Run, node: str, depth: int, loop: asyncio.AbstractEventLoop, tools: tuple[Tool, ...]
    ) -> None:
        self.run, self.node, self.depth, self.loop, self.tools = run, node, depth, loop, tools
        self._lock = threading.Lock()
        self._pending: set[concurrent.futures.Future[Any]] = set()

    def entries(self) -> dict[str, Any]:
        """Name -> the function model code calls (to be made a host function), or a copy of the value."""
        return {t.name: self._function(t) if t.is_function else copy.deepcopy(t.value) for t in self.tools}

    def cancel(self) -> None:
        """Stop waiting for the async tools in flight (their run was cancelled)."""
        with self._lock:
            pending = list(self._pending)
        for future in pending:
            future.cancel()

    def _function(self, tool: Tool) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            return self.call(tool, args, kwargs)

        call.__name__ = call.__qualname__ = tool.name
        call.__doc__ = tool.description or getattr(tool.value, "__doc__", None)
        return call

    def call(self, tool: Tool, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """One call from the REPL: checked, run, recorded; what the model's code gets back."""
        started = time.perf_counter()
        record: dict[str, Any] = {"argument_bytes": None, "result_bytes": None, "result": None}
        failure: BaseException | None = None
        trace: str | None = None
        try:
            try:
                record["argument_bytes"] = plain_size(
                    [list(args), kwargs], tool.max_argument_bytes, f"the arguments of {tool.name}()"
                )
            except OverflowError as exc:
                raise ToolError(str(exc)) from None
            try:
                result = self._invoke(tool, _detached(args), _detached(kwargs))
            except ToolError:
                raise
            except BaseException:
                trace = traceback.format_exc()
                raise
            try:
                record["result_bytes"] = plain_size(
                    result, tool.max_result_bytes, f"what {tool.name}() returned"
                )
            except (TypeError, OverflowError) as exc:
                raise ToolError(str(exc)) from None
            record["result"] = plain_json.dumps(result)
            return _detached(result)
        except BaseException as exc:
            failure = exc
            raise
        finally:
            self.run.emit(
                ToolCall,
                depth=self.depth,
                node_id=self.node,
                function=tool.name,
                duration_seconds=round(time.perf_counter() - started, 6),
                error_type=None if failure is None else type(failure).__name__,
                error=None if failure is None else str(failure),
                traceback=trace,
                **record,
            )

    def _invoke(self, tool: Tool, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        fn, timeout = tool.value, tool.timeout
        if tool.is_async:
            return self._await(tool, fn(*args, **kwargs), timeout)
        if timeout is None:
            result = fn(*args, **kwargs)
        else:
            result = _on_own_thread(tool, lambda: fn(*args, **kwargs), timeout)
        if asyncio.iscoroutine(result):
            return self._await(tool, result, timeout)
        return result

    def _await(self, tool: Tool, coro: Coroutine[Any, Any, Any], timeout: float | None) -> Any:
        """An async tool's coroutine, run on the node's loop (the REPL thread waits for it)."""
        if not self.loop.is_running() or loop_running(self.loop):
            try:
                return run_sync(asyncio.wait_for(coro, timeout))
            except asyncio.TimeoutError:
                raise ToolError(_late(tool)) from None
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        with self._lock:
            self._pending.add(future)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise ToolError(_late(tool)) from None
        finally:
            with self._lock:
                self._pending.discard(future)


def _on_own_thread(tool: Tool, work: Callable[[], Any], timeout: float) -> Any:
    """``work()`` on a daemon thread, waited for at most ``timeout`` seconds."""
    box: dict[str, Any] = {}
    done = threading.Event()

    def target() -> None:
        try:
            box["value"] = work()
        except BaseException as exc:  # handed to the caller below
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=target, name=f"rlm-tool-{tool.name}", daemon=True).start()
    if not done.wait(timeout):
        raise ToolError(_late(tool))
    if "error" in box:
        raise box["error"]
    return box["value"]


def _late(tool: Tool) -> str:
    return (
        f"{tool.name}() did not return within its timeout of {tool.timeout:g} s "
        "(the call was abandoned; its result, if any, is dropped)"
    )


def _detached(value: Any) -> Any:
    """A copy of checked plain data (immutable values as they are)."""
    return value if type(value) in _IMMUTABLE else copy.deepcopy(value)
