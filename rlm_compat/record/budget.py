"""A run's budget: calls, tokens, cost and wall time shared by the whole tree of one ``complete()``.

Calls are *reserved* before they are sent, under a lock, so any number of concurrent sub-calls can
never send more than ``max_calls`` requests. Tokens and cost are only known when a reply arrives:
once the observed total exceeds its limit no further call is reserved (the reply that crossed it
is still counted). The first limit hit latches: every later reservation fails the same way, so a
model that catches the error inside its REPL code cannot keep spending.

A run of a persistent session has a *parent*: the session's budget over all its calls. Every call
reserved, every token and cost observed and every check is charged to both, so whichever limit is
reached first ends the run.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any

from ..errors import BudgetExceededError, ConfigurationError
from ..events import ModelCallFinished, TrajectoryEvent

__all__ = ["RunBudget"]


class RunBudget:
    """Limits for one run (None: unlimited); also an observer that counts tokens and cost."""

    def __init__(
        self,
        *,
        max_calls: int | None = None,
        max_tokens: int | None = None,
        max_cost_usd: float | None = None,
        max_elapsed_seconds: float | None = None,
        parent: RunBudget | None = None,
        scope: str = "run",
    ) -> None:
        for name, value in (
            ("max_calls", max_calls),
            ("max_tokens", max_tokens),
            ("max_cost_usd", max_cost_usd),
            ("max_elapsed_seconds", max_elapsed_seconds),
        ):
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ConfigurationError(f"{name} must be a positive number or None, not {value!r}")
            if name in ("max_calls", "max_tokens") and not isinstance(value, int):
                raise ConfigurationError(f"{name} must be a positive integer or None, not {value!r}")
            if isinstance(value, float) and not math.isfinite(value):
                raise ConfigurationError(f"{name} must be finite (use None for no limit), not {value!r}")
        self.max_calls = max_calls
        self.max_tokens = max_tokens
        self.max_cost_usd = max_cost_usd
        self.max_elapsed_seconds = max_elapsed_seconds
        self.parent = parent
        self.scope = scope
        self._started = time.monotonic()
        self._lock = threading.Lock()
        self._calls = 0
        self._tokens = 0
        self._cost = 0.0
        self._priced = False
        self._exceeded: tuple[str, float, float] | None = None

    @property
    def limited(self) -> bool:
        """Whether any limit is set (an unlimited budget is skipped by the loop)."""
        return self.parent is not None or any(
            v is not None
            for v in (self.max_calls, self.max_tokens, self.max_cost_usd, self.max_elapsed_seconds)
        )

    def reserve_call(self) -> None:
        """Count one model call before it is sent, or raise BudgetExceededError (this run's own
        limits first, then the session's: a call the session refuses ends this run, and the
        session is never charged for a call its run refused)."""
        with self._lock:
            self._check_locked()
            if self.max_calls is not None and self._calls + 1 > self.max_calls:
                self._exceed_locked("llm_calls", self.max_calls, self._calls + 1)
            self._calls += 1
        if self.parent is not None:
            self.parent.reserve_call()

    def check(self) -> None:
        """Raise BudgetExceededError if any limit is spent (e.g. between REPL steps)."""
        with self._lock:
            self._check_locked()
        if self.parent is not None:
            self.parent.check()

    def expire(self) -> None:
        """The wall-time limit ran out while something waited: latch and raise BudgetExceededError."""
        limit = self.max_elapsed_seconds
        if self.parent is not None and self.parent.remaining_seconds() == 0.0:
            self.parent.expire()
        if limit is None:
            raise ValueError("expire() needs a max_elapsed_seconds limit")
        with self._lock:
            self._check_locked()
            self._exceed_locked("elapsed_seconds", limit, max(limit, time.monotonic() - self._started))

    def check_deadline(self) -> None:
        """recursive-llm 0.5.0's name for :meth:`check`."""
        self.check()

    def record_usage(self, total_tokens: int, estimated_cost_usd: float | None) -> None:
        """Set the run's observed totals (not increments) and raise if one crosses its limit.

        recursive-llm 0.5.0's interface, for code that meters usage itself; runs of an RLM are
        metered from their events instead.
        """
        with self._lock:
            self._tokens = total_tokens
            if estimated_cost_usd is not None:
                self._cost, self._priced = estimated_cost_usd, True
            self._latch_locked()
            self._check_locked()

    def remaining_seconds(self) -> float | None:
        """Wall time left, or None without a time limit."""
        parent = None if self.parent is None else self.parent.remaining_seconds()
        if self.max_elapsed_seconds is None:
            return parent
        mine = max(0.0, self.max_elapsed_seconds - (time.monotonic() - self._started))
        return mine if parent is None else min(mine, parent)

    def __call__(self, event: TrajectoryEvent) -> None:
        """Observer: add the usage of every answered call."""
        if not isinstance(event, ModelCallFinished):
            return
        if self.parent is not None:
            self.parent(event)
        with self._lock:
            self._tokens += event.total_tokens or 0
            if event.cost_usd is not None:
                self._cost += event.cost_usd
                self._priced = True
            self._latch_locked()

    def _latch_locked(self) -> None:
        """Mark the budget spent once tokens or cost exceed a limit (the first reason wins)."""
        if self._exceeded is not None:
            return
        if self.max_tokens is not None and self._tokens > self.max_tokens:
            self._exceeded = ("total_tokens", self.max_tokens, self._tokens)
        elif self.max_cost_usd is not None and self._priced and self._cost > self.max_cost_usd:
            self._exceeded = ("estimated_cost_usd", self.max_cost_usd, self._cost)

    def snapshot(self) -> dict[str, Any]:
        """Limits and what was used (recursive-llm 0.5.0's ``stats["budget"]`` keys)."""
        session = None if self.parent is None else self.parent.snapshot()
        with self._lock:
            return {
                **({"session": session} if session is not None else {}),
                "max_calls": self.max_calls,
                "max_tokens": self.max_tokens,
                "max_cost_usd": self.max_cost_usd,
                "max_elapsed_seconds": self.max_elapsed_seconds,
                "reserved_calls": self._calls,
                "observed_tokens": self._tokens,
                "observed_cost_usd": round(self._cost, 10) if self._priced else None,
                "elapsed_seconds": round(time.monotonic() - self._started, 6),
                "exceeded": None if self._exceeded is None else self._exceeded[0],
            }

    def _check_locked(self) -> None:
        if self._exceeded is not None:
            raise BudgetExceededError(*self._exceeded, self.scope)
        if self.max_elapsed_seconds is not None:
            elapsed = time.monotonic() - self._started
            if elapsed >= self.max_elapsed_seconds:
                self._exceed_locked("elapsed_seconds", self.max_elapsed_seconds, elapsed)

    def _exceed_locked(self, metric: str, limit: float, observed: float) -> None:
        self._exceeded = (metric, limit, observed)
        raise BudgetExceededError(metric, limit, observed, self.scope)
