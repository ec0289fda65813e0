"""Tree-wide statistics of one run, folded from its events.

Key names follow recursive-llm 0.5.0's ``stats`` (``root_calls``, ``recursive_calls``,
``leaf_calls``, ``total_iterations``, ``max_depth_reached``, ``by_model``, ``prompt_tokens``,
``completion_tokens``, ``total_tokens``, ``cached_tokens``, ``estimated_cost_usd``,
``retry_calls``); rlm_compat adds ``by_depth``, REPL and wall time, sub-call counts, failed calls
custom tool calls (``tool_calls``, ``tool_errors``, ``tool_seconds``) and compactions
(``compactions``, ``compacted_tokens``: the estimated tokens they removed).
One difference in counting: ``llm_calls`` counts logical calls; a retried call is one call, its
retries are counted in ``retry_calls``.
"""

from __future__ import annotations

import copy
import threading
from typing import Any

from ..events import (
    CompactionFinished,
    CompactionStarted,
    ModelCallFailed,
    ModelCallFinished,
    ModelCallStarted,
    ReplStep,
    RlmStarted,
    SubcallStarted,
    ToolCall,
    TrajectoryEvent,
)

__all__ = ["TreeStats"]


def _usage_bucket() -> dict[str, Any]:
    return {
        "calls": 0,
        "failed_calls": 0,
        "retry_calls": 0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "total_tokens": 0,
        "cached_tokens": 0,
        "usage_calls": 0,
        "priced_calls": 0,
        "estimated_cost_usd": None,
    }


class TreeStats:
    """Observer: calls, tokens, cost (total, per model, per depth), depth, REPL and wall time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._totals = _usage_bucket()
        self._root_calls = self._recursive_calls = self._leaf_calls = 0
        self._iterations = self._max_depth = self._rlm_nodes = 0
        self._repl_steps = 0
        self._repl_seconds = 0.0
        self._subcalls = 0
        self._tool_calls = self._tool_errors = 0
        self._tool_seconds = 0.0
        self._compactions = self._compacted_tokens = 0
        self._compacting: dict[str, int] = {}
        self._wall = 0.0
        self._by_model: dict[str, dict[str, Any]] = {}
        self._by_depth: dict[int, dict[str, Any]] = {}

    def __call__(self, event: TrajectoryEvent) -> None:
        with self._lock:
            self._wall = max(self._wall, event.elapsed_seconds)
            if isinstance(event, ModelCallStarted):
                self._started(event)
            elif isinstance(event, (ModelCallFinished, ModelCallFailed)):
                for bucket in self._buckets(event.model, event.depth):
                    _settle(bucket, event)
            elif isinstance(event, ReplStep):
                self._repl_steps += 1
                self._repl_seconds += event.duration_seconds
            elif isinstance(event, RlmStarted):
                self._rlm_nodes += 1
                self._max_depth = max(self._max_depth, event.depth)
            elif isinstance(event, SubcallStarted):
                self._subcalls += event.count
            elif isinstance(event, CompactionStarted):
                self._compacting[event.node_id] = event.tokens_before
            elif isinstance(event, CompactionFinished):
                self._compactions += 1
                before = self._compacting.pop(event.node_id, event.tokens_after)
                self._compacted_tokens += max(0, before - event.tokens_after)
            elif isinstance(event, ToolCall):
                self._tool_calls += 1
                self._tool_errors += event.error_type is not None
                self._tool_seconds += event.duration_seconds

    def _started(self, event: ModelCallStarted) -> None:
        if event.is_leaf:
            self._leaf_calls += 1
        elif event.attempt == 1:
            self._iterations += 1
        if event.depth == 0:
            self._root_calls += 1
        else:
            self._recursive_calls += 1
        self._max_depth = max(self._max_depth, event.depth)
        for bucket in self._buckets(event.model, event.depth):
            bucket["calls"] += 1
            bucket["retry_calls"] += int(event.attempt > 1)  # an RLM-level retry (0.5 API)

    def _buckets(self, model: str, depth: int) -> tuple[dict[str, Any], ...]:
        return (
            self._totals,
            self._by_model.setdefault(model, _usage_bucket()),
            self._by_depth.setdefault(depth, _usage_bucket()),
        )

    def snapshot(self) -> dict[str, Any]:
        """A detached copy of the figures so far (safe to keep and modify)."""
        with self._lock:
            totals = self._totals
            return {
                "llm_calls": totals["calls"],
                "root_calls": self._root_calls,
                "recursive_calls": self._recursive_calls,
                "leaf_calls": self._leaf_calls,
                "failed_calls": totals["failed_calls"],
                "retry_calls": totals["retry_calls"],
                "total_iterations": self._iterations,
                "max_depth_reached": self._max_depth,
                "rlm_calls": self._rlm_nodes,
                "subcalls": self._subcalls,
                "tool_calls": self._tool_calls,
                "tool_errors": self._tool_errors,
                "tool_seconds": round(self._tool_seconds, 6),
                "compactions": self._compactions,
                "compacted_tokens": self._compacted_tokens,
                "prompt_tokens": totals["prompt_tokens"],
                "completion_tokens": totals["completion_tokens"],
                "total_tokens": totals["total_tokens"],
                "cached_tokens": totals["cached_tokens"],
                "usage_calls": totals["usage_calls"],
                "priced_calls": totals["priced_calls"],
                "estimated_cost_usd": _rounded(totals["estimated_cost_usd"]),
                "by_model": {m: _rounded_bucket(b) for m, b in sorted(self._by_model.items())},
                "by_depth": {str(d): _rounded_bucket(b) for d, b in sorted(self._by_depth.items())},
                "repl_steps": self._repl_steps,
                "repl_seconds": round(self._repl_seconds, 6),
                "wall_seconds": round(self._wall, 6),
            }


def _settle(bucket: dict[str, Any], event: ModelCallFinished | ModelCallFailed) -> None:
    bucket["retry_calls"] += event.retries
    if isinstance(event, ModelCallFailed):
        bucket["failed_calls"] += 1
        return
    if event.total_tokens is not None or event.prompt_tokens is not None:
        bucket["usage_calls"] += 1
        bucket["prompt_tokens"] += event.prompt_tokens or 0
        bucket["completion_tokens"] += event.completion_tokens or 0
        bucket["total_tokens"] += event.total_tokens or 0
        bucket["cached_tokens"] += event.cached_tokens or 0
    if event.cost_usd is not None:
        bucket["priced_calls"] += 1
        bucket["estimated_cost_usd"] = (bucket["estimated_cost_usd"] or 0.0) + event.cost_usd


def _rounded(cost: float | None) -> float | None:
    return None if cost is None else round(cost, 10)


def _rounded_bucket(bucket: dict[str, Any]) -> dict[str, Any]:
    out = copy.copy(bucket)
    out["estimated_cost_usd"] = _rounded(bucket["estimated_cost_usd"])
    return out
