"""Timeouts for code running in the caller's thread.

A single watchdog thread keeps every running execution's deadline. At the deadline it injects
:class:`TimeoutSignal` into the executing thread (``PyThreadState_SetAsyncExc``), and again every
:data:`REINJECT_INTERVAL` seconds until the execution ends, so code that swallows one injection
still stops. Sandboxed ``except`` handlers also start with :func:`deadline_tick` (inserted by the
compiler), so ``while True: try: ... except BaseException: pass`` cannot outlive the deadline.

Two races are closed with the per-execution lock: nothing is injected after the execution
finished (a pending injection is withdrawn under the lock), and nothing is injected while a host
function runs (``recursive_llm`` may take minutes; that time does not count against the timeout).

What this cannot interrupt: a single long-running C call (a catastrophic regex, a huge
``sorted``); the injection lands when it returns.
"""

from __future__ import annotations

import ctypes
import heapq
import itertools
import threading
from collections.abc import Callable
from time import monotonic
from typing import TypeVar

from .context import LOCAL
from .violations import TimeoutSignal

__all__ = ["REINJECT_INTERVAL", "Deadline", "deadline_tick", "run_with_deadline"]

REINJECT_INTERVAL = 0.1
"""Seconds between repeated injections once an execution is past its deadline."""

_HOST_POLL = 0.05

_set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
_set_async_exc.argtypes = (ctypes.c_ulong, ctypes.c_void_p)
_set_async_exc.restype = ctypes.c_int
_SIGNAL_ADDRESS = id(TimeoutSignal)


def _inject(tid: int) -> None:
    _set_async_exc(tid, _SIGNAL_ADDRESS)


def _withdraw(tid: int) -> None:
    _set_async_exc(tid, None)


class Deadline:
    """The timeout of one execution: when it ends, and whether a host call is pausing it."""

    __slots__ = ("deadline", "fired", "host_since", "in_host", "lock", "running", "tid", "timeout")

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.tid = threading.get_ident()
        self.deadline = monotonic() + timeout
        self.lock = threading.Lock()
        self.running = True
        self.in_host = 0
        self.host_since = 0.0
        self.fired = 0

    def enter_host(self) -> None:
        """A host function starts: pause the clock (or stop now if time is already up)."""
        with self.lock:
            if self.in_host == 0:
                now = monotonic()
                if now >= self.deadline:
                    if self.fired:
                        _withdraw(self.tid)
                    raise TimeoutSignal()
                self.host_since = now
            self.in_host += 1

    def leave_host(self) -> None:
        """A host function returned (or raised): resume the clock where it stopped."""
        with self.lock:
            self.in_host -= 1
            if self.in_host == 0:
                self.deadline += monotonic() - self.host_since

    def finish(self) -> None:
        """The execution is over: no injection may happen from now on."""
        with self.lock:
            if self.running:
                self.running = False
                if self.fired:
                    _withdraw(self.tid)

    def _due(self, now: float) -> float | None:
        """Watchdog side: inject if due; return when to look again (None: never)."""
        with self.lock:
            if not self.running:
                return None
            if self.in_host:
                return max(self.deadline, now + _HOST_POLL)
            if now < self.deadline:
                return self.deadline
            _inject(self.tid)
            self.fired += 1
            return now + REINJECT_INTERVAL


class _Watchdog:
    """One daemon thread watching every deadline in the process."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._heap: list[tuple[float, int, Deadline]] = []
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None

    def watch(self, d: Deadline) -> None:
        with self._cond:
            heapq.heappush(self._heap, (d.deadline, next(self._seq), d))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="rlm-compat-watchdog", daemon=True
                )
                self._thread.start()
            elif self._heap[0][2] is d:
                self._cond.notify()

    def _run(self) -> None:
        with self._cond:
            while True:
                if not self._heap:
                    self._cond.wait()
                    continue
                when, _, d = self._heap[0]
                now = monotonic()
                if when > now:
                    self._cond.wait(when - now)
                    continue
                heapq.heappop(self._heap)
                again = d._due(now)
                if again is not None:
                    heapq.heappush(self._heap, (again, next(self._seq), d))


_WATCHDOG = _Watchdog()


def deadline_tick() -> None:
    """Inserted at the top of every sandboxed ``except`` body: stop there once time is up."""
    state = LOCAL.state
    if state is not None:
        d = state.deadline
        if d is not None and d.in_host == 0 and monotonic() >= d.deadline:
            raise TimeoutSignal()


_T = TypeVar("_T")


def _finish_surely(d: Deadline) -> None:
    while True:
        try:
            d.finish()
            return
        except TimeoutSignal:
            continue


def run_with_deadline(
    body: Callable[[], _T], deadline: Deadline | None
) -> tuple[_T | None, TimeoutSignal | None]:
    """Run ``body`` in this thread under ``deadline``: ``(result, None)`` or ``(None, signal)``.

    A signal that lands after ``body`` returned (while finishing) does not discard the result.
    """
    if deadline is None:
        return body(), None
    result: list[_T] = []
    try:
        try:
            _WATCHDOG.watch(deadline)
            result.append(body())
        finally:
            _finish_surely(deadline)
    except TimeoutSignal as signal:
        _finish_surely(deadline)
        if result:
            return result[0], None
        return None, signal
    return result[0], None


