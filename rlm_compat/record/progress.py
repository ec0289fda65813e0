"""A human-readable line per step of a run, as it happens (for terminals and logs).

One line for each model call that ends or fails, each retry, each REPL step, each sub-call batch
and the run's end, indented by depth so the tree shows:

    [  0.84s] rlm-1 call-2  gpt-4o-mini  612+41 tok  $0.000116  0.81s
    [  0.90s] rlm-1 step 1  ok  4.1 ms  (inline)
    [  1.35s]   llm_query_batched x8  0 errors  0.44s
"""

from __future__ import annotations

import sys
import threading
from typing import TextIO

from ..events import (
    ModelCallFailed,
    ModelCallFinished,
    ModelRetry,
    ReplStep,
    RunFailed,
    RunFinished,
    SubcallFinished,
    TrajectoryEvent,
)

__all__ = ["ProgressPrinter", "format_event"]


class ProgressPrinter:
    """Observer writing progress lines to ``stream`` (default: standard error)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def __call__(self, event: TrajectoryEvent) -> None:
        line = format_event(event)
        if line is None:
            return
        stream = self._stream if self._stream is not None else sys.stderr
        with self._lock:
            stream.write(f"[{event.elapsed_seconds:7.2f}s] {'  ' * event.depth}{line}\n")
            stream.flush()


def format_event(event: TrajectoryEvent) -> str | None:
    """The progress line of ``event`` without time or indent (None: the event gets no line)."""
    call = f"{event.parent_id} {event.node_id}"
    if isinstance(event, ModelCallFinished):
        tokens = (
            "" if event.total_tokens is None else f"  {event.prompt_tokens}+{event.completion_tokens} tok"
        )
        cost = "" if event.cost_usd is None else f"  ${event.cost_usd:.6f}"
        retries = f"  {event.retries} retries" if event.retries else ""
        return f"{call}  {event.model}{tokens}{cost}  {event.latency_seconds:.2f}s{retries}"
    if isinstance(event, ModelCallFailed):
        return f"{call}  {event.model}  FAILED {event.error_type}: {event.error[:200]}"
    if isinstance(event, ModelRetry):
        return f"{call}  retry {event.attempt} in {event.delay_seconds:.2f}s"
    if isinstance(event, ReplStep):
        status = "error" if event.error else "ok"
        took = f"{event.duration_seconds * 1000:.1f} ms"
        return f"{event.node_id} step {event.iteration}  {status}  {took}  ({event.runner})"
    if isinstance(event, SubcallFinished):
        took = f"{event.duration_seconds:.2f}s"
        return f"{event.node_id} {event.function} x{event.count}  {event.errors} errors  {took}"
    if isinstance(event, RunFinished):
        price = event.stats.get("estimated_cost_usd")
        priced = "" if price is None else f", ${price:.6f}"
        return f"done: {event.stats['llm_calls']} calls, {event.stats['total_tokens']} tokens{priced}"
    if isinstance(event, RunFailed):
        return f"failed: {event.error_type}: {event.error[:200]}"
    return None
