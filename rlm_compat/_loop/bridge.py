"""The sync/async bridge: run a coroutine from synchronous code, even inside a running event loop."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["loop_running", "run_on_loop", "run_sync"]

_T = TypeVar("_T")

WAKE_SECONDS = 0.2
"""How often a loop on the main thread wakes while it waits (see :func:`_waking`)."""


def run_sync(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coro`` to completion from synchronous code, even inside a running event loop.

    Upstream calls ``asyncio.run`` and so fails when a loop is already running in this thread
    (Jupyter, an async web handler); here the coroutine then runs on a loop in a helper thread.
    """
    if not loop_running():
        if threading.current_thread() is threading.main_thread():
            return asyncio.run(_waking(coro))
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="rlm-sync") as pool:
        return pool.submit(asyncio.run, coro).result()


def run_on_loop(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coro`` on the RLM's own loop from the REPL thread (or privately, on the loop's thread)."""
    if loop.is_running() and not loop_running(loop):
        return asyncio.run_coroutine_threadsafe(coro, loop).result()
    return run_sync(coro)


def loop_running(loop: asyncio.AbstractEventLoop | None = None) -> bool:
    """Whether an event loop (``loop``, if given) is running in the current thread."""
    try:
        current = asyncio.get_running_loop()
    except RuntimeError:
        return False
    return loop is None or current is loop


async def _waking(coro: Coroutine[Any, Any, _T]) -> _T:
    """``coro``, while the loop wakes every :data:`WAKE_SECONDS`.

    Ctrl-C is handled by asyncio's SIGINT handler, a Python function the main thread runs when it
    next runs Python code. When the kernel delivers the signal to another thread (the worker
    launcher's, say), the main thread's loop sleeps on in ``select()`` until some event: a run
    waiting on a provider that does not answer never noticed the Ctrl-C (seen under load: two
    SIGINTs, one minute, the loop still in ``select()``).
    """

    async def tick() -> None:
        while True:
            await asyncio.sleep(WAKE_SECONDS)

    ticker = asyncio.ensure_future(tick())
    try:
        return await coro
    finally:
        ticker.cancel()
