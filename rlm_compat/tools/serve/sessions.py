"""Persistent RLM sessions over the endpoint: ``"rlm": {"session": "new" | ID}`` (docs/serve.md).

A session is one persistent RLM (``RLM(..., persistent=True)``, docs/sessions.md) kept by this
server process: its REPL worker holds the contexts and variables of earlier turns, so a turn sends
only what is new. Its id names the process that holds it (``sess-<process tag>-<random>``): a
router can send a turn where its session lives, and a process handed another's id refuses it as
``session_not_found`` instead of starting afresh. Sessions end on expiry (idle longer than the
limit), on ``DELETE /v1/rlm/sessions/<id>`` and at shutdown; ending one kills its worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from ..shared.tooling_errors import ToolUsageError
from .api_errors import ApiError

__all__ = ["PROCESS_TAG", "SESSION_ID", "ServedSession", "SessionLimits", "SessionStore"]

PROCESS_TAG = secrets.token_hex(4)
"""This process's part of every session id it makes (random per start: a restarted server does
not take over its predecessor's ids)."""
SESSION_ID = re.compile(r"^sess-([0-9a-f]{8})-[0-9a-f]{32}$")


@dataclass(frozen=True)
class SessionLimits:
    """``max_sessions`` open at once (429 ``session_limit`` beyond); a session idle longer than
    ``idle_seconds`` is closed; ``max_context_chars``: every context a session keeps, together
    (the turn that would pass it is a 400 ``session_context_exceeded``). What one worker may use
    is the model's REPL limits (``repl_memory_limit_mb``...), as for any run."""

    max_sessions: int = 32
    idle_seconds: float = 600.0
    max_context_chars: int = 200_000_000

    def __post_init__(self) -> None:
        for name in ("max_sessions", "max_context_chars"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ToolUsageError(f"{name} must be an integer >= 0, not {value!r}")
        if not self.idle_seconds > 0:
            raise ToolUsageError(f"idle_seconds must be > 0, not {self.idle_seconds!r}")


@dataclass
class ServedSession:
    """One open session: its persistent RLM, the model it was made for, its use so far."""

    id: str
    model: str
    rlm: Any
    last_used: float = field(default_factory=time.monotonic)
    context_chars: int = 0
    turns: int = 0
    budget: dict[str, Any] = field(default_factory=dict)
    """The run limits its first turn set (every turn's; a turn asking others is a 400)."""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class SessionStore:
    """The open sessions of this process, their limits and their ends."""

    def __init__(self, limits: SessionLimits, tag: str = PROCESS_TAG) -> None:
        self.limits, self.tag = limits, tag
        self._open: dict[str, ServedSession] = {}

    def __len__(self) -> int:
        return len(self._open)

    def create(self, model: str, rlm: Any, budget: dict[str, Any] | None = None) -> ServedSession:
        """A new session for ``rlm`` (429 ``session_limit`` when the server holds its maximum)."""
        if len(self._open) >= self.limits.max_sessions:
            raise ApiError(
                429,
                f"this server holds its maximum of {self.limits.max_sessions} sessions; end one "
                "(DELETE /v1/rlm/sessions/<id>) or retry when one expires",
                type="rate_limit_error",
                code="session_limit",
                retry=True,
                retry_after=5,
            )
        session = ServedSession(
            f"sess-{self.tag}-{secrets.token_hex(16)}", model, rlm, budget=dict(budget or {})
        )
        self._open[session.id] = session
        return session

    def find(self, session_id: str, model: str) -> ServedSession:
        """The open session ``session_id`` for ``model`` (404 ``session_not_found`` otherwise)."""
        matched = SESSION_ID.match(session_id)
        session = self._open.get(session_id)
        if session is None:
            if matched is not None and matched.group(1) != self.tag:
                why = (
                    f"it was made by another server process ({matched.group(1)}; this one is "
                    f"{self.tag}): send its turns to the process its id names"
                )
            else:
                why = "it expired, was deleted, or never existed on this server"
            raise ApiError(
                404,
                f"no session {session_id!r}: {why}",
                code="session_not_found",
                param="rlm.session",
                retry=False,
            )
        if session.model != model:
            raise ApiError(
                400,
                f"session {session_id!r} belongs to model {session.model!r}, not {model!r}",
                param="model",
                code="session_model_mismatch",
                retry=False,
            )
        return session

    @contextlib.asynccontextmanager
    async def turn(self, session: ServedSession, context_chars: int) -> AsyncIterator[None]:
        """One turn of ``session``: 429 ``session_busy`` while another runs, 400 when its contexts
        would pass the session's limit; the session's idle clock restarts when it ends."""
        if session.lock.locked():
            raise ApiError(
                429,
                f"session {session.id!r} is answering another turn: a session takes one turn at a time",
                type="rate_limit_error",
                code="session_busy",
                retry=True,
                retry_after=1,
            )
        if session.context_chars + context_chars > self.limits.max_context_chars:
            raise ApiError(
                400,
                f"session {session.id!r} keeps {session.context_chars:,} characters of context; this "
                f"turn's {context_chars:,} would pass the limit of {self.limits.max_context_chars:,}",
                param="rlm.context",
                code="session_context_exceeded",
                retry=False,
            )
        async with session.lock:
            session.turns += 1
            try:
                yield
                session.context_chars += context_chars
            finally:
                session.last_used = time.monotonic()

    async def end(self, session_id: str) -> bool:
        """Close one session (its worker killed); False if this process holds no such session."""
        session = self._open.pop(session_id, None)
        if session is None:
            return False
        await asyncio.to_thread(session.rlm.close)
        return True

    async def reap(self) -> int:
        """Close the sessions idle past the limit (not one answering a turn); how many."""
        now = time.monotonic()
        stale = [
            s.id
            for s in list(self._open.values())
            if not s.lock.locked() and now - s.last_used > self.limits.idle_seconds
        ]
        for session_id in stale:
            await self.end(session_id)
        return len(stale)

    async def reap_forever(self) -> None:
        """:meth:`reap` every quarter of the idle limit (at most every 5 s), until cancelled."""
        while True:
            await asyncio.sleep(min(self.limits.idle_seconds / 4, 5.0))
            await self.reap()

    async def end_all(self) -> None:
        for session_id in list(self._open):
            await self.end(session_id)
