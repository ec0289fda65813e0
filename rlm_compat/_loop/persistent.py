"""A persistent RLM's session: one REPL its root keeps across ``complete()`` calls.

``RLM(..., persistent=True)`` (rlms' keyword): each call's context is kept as ``context_0``,
``context_1``, ... (``context`` is the newest), each finished call as ``history_0``, ... (a dict:
``query``, ``answer``, ``error``, and ``steps``, each ``{"code", "output", "error"}``), and every
variable the model made stays. The REPL is the root node's, in its worker (or inline); the
session's ``env`` is the host's side of it, as in any node, so a kept context never crosses the
boundary again (the worker holds it, and a text bound to a second name crosses once). Child RLMs
are not persistent: each sub-call starts from nothing, as before.

One call at a time: a second call while one runs is :class:`~rlm_compat.errors.SessionBusyError`,
never interleaved state. :meth:`PersistentSession.close` ends the session (its worker with it); a
later call starts a new one.
"""

from __future__ import annotations

import threading
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ..custom_tools import plain_size
from ..errors import SessionBusyError
from ..record.budget import RunBudget
from ..repl import REPLExecutor
from ..sandbox import HostCall

__all__ = ["PersistentSession", "Turn"]


class Turn:
    """One call of a persistent session: its number, and the session's REPL and namespace."""

    def __init__(self, session: PersistentSession, number: int) -> None:
        self.session, self.number = session, number

    @property
    def env(self) -> dict[str, Any]:
        return self.session.env

    def repl(self, make: Callable[[], REPLExecutor]) -> REPLExecutor:
        """The session's REPL (made with ``make`` on the first call)."""
        if self.session.repl is None:
            self.session.repl = make()
        return self.session.repl

    def session_budget(self, start: Callable[[], RunBudget]) -> RunBudget:
        """The session's budget: its totals, and limits if it has some (started by ``start``
        with the session's first call)."""
        if self.session.budget is None:
            self.session.budget = start()
        return self.session.budget

    def take_context(self, context: Any) -> Any:
        """This call's ``context``: the one given, kept as the next ``context_N``; a call given
        none (``""``) works on the newest kept one and adds nothing."""
        session = self.session
        if not _size(context) and session.context_sizes:
            return session.env.get(f"context_{len(session.context_sizes) - 1}", context)
        session.env[f"context_{len(session.context_sizes)}"] = context
        session.context_sizes.append(_size(context))
        return context

    def add_history(
        self, query: str, answer: str | None, error: str | None, steps: list[dict[str, Any]]
    ) -> None:
        """Keep this call's exchange as the next ``history_N`` (plain data)."""
        session = self.session
        exchange = {"query": query, "answer": answer, "error": error, "steps": steps}
        session.env[f"history_{session.histories}"] = exchange
        session.histories += 1

    def discard_repl(self) -> None:
        """After a cancelled call (its worker killed mid-step): the next call starts a new REPL;
        what lived only in the old worker is dropped from the namespace and named to the model."""
        session = self.session
        repl, session.repl = session.repl, None
        if repl is not None:
            threading.Thread(target=repl.close, name="rlm-session-close", daemon=True).start()
        for name, value in list(session.env.items()):
            try:
                plain_size(value)
            except TypeError:
                del session.env[name]
                if not isinstance(value, HostCall) and not isinstance(value, types.ModuleType):
                    session.lost.append(name)

    def note(self) -> str:
        """What the model is told of the session, after its query."""
        session = self.session
        contexts = ", ".join(f"context_{i} ({n:,} chars)" for i, n in enumerate(session.context_sizes))
        newest = len(session.context_sizes) - 1
        text = (
            f"\n\n[Persistent REPL session, call {self.number}. Contexts: {contexts}; `context` is "
            f"context_{newest}."
        )
        if session.histories:
            names = ", ".join(f"history_{i}" for i in range(session.histories))
            text += (
                f" Earlier calls: {names} (each a dict: query, answer, error, steps of code and output)."
                " Variables from earlier calls are still defined."
            )
        if session.lost:
            lost = ", ".join(sorted(set(session.lost)))
            text += f" A cancelled call lost what lived only in its REPL worker: {lost}."
            session.lost = []
        return text + "]"


class PersistentSession:
    """The REPL and namespace a persistent RLM's root keeps, and how many calls it has served."""

    def __init__(self) -> None:
        self.repl: REPLExecutor | None = None
        self.env: dict[str, Any] = {}
        self.context_sizes: list[int] = []
        self.histories = 0
        self.calls = 0
        self.lost: list[str] = []
        self.budget: RunBudget | None = None
        """The session's totals over all its calls, and its ``session_budget`` limits if given."""
        self._busy = threading.Lock()
        self._closing = False

    @contextmanager
    def turn(self) -> Iterator[Turn]:
        """The next call of the session (SessionBusyError while another one runs)."""
        if not self._busy.acquire(blocking=False):
            raise SessionBusyError(
                "this persistent RLM is already answering a call: a persistent session takes one call "
                "at a time (await the first one, or use another RLM for concurrent work)"
            )
        try:
            self.calls += 1
            yield Turn(self, self.calls)
        finally:
            self._busy.release()
            if self._closing:
                self.close()

    def close(self) -> None:
        """End the session: its REPL (and worker) closed, its namespace dropped.

        During a call, the call's worker is killed now (its step fails, and the call ends as the
        model's next reply or its limits decide) and the rest is done when the call returns.
        """
        if not self._busy.acquire(blocking=False):
            self._closing = True
            if self.repl is not None:
                self.repl.abort()
            return
        try:
            self._close()
        finally:
            self._busy.release()

    def _close(self) -> None:
        self._closing = False
        repl, self.repl = self.repl, None
        self.env = {}
        self.context_sizes = []
        self.histories = self.calls = 0
        self.budget = None
        if repl is not None:
            repl.close()


def _size(context: Any) -> int:
    try:
        return len(context)
    except TypeError:
        return 0
