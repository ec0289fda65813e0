"""Per-thread record of the execution in progress, and the session each piece of code belongs to.

Guards that must reach "the current execution" (``print``, the deadline tick, host calls, the
session's ``random``) look it up here instead of in process-wide state, so executors running in
many threads at once never see each other's output or deadlines.

The thread alone does not say whose code is running: a generator of one executor may be
finalized by the garbage collector during another executor's step, in that step's thread, and
the host may hand one executor's function to another. So every executor has a :class:`Session`;
its compiled code reaches its guards through its own builtins layer (see
:func:`.policy.session_builtins`), whose guards are bound to that session and act only while a
step of the same session is running (:func:`own_state`).
"""

from __future__ import annotations

import random
import threading
from typing import Any

__all__ = ["LOCAL", "ExecState", "Session", "own_state"]


class Session:
    """The identity of one executor's sandboxed code, and the state only that code may touch."""

    __slots__ = ("random",)

    def __init__(self, rng: random.Random | None = None) -> None:
        self.random = rng if rng is not None else random.Random()

    def __repr__(self) -> str:
        return f"<sandbox session {id(self):#x}>"


class ExecState:
    """What one running ``execute`` call shares with the guards it installed.

    ``sink`` is the step's :class:`.output.CappedText` and ``deadline`` its
    :class:`.deadline.Deadline` or None (typed loosely: this module sits below both).
    """

    __slots__ = ("answer_chars", "deadline", "env", "limit", "session", "sink")

    def __init__(
        self,
        sink: Any,
        limit: int,
        env: dict[str, Any],
        session: Session,
        deadline: Any,
        answer_chars: int | None = None,
    ) -> None:
        self.sink = sink
        self.limit = limit
        self.env = env
        self.session = session
        self.deadline = deadline
        self.answer_chars = answer_chars


class _Local(threading.local):
    state: ExecState | None = None


LOCAL = _Local()
"""``LOCAL.state`` is the innermost execution running in this thread, or None."""


def own_state(session: Session) -> ExecState | None:
    """The execution running in this thread if it is one of ``session``'s steps, else None."""
    state = LOCAL.state
    if state is not None and state.session is session:
        return state
    return None
