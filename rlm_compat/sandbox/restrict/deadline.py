"""Timeouts for code running in the caller's thread.

A single watchdog thread keeps every running execution's deadline. At the deadline it injects
:class:`TimeoutSignal` into the executing thread (``PyThreadState_SetAsyncExc``), and again every
:data:`REINJECT_INTERVAL` seconds until the execution ends, so code that swallows one injection
still stops. Sandboxed ``except`` handlers also start with :func:`deadline_tick` (inserted by the
compiler), so ``while True: try: ... except BaseException: pass`` cannot outlive the deadline.

Two races are closed with the per-execution lock: nothing is injected after the execution
finished (a pending injection is withdrawn under the lock), and nothing is injected while a host
function runs (``recursive_llm`` may take minutes; that time does not count against the timeout).

The same thread samples the process's resident memory every :data:`MEMORY_SAMPLE_INTERVAL`
seconds while executions run; one whose process grew by more than its allowance since it
started gets :class:`MemorySignal` the same way (``list(itertools.count())`` is stopped long
before it takes the machine down).

What this cannot interrupt: a single long-running C call (a catastrophic regex, a huge
``sorted``, one enormous allocation); the injection lands when it returns.
"""

from __future__ import annotations

import ctypes
import heapq
import itertools
import math
import os
import sys
import threading
from collections.abc import Callable
from time import monotonic
from typing import TypeVar

from .context import LOCAL, Session
from .violations import MemorySignal, TimeoutSignal

__all__ = [
    "MEMORY_SAMPLE_INTERVAL",
    "REINJECT_INTERVAL",
    "Deadline",
    "deadline_tick",
    "generator_tick",
    "host_code",
    "resident_bytes",
    "run_with_deadline",
    "session_generator_tick",
]

REINJECT_INTERVAL = 0.1
"""Seconds between repeated injections once an execution is past its deadline."""

MEMORY_SAMPLE_INTERVAL = 0.02
"""Seconds between resident-memory samples while executions run."""

try:
    _STATM = os.open("/proc/self/statm", os.O_RDONLY)
    _PAGE = os.sysconf("SC_PAGE_SIZE")
except (OSError, ValueError, AttributeError):  # not Linux: no memory guard
    _STATM = -1
    _PAGE = 0


