"""The concurrency gate: at most so many runs at once, a bounded queue in arrival order, 429 beyond."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

from ._errors import ApiError

__all__ = ["BodyBudget", "Gate"]


class Gate:
    """At most ``limit`` runs at once, ``queue`` more waiting in arrival order, 429 beyond that."""

    def __init__(self, limit: int, queue: int, timeout: float) -> None:
        self._free = limit
        self._queue = queue
        self._timeout = timeout
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self.running = 0
        self._closed: ApiError | None = None

    def close(self, error: ApiError) -> None:
        """Every waiting and later request fails with ``error`` (the server is shutting down)."""
        self._closed = error
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_exception(error)

    @property
    def waiting(self) -> int:
        return sum(1 for w in self._waiters if not w.done())

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        await self._acquire()
        self.running += 1
        try:
            yield
        finally:
            self.running -= 1
            self._release()

    async def _acquire(self) -> None:
        if self._closed is not None:
            raise self._closed
        if self._free > 0 and not self.waiting:
            self._free -= 1
            return
        if self.waiting >= self._queue:
            raise _busy(f"server busy: {self.running} runs in progress and {self.waiting} queued (the limit)")
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(future)

        def expire() -> None:
            if not future.done():
                future.set_exception(_busy("queued too long", True))

        timer = asyncio.get_running_loop().call_later(self._timeout, expire)
        try:
            await future
        except BaseException:
            got_slot = future.done() and not future.cancelled() and future.exception() is None
            if got_slot:
                self._release()  # handed a slot just as the wait was cancelled: pass it on
            raise
        finally:
            timer.cancel()
            if future in self._waiters:
                self._waiters.remove(future)

    def _release(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1


class BodyBudget:
    """Request bodies being read at once hold at most ``total`` bytes (their declared sizes, or the
    per-request limit when undeclared); beyond that, 429 before a byte is read.

    The gate admits runs after their bodies are parsed; without this, any number of connections
    could each upload a body up to ``--max-body-bytes`` at the same moment. Until a handler reads,
    aiohttp holds only a small buffer per connection (it stops reading the socket), so refusing
    here costs nothing. One body is always admitted, whatever its size.
    """

    def __init__(self, total: int) -> None:
        self.total = total
        self.reserved = 0

    @contextmanager
    def reserve(self, size: int) -> Iterator[None]:
        if self.reserved and self.reserved + size > self.total:
            raise _busy(f"server busy: {self.reserved:,} bytes of request bodies being read (the limit)")
        self.reserved += size
        try:
            yield
        finally:
            self.reserved -= size


def _busy(message: str, timed_out: bool = False) -> ApiError:
    text = (
        f"{message}; retry later" if not timed_out else f"{message} waiting for a free run slot; retry later"
    )
    return ApiError(429, text, type="rate_limit_error", code="server_busy", retry=True, retry_after=1)
