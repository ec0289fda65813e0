"""The server's own thread pools for blocking file work, each bounded, with a deadline per job.

Document reads and trajectory writes block a thread; on asyncio's shared default pool one stuck file
system (a hung network mount) would take every thread and stall all work that needs one. Each kind
of work gets its own pool here instead: a stuck job holds one of its pool's threads (a thread cannot
be stopped, only abandoned), later jobs of that kind wait at most the pool's deadline and then fail
with 503, and nothing else slows. Threads are daemons, so an abandoned one never holds up exit.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from .api_errors import ApiError

__all__ = ["BlockingPool", "in_daemon_thread"]

_T = TypeVar("_T")


class BlockingPool:
    """``threads`` daemon threads for one kind of work; at most ``backlog`` jobs waiting for one."""

    def __init__(self, name: str, threads: int, backlog: int, timeout: float) -> None:
        self.name, self.threads, self.backlog, self.timeout = name, threads, backlog, timeout
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self.busy = 0
        self.waiting = 0
        self._started = 0

    def status(self) -> dict[str, Any]:
        """What ``/health`` shows: threads, how many are busy, jobs waiting, saturated or not."""
        with self._lock:
            busy, waiting = self.busy, self.waiting
        return {"threads": self.threads, "busy": busy, "waiting": waiting, "saturated": busy >= self.threads}

    async def run(self, work: Callable[[], _T]) -> _T:
        """``work()`` on one of the pool's threads; 503 if it does not finish within the deadline."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[_T] = loop.create_future()
        state = {"cancelled": False}
        with self._lock:
            if self.waiting >= self.backlog:
                raise self._unavailable("has too many jobs waiting")
            self.waiting += 1
            if self._started < self.threads:
                self._started += 1
                threading.Thread(target=self._worker, name=f"rlm-serve-{self.name}", daemon=True).start()

        def job() -> None:
            with self._lock:
                self.waiting -= 1
                if state["cancelled"]:
                    return
                self.busy += 1
            try:
                result: Any = work()
            except BaseException as exc:  # handed to the awaiting task, which raises it
                outcome: tuple[bool, Any] = (False, exc)
            else:
                outcome = (True, result)
            finally:
                with self._lock:
                    self.busy -= 1
            try:
                loop.call_soon_threadsafe(_settle, done, outcome)
            except RuntimeError:  # the loop closed while the job ran: nobody is waiting
                pass

        self._jobs.put(job)
        try:
            return await asyncio.wait_for(asyncio.shield(done), self.timeout)
        except asyncio.TimeoutError:
            raise self._unavailable(f"did not finish within {self.timeout:g} s") from None
        finally:
            state["cancelled"] = True

    def _worker(self) -> None:
        while True:
            self._jobs.get()()

    def _unavailable(self, why: str) -> ApiError:
        return ApiError(
            503,
            f"the server's {self.name} work {why}: its file system is slow or stuck; try later",
            type="server_error",
            code="storage_unavailable",
            retry=False,
        )


def in_daemon_thread(work: Callable[[], _T], name: str) -> asyncio.Future[_T]:
    """``work()`` on a daemon thread of its own, as a future of the running loop."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[_T] = loop.create_future()

    def run() -> None:
        try:
            outcome: tuple[bool, Any] = (True, work())
        except BaseException as exc:  # handed to whoever awaits the future
            outcome = (False, exc)
        try:
            loop.call_soon_threadsafe(_settle, done, outcome)
        except RuntimeError:  # the loop closed first
            pass

    threading.Thread(target=run, name=name, daemon=True).start()
    return done


def _settle(future: asyncio.Future[Any], outcome: tuple[bool, Any]) -> None:
    """Hand the outcome on; an exception nobody awaits any more (the waiter gave up) is not logged
    as "never retrieved": the waiter already answered for it."""
    if future.done():
        return
    ok, value = outcome
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)
        future.add_done_callback(lambda f: f.exception())