def resident_bytes() -> int | None:
    """This process's resident memory now (None where it cannot be read cheaply)."""
    if _STATM < 0:
        return None
    try:
        return int(os.pread(_STATM, 64, 0).split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


_HOST_POLL = 0.05

_set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
_set_async_exc.argtypes = (ctypes.c_ulong, ctypes.c_void_p)
_set_async_exc.restype = ctypes.c_int


def _inject(tid: int, signal: type[TimeoutSignal]) -> None:
    _set_async_exc(tid, id(signal))


def _withdraw(tid: int) -> None:
    _set_async_exc(tid, None)


class Deadline:
    """The timeout of one execution: when it ends, and whether a host call is pausing it."""

    __slots__ = (
        "baseline",
        "budget",
        "deadline",
        "fired",
        "host_sandbox",
        "host_since",
        "in_host",
        "last_poll",
        "lock",
        "memory_limit",
        "running",
        "stop",
        "tid",
        "timeout",
    )

    def __init__(self, timeout: float, memory_limit: int | None = None) -> None:
        self.timeout = timeout
        self.tid = threading.get_ident()
        self.deadline = monotonic() + timeout
        self.lock = threading.Lock()
        self.running = True
        self.in_host = 0
        self.host_since = 0.0
        self.budget = 0.0
        self.host_sandbox = 0.0
        self.last_poll = 0.0
        self.fired = 0
        self.stop: type[TimeoutSignal] | None = None
        self.memory_limit = memory_limit
        rss = resident_bytes() if memory_limit is not None else None
        self.baseline = rss

    def enter_host(self) -> None:
        """A host function starts: pause the clock (or stop now if time is already up).

        Sandboxed code the host function calls back into (``bool(arg)`` running a sandboxed
        ``__bool__``) still spends the remaining budget: the watchdog looks at what the thread is
        running while the clock is paused.
        """
        with self.lock:
            if self.in_host == 0:
                now = monotonic()
                if self.stop is not None or now >= self.deadline:
                    if self.fired:
                        _withdraw(self.tid)
                    raise (self.stop or TimeoutSignal)()
                self.host_since = self.last_poll = now
                self.budget = self.deadline - now
                self.host_sandbox = 0.0
            self.in_host += 1

    def leave_host(self) -> None:
        """A host function returned (or raised): resume the clock where it stopped."""
        with self.lock:
            self.in_host -= 1
            if self.in_host == 0:
                self.deadline = monotonic() + self.budget - self.host_sandbox

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
                return self._due_in_host(now)
            if now < self.deadline and self.stop is None:
                return self.deadline
            self.stop = self.stop or TimeoutSignal
            _inject(self.tid, self.stop)
            self.fired += 1
            return now + REINJECT_INTERVAL

    def _due_in_host(self, now: float) -> float:
        """While a host function runs: count only time spent back in this execution's code."""
        elapsed, self.last_poll = now - self.last_poll, now
        if not math.isfinite(self.budget) or not _sandbox_on_top(self):
            return now + _HOST_POLL
        self.host_sandbox += elapsed
        if self.host_sandbox < self.budget:
            return now + _HOST_POLL
        self.stop = TimeoutSignal
        _inject(self.tid, TimeoutSignal)
        self.fired += 1
        return now + REINJECT_INTERVAL

    def _check_memory(self, rss: int) -> bool:
        """Watchdog side: stop the execution if the process outgrew its allowance."""
        if self.memory_limit is None or self.baseline is None:
            return False
        if rss - self.baseline <= self.memory_limit:
            return False
        with self.lock:
            if not self.running or self.in_host:
                return False
            self.stop = MemorySignal
            _inject(self.tid, MemorySignal)
            self.fired += 1
            return True


_SANDBOX_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_HOST_CODE: set[object] = set()
"""Code objects inside the sandbox package that are host time (a worker waiting on its parent)."""


def host_code(fn: Callable[..., object]) -> None:
    """Count time spent in ``fn`` (a sandbox-package function) as host time, not the step's."""
    _HOST_CODE.add(fn.__code__)


_CURRENT: dict[int, Deadline] = {}
"""The innermost running execution of each thread (for the watchdog's look at its frames)."""


def _sandbox_on_top(d: Deadline) -> bool:
    """Whether ``d``'s thread is running sandboxed code of ``d`` right now (not host code)."""
    if _CURRENT.get(d.tid) is not d:
        return False
    frame = sys._current_frames().get(d.tid)
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename.startswith("<rlm-repl-"):
            return True
        if not filename.startswith(_SANDBOX_DIR) or frame.f_code in _HOST_CODE:  # the host runs
            return False
        frame = frame.f_back  # a guard called by sandboxed code
    return False


class _Watchdog:
    """One daemon thread watching every deadline in the process."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._heap: list[tuple[float, int, Deadline]] = []
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None
        self._memory: set[Deadline] = set()

    def watch(self, d: Deadline) -> None:
        with self._cond:
            if d.baseline is not None:
                self._memory.add(d)
            if math.isfinite(d.deadline):
                heapq.heappush(self._heap, (d.deadline, next(self._seq), d))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="rlm-compat-watchdog", daemon=True)
                self._thread.start()
            elif (d.baseline is not None and len(self._memory) == 1) or (
                self._heap and self._heap[0][2] is d
            ):
                self._cond.notify()

    def _run(self) -> None:
        next_sample = 0.0
        with self._cond:
            while True:
                now = monotonic()
                if self._memory and now >= next_sample:
                    self._sample_memory()
                    next_sample = now + MEMORY_SAMPLE_INTERVAL
                wake = self._heap[0][0] if self._heap else math.inf
                if self._memory:
                    wake = min(wake, next_sample)
                if wake > now:
                    self._cond.wait(None if wake == math.inf else wake - now)
                    continue
                if not self._heap or self._heap[0][0] > now:
                    continue
                _, _, d = heapq.heappop(self._heap)
                again = d._due(now)
                if again is not None:
                    heapq.heappush(self._heap, (again, next(self._seq), d))

    def _sample_memory(self) -> None:
        """Stop executions that outgrew their allowance; once stopped, re-inject like a timeout.

        The first injection can land where Python drops it (a garbage-collector callback that
        freed the memory again), so a fired memory stop is kept on the heap and repeated every
        :data:`REINJECT_INTERVAL` until the execution ends, whatever the memory does next.
        """
        rss = resident_bytes()
        for d in list(self._memory):
            if not d.running:
                self._memory.discard(d)
            elif rss is not None and d._check_memory(rss):
                self._memory.discard(d)
                heapq.heappush(self._heap, (monotonic() + REINJECT_INTERVAL, next(self._seq), d))


_WATCHDOG = _Watchdog()


def deadline_tick() -> None:
    """Inserted at the top of every sandboxed ``except`` body: stop there once time is up."""
    state = LOCAL.state
    if state is not None:
        d = state.deadline
        if d is not None and (d.stop is not None or (d.in_host == 0 and monotonic() >= d.deadline)):
            raise (d.stop or TimeoutSignal)()


def generator_tick() -> None:
    """The tick inside generator functions: also lets a generator being closed just stop.

    A generator dropped outside any execution (the caller discards ``env``) or after its
    deadline is closed by the garbage collector in whatever thread drops it; its ``finally``
    body must not run there, so the tick ends it at once.
    """
    _generator_tick(LOCAL.state is not None)


def session_generator_tick(session: Session) -> Callable[[], None]:
    """:func:`generator_tick` for ``session``'s generators: closing one counts as "outside"
    unless a step of that same session is running in this thread (another session's step is
    no place for its cleanup code)."""

    def generator_tick() -> None:
        state = LOCAL.state
        _generator_tick(state is not None and state.session is session)

    return generator_tick


def _generator_tick(at_home: bool) -> None:
    state = LOCAL.state
    d = state.deadline if state is not None else None
    late = d is not None and (d.stop is not None or (d.in_host == 0 and monotonic() >= d.deadline))
    if not at_home or late:
        if sys.exc_info()[0] is GeneratorExit:
            raise GeneratorExit
        if late:
            raise (d.stop or TimeoutSignal)()  # type: ignore[union-attr]


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
    outer = _CURRENT.get(deadline.tid)
    _CURRENT[deadline.tid] = deadline
    try:
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
    finally:
        if outer is None:
            _CURRENT.pop(deadline.tid, None)
        else:
            _CURRENT[deadline.tid] = outer
