"""What a finished run hands back: its answer (or error), tree-wide stats, trajectory and config.

Same names and shapes as recursive-llm 0.5.0's ``rlm.CompletionResult`` /
``rlm.FailedCompletionResult`` (``answer``, ``stats``, ``trajectory``, ``config``, ``succeeded``,
``to_dict()``, ``write_jsonl()``), so code written against either reads both. Under the alias this
module is ``rlm.results`` (with ``TrajectoryEvent``, as 0.5.0's has it).
"""

from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..events import TrajectoryEvent

__all__ = [
    "RESULT_SCHEMA_VERSION",
    "CompletionResult",
    "FailedCompletionResult",
    "RunResult",
    "TrajectoryEvent",
]

RESULT_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class CompletionResult:
    """A run that produced an answer."""

    answer: str
    stats: dict[str, Any]
    trajectory: tuple[TrajectoryEvent, ...]
    config: dict[str, Any] = field(default_factory=dict)
    trajectory_path: str | None = None
    session_turn: int | None = None
    """Which call of a persistent RLM's session this was (1, 2, ...; None: not persistent)."""

    @property
    def succeeded(self) -> bool:
        """True: this run answered."""
        return True

    def to_dict(self, *, redact: bool = False) -> dict[str, Any]:
        """A detached JSON-ready form (one record of :meth:`write_jsonl`)."""
        return {
            "schema_version": RESULT_SCHEMA_VERSION,
            "termination_reason": "completed",
            "answer": self.answer,
            "stats": copy.deepcopy(self.stats),
            "config": copy.deepcopy(self.config),
            "trajectory": [e.to_dict(redact=redact) for e in self.trajectory],
            **_turn(self.session_turn),
        }

    def write_jsonl(self, path: str | os.PathLike[str], *, append: bool = True) -> None:
        """Append (or write) this result as one JSON line."""
        _write_line(self.to_dict(), path, append)


@dataclass(frozen=True)
class FailedCompletionResult:
    """A run that ended with an exception: its type and message, and everything up to it."""

    error_type: str
    error: str
    stats: dict[str, Any]
    trajectory: tuple[TrajectoryEvent, ...]
    config: dict[str, Any] = field(default_factory=dict)
    trajectory_path: str | None = None
    session_turn: int | None = None
    """Which call of a persistent RLM's session this was (1, 2, ...; None: not persistent)."""
    answer: None = field(default=None, init=False)

    @property
    def succeeded(self) -> bool:
        """False: this run raised."""
        return False

    def to_dict(self, *, redact: bool = False) -> dict[str, Any]:
        """A detached JSON-ready form (one record of :meth:`write_jsonl`)."""
        return {
            "schema_version": RESULT_SCHEMA_VERSION,
            "termination_reason": "failed",
            "answer": None,
            "error": {"type": self.error_type, "message": self.error},
            "stats": copy.deepcopy(self.stats),
            "config": copy.deepcopy(self.config),
            "trajectory": [e.to_dict(redact=redact) for e in self.trajectory],
            **_turn(self.session_turn),
        }

    def write_jsonl(self, path: str | os.PathLike[str], *, append: bool = True) -> None:
        """Append (or write) this result as one JSON line."""
        _write_line(self.to_dict(), path, append)


RunResult = CompletionResult | FailedCompletionResult


def _turn(number: int | None) -> dict[str, Any]:
    """``session_turn`` in the record of a persistent session's call (0.5.0's shape otherwise)."""
    return {} if number is None else {"session_turn": number}


def _write_line(record: dict[str, Any], path: str | os.PathLike[str], append: bool) -> None:
    line = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=repr)
    with Path(path).open("a" if append else "w", encoding="utf-8", newline="\n") as stream:
        stream.write(line + "\n")
