"""The concurrency gate: at most so many runs at once, a bounded queue in arrival order, 429 beyond."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from .api_errors import ApiError

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
    per-request limit when undeclared); a request over it waits (without its body being read) for
    up to ``timeout`` seconds, then gets 429.

    The gate admits runs after their bodies are parsed; without this, any number of connections
    could each upload a body up to ``--max-body-bytes`` at the same moment. Until a handler reads,
    aiohttp holds only a small buffer per connection (it stops reading the socket), so a waiting
    request costs nothing. One body is always admitted, whatever its size.
    """

    def __init__(self, total: int, timeout: float) -> None:
        self.total, self.timeout = total, timeout
        self.reserved = 0
        self._waiters: collections.deque[tuple[int, asyncio.Future[None]]] = collections.deque()

    @property
    def waiting(self) -> int:
        return sum(1 for _, w in self._waiters if not w.done())

    @asynccontextmanager
    async def reserve(self, size: int) -> AsyncIterator[None]:
        await self._take(size)
        try:
            yield
        finally:
            self.reserved -= size
            self._wake()

    def _fits(self, size: int) -> bool:
        return not self.reserved or self.reserved + size <= self.total

    async def _take(self, size: int) -> None:
        if not self.waiting and self._fits(size):
            self.reserved += size
            return
        waiter = (size, asyncio.get_running_loop().create_future())
        self._waiters.append(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(waiter[1]), self.timeout)
        except BaseException as exc:
            future = waiter[1]
            if future.done() and not future.cancelled():  # granted just as the wait ended
                self.reserved -= size
                self._wake()
            else:
                future.cancel()
            if isinstance(exc, asyncio.TimeoutError):
                raise _busy(f"server busy: {self.reserved:,} bytes of request bodies being read") from None
            raise
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    def _wake(self) -> None:
        while self._waiters:
            size, future = self._waiters[0]
            if future.done():
                self._waiters.popleft()
                continue
            if not self._fits(size):
                return
            self._waiters.popleft()
            self.reserved += size
            future.set_result(None)


def _busy(message: str, timed_out: bool = False) -> ApiError:
    text = (
        f"{message}; retry later" if not timed_out else f"{message} waiting for a free run slot; retry later"
    )
    return ApiError(429, text, type="rate_limit_error", code="server_busy", retry=True, retry_after=1)
