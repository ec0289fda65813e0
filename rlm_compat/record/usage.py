"""A hand-fed usage tally for model calls made outside an RLM run (0.5.0's ``rlm.stats``).

recursive-llm 0.5.0 exposes its stats accumulator as ``rlm.stats.UsageTracker``, and scripts
written for it (its benchmarks' direct-call baselines) count their own ``litellm`` calls with it,
so a baseline and an RLM run report the same keys. Inside a run rlm_compat folds events instead
(:class:`~rlm_compat.record.stats.TreeStats`); this tracker is for calls no run sees, fed by hand:
:meth:`UsageTracker.record_call` when a call starts, :meth:`UsageTracker.record_response` with
the provider's response. The drop-in alias maps ``rlm.stats`` here.
"""

from __future__ import annotations

import copy
import threading
from typing import Any

__all__ = ["UsageTracker"]

_TOKEN_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens", "cached_tokens")


def _field(obj: Any, name: str) -> Any:
    """``obj[name]`` for a mapping, ``obj.name`` otherwise (providers return either)."""
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def _tokens(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _bucket() -> dict[str, Any]:
    return {
        "calls": 0,
        "retry_calls": 0,
        **dict.fromkeys(_TOKEN_KEYS, 0),
        "usage_calls": 0,
        "priced_calls": 0,
        "estimated_cost_usd": None,
    }


class UsageTracker:
    """Thread-safe totals (and per-model figures) of hand-recorded model calls."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._totals = _bucket()
        self._by_model: dict[str, dict[str, Any]] = {}
        self._root = self._recursive = self._leaf = self._iterations = self._max_depth = 0

    def record_iteration(self) -> None:
        """One loop iteration (at any depth)."""
        with self._lock:
            self._iterations += 1

    def record_call(self, model: str, depth: int, *, is_leaf: bool = False, is_retry: bool = False) -> None:
        """A model call being attempted at ``depth`` (0: the root)."""
        with self._lock:
            if depth == 0:
                self._root += 1
            else:
                self._recursive += 1
            self._leaf += int(is_leaf)
            self._max_depth = max(self._max_depth, depth)
            for bucket in (self._totals, self._by_model.setdefault(model, _bucket())):
                bucket["calls"] += 1
                bucket["retry_calls"] += int(is_retry)

    def record_response(self, model: str, response: Any, estimated_cost_usd: float | None) -> None:
        """A call's response: its ``usage`` (object or mapping) and litellm's cost estimate."""
        usage = _field(response, "usage")
        figures = {key: _tokens(_field(usage, key)) for key in _TOKEN_KEYS[:3]}
        cached = _tokens(_field(_field(usage, "prompt_tokens_details"), "cached_tokens"))
        figures["cached_tokens"] = cached or _tokens(_field(usage, "cache_read_input_tokens"))
        with self._lock:
            for bucket in (self._totals, self._by_model.setdefault(model, _bucket())):
                if usage is not None:
                    bucket["usage_calls"] += 1
                    for key, value in figures.items():
                        bucket[key] += value
                if estimated_cost_usd is not None:
                    bucket["priced_calls"] += 1
                    bucket["estimated_cost_usd"] = (bucket["estimated_cost_usd"] or 0.0) + estimated_cost_usd

    def snapshot(self) -> dict[str, Any]:
        """A detached copy of the figures, with recursive-llm 0.5.0's ``stats`` keys."""
        with self._lock:
            by_model = copy.deepcopy(self._by_model)
            for bucket in (*by_model.values(), totals := dict(self._totals)):
                if bucket["estimated_cost_usd"] is not None:
                    bucket["estimated_cost_usd"] = round(bucket["estimated_cost_usd"], 10)
            return {
                "llm_calls": totals["calls"],
                "root_calls": self._root,
                "recursive_calls": self._recursive,
                "leaf_calls": self._leaf,
                "retry_calls": totals["retry_calls"],
                "total_iterations": self._iterations,
                "max_depth_reached": self._max_depth,
                **{key: totals[key] for key in _TOKEN_KEYS},
                "usage_calls": totals["usage_calls"],
                "priced_calls": totals["priced_calls"],
                "estimated_cost_usd": totals["estimated_cost_usd"],
                "by_model": by_model,
            }
