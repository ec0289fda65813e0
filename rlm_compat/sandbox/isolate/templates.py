"""One copy of a big context for every worker that runs over it: context templates.

Without them each worker holds its own copy of the context: sixteen runs over a 1 GB corpus need
16 GB. A *template* is a fork server of its own, forked from the zygote (:mod:`.zygote`), that
reads one value once (a sealed memory file, as in :mod:`.mapped`) and then forks the workers of
every session whose context it is. A ``str`` never changes after it is made, so the workers share
its pages copy-on-write with the template: one copy in memory however many runs read it (a
worker's reference count touches one page of the object's header, not its text).

Each worker's namespace stays its own: the inherited value is bound to the session's variable
like one the host sent, so a run that rebinds ``context`` or builds derived data changes only its
own process. A template holds nothing but that value (it is forked from the zygote, which never
holds any context), and a value is shared only by the workers of sessions that hold the same one:
the same object, else a ``str`` (or ``bytes``) of the same type, length and contents (compared with
``==``: a ``memcmp``, no hashing of the text). Templates are the parent's: it counts the workers
forked from each (a :class:`~.spawn.WorkerHandle` holds one use until it is reaped), and a template
no worker has used for :data:`LINGER` seconds is shut down by the reaper thread. A template that
died (killed from outside, or with the zygote) takes its workers with it (their parent-death
signal); the next worker over that context gets a new template.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from . import mapped
from .zygote import ForkServerClient, ZygoteClient, ZygoteError, recv_frame, send_frame

__all__ = [
    "LINGER",
    "SHARED_MIN",
    "SharedContext",
    "Template",
    "TemplateClient",
    "Templates",
    "sharing_threshold",
]

SHARED_MIN = 1 << 24
"""A ``str`` / ``bytes`` at least this long (characters or bytes) is shared through a template;
smaller ones cross to each worker as before (a few milliseconds each)."""
LINGER = 5.0
"""Seconds a template outlives its last worker (a grid's next run over the same task, a serve
request for the same documents, a killed worker's replacement reuse it instead of re-reading)."""
_START_SECONDS = 60.0
_SECONDS_PER_GB = 60.0
_REQUEST_SECONDS = 60.0


def shareable(env: Mapping[str, Any]) -> tuple[str, str | bytes | None]:
    """The variable and value a new worker should inherit from a template: the longest ``str`` /
    ``bytes`` in ``env`` of at least :data:`SHARED_MIN` (``("", None)``: none)."""
    best: tuple[str, str | bytes | None] = ("", None)
    longest = SHARED_MIN - 1
    for key, value in env.items():
        if type(value) in (str, bytes) and len(value) > longest and isinstance(key, str):
            best, longest = (key, value), len(value)
    return best


def sharing_threshold(start_method: str | None) -> int | None:
    """The shortest context (characters or bytes) that workers of this start method share through
    a template; None: they never do (``"spawn"``, or no fork or descriptor passing here)."""
    if (start_method or "forkserver") != "forkserver" or not (mapped.available() and hasattr(os, "fork")):
        return None
    return SHARED_MIN


class TemplateClient(ForkServerClient):
    """The parent's end of one template's control socket."""

    def __init__(self, sock: socket.socket, size: int) -> None:
        super().__init__(sock)
        self.size = size

    def _ensure_ready(self) -> None:
        """The template says hello once it holds the value (it reads it first)."""
        if self.pid is not None:
            return
        self._sock.settimeout(_START_SECONDS + _SECONDS_PER_GB * self.size / 1e9)
        try:
            hello, _ = recv_frame(self._sock)
            if not isinstance(hello, dict) or hello.get("held") != self.size:
                raise ValueError(f"unexpected hello {hello!r}")
        except (EOFError, OSError, ValueError) as exc:
            self._closed = True
            raise ZygoteError(f"the context template failed to start ({exc})") from None
        self.pid = int(hello["ready"])
        self._sock.settimeout(_REQUEST_SECONDS)

    def close(self) -> None:
        """Shut the template down (it kills any worker it still has); idempotent."""
        with self._lock:
            if not self._closed:
                self._closed = True
                try:
                    self._sock.settimeout(10.0)
                    send_frame(self._sock, {"op": "shutdown"})
                    recv_frame(self._sock)
                except (EOFError, OSError, ValueError):
                    pass
            self._sock.close()


class Template:
    """One template: the value it holds (the parent's object), its client, its workers."""

    __slots__ = ("client", "idle_since", "users", "value")

    def __init__(self, value: str | bytes, client: TemplateClient) -> None:
        self.value = value
        self.client = client
        self.users = 0
        self.idle_since: float | None = None

    def holds(self, value: str | bytes) -> bool:
        """Whether ``value`` is this template's value: the same object, or equal contents."""
        held = self.value
        return held is value or (type(held) is type(value) and len(held) == len(value) and held == value)


class Templates:
    """The templates of this process, by value; thread-safe."""

    def __init__(self, wake: Callable[[], None]) -> None:
        self._lock = threading.Lock()
        self._templates: list[Template] = []
        self._wake = wake

    def __len__(self) -> int:
        with self._lock:
            return len(self._templates)

    def acquire(self, value: str | bytes, zygote: ZygoteClient) -> Template | None:
        """A template holding ``value`` (an existing one, else a new one), with one more use;
        None when none can be had (no memory file, the zygote refused)."""
        with self._lock:
            self._templates = [t for t in self._templates if not t.client.closed]
            for template in self._templates:
                if template.holds(value):
                    template.users += 1
                    template.idle_since = None
                    return template
            started = self._start(value, zygote)
            if started is not None:
                started.users = 1
                self._templates.append(started)
            return started

    @staticmethod
    def _start(value: str | bytes, zygote: ZygoteClient) -> Template | None:
        try:
            fd, kind, size = mapped.write(value)
        except OSError:
            return None
        ours, theirs = socket.socketpair()
        try:
            zygote.request({"op": "template", "kind": kind, "size": size}, (theirs.fileno(), fd))
        except ZygoteError:
            ours.close()
            return None
        finally:
            theirs.close()
            mapped.close_all([fd])
        return Template(value, TemplateClient(ours, size))

    def release(self, template: Template) -> None:
        """One use fewer (a worker was reaped); an unused template is shut down after LINGER."""
        with self._lock:
            template.users -= 1
            if template.users > 0:
                return
            template.idle_since = time.monotonic()
        self._wake()

    def discard(self, template: Template) -> None:
        """Forget a template that failed (its client is closed; its users are released anyway)."""
        template.client.close()

    def wait_time(self) -> float | None:
        """Seconds until the next idle template is due to be shut down (None: none is idle)."""
        with self._lock:
            idle = [t.idle_since for t in self._templates if t.idle_since is not None]
        if not idle:
            return None
        return max(0.0, min(idle) + LINGER - time.monotonic()) + 0.05

    def sweep(self, *, everything: bool = False) -> None:
        """Shut down the templates idle for LINGER seconds (``everything``: all of them)."""
        now = time.monotonic()
        with self._lock:
            due = [
                t
                for t in self._templates
                if everything
                or t.client.closed
                or (t.idle_since is not None and now - t.idle_since >= LINGER)
            ]
            self._templates = [t for t in self._templates if t not in due]
        for template in due:
            template.client.close()

    def pids(self) -> list[int]:
        """The process ids of the running templates (for accounting and tests)."""
        return [entry.pid for entry in self.describe()]

    def describe(self) -> list[SharedContext]:
        """The running templates: process, size of the value held, workers using it."""
        with self._lock:
            return [
                SharedContext(t.client.pid, t.client.size, t.users)
                for t in self._templates
                if t.client.pid is not None and not t.client.closed
            ]


@dataclasses.dataclass(frozen=True)
class SharedContext:
    """One context held by a template (see :func:`~.spawn.shared_contexts`)."""

    pid: int
    """The template's process: its memory is the shared copy (count its PSS once)."""
    size: int
    """Bytes of the value as it crossed (UTF-8; one byte per character for ASCII text)."""
    workers: int
    """Workers forked from it and not yet reaped (0: idle, shut down after :data:`LINGER`)."""
