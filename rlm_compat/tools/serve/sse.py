"""Server-sent-event frames of a streamed run: data chunks and progress comments."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from ...events import TrajectoryEvent

__all__ = ["comment", "dumps", "progress_line", "send"]


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, default=repr)


async def send(response: web.StreamResponse, body: dict[str, Any]) -> None:
    await response.write(f"data: {dumps(body)}\n\n".encode())


async def comment(response: web.StreamResponse, text: str) -> None:
    await response.write(f": {text}\n\n".encode())


def progress_line(event: TrajectoryEvent) -> str:
    """One progress comment: the event's envelope and its small figures, never its texts."""
    data = event.data
    shown = {k: data[k] for k in ("error",) if isinstance(data.get(k), bool)} | {
        k: data[k]
        for k in (
            "iteration",
            "error",
            "function",
            "count",
            "total_tokens",
            "is_leaf",
            "attempt",
            "error_type",
        )
        if k in data
    }
    envelope = {
        "sequence": event.sequence,
        "kind": event.kind,
        "depth": event.depth,
        "node_id": event.node_id,
        "elapsed_seconds": event.elapsed_seconds,
    }
    return "rlm-progress " + json.dumps({**envelope, **shown}, default=repr)
