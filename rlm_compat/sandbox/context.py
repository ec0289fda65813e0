"""Per-thread record of the execution in progress.

Guards that must reach "the current execution" (``print``, the deadline tick, host calls, the
session's ``random``) look it up here instead of in process-wide state, so executors running in
many threads at once never see each other's output or deadlines.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import random

    from .deadline import Deadline
    from .output import CappedText

__all__ = ["LOCAL", "ExecState"]


class ExecState:
    """What one running ``execute`` call shares with the guards it installed."""

    __slots__ = ("answer_chars", "deadline", "env", "limit", "random", "sink")

    def __init__(
        self,
        sink: CappedText,
        limit: int,
        env: dict[str, Any],
        rng: random.Random,
        deadline: Deadline | None,
        answer_chars: int | None = None,
    ) -> None:
        self.sink = sink
        self.limit = limit
        self.env = env
        self.random = rng
        self.deadline = deadline
        self.answer_chars = answer_chars


class _Local(threading.local):
    state: ExecState | None = None


LOCAL = _Local()
"""``LOCAL.state`` is the innermost execution running in this thread, or None."""
