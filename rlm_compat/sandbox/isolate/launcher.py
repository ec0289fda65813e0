"""Start worker-related processes from one long-lived thread.

Linux's parent-death signal (``PR_SET_PDEATHSIG``, which the fork server and "spawn" workers set)
fires when the *thread* that started the child ends, not the process. A worker started from a
short-lived request thread would be killed when that thread returns; started from this one
daemon thread, it is killed exactly when the parent process dies.
"""

from __future__ import annotations

import os
import queue
import subprocess
import threading
from collections.abc import Sequence

from ...environments import ExecutionEnvironment

__all__ = ["Launch", "start_process", "submit"]


class Launch:
    """One pending start; :meth:`result` waits for the Popen (or re-raises its error)."""

    def __init__(
        self,
        environment: ExecutionEnvironment,
        argv: Sequence[str],
        pass_fds: Sequence[int],
        cwd: str | None,
    ) -> None:
        self.environment = environment
        self.argv = list(argv)
        self.pass_fds = tuple(pass_fds)
        self.cwd = cwd
        self._done = threading.Event()
        self._process: subprocess.Popen[bytes] | None = None
        self._error: BaseException | None = None

    def run(self) -> None:
        try:
            self._process = self.environment.start_process(self.argv, pass_fds=self.pass_fds, cwd=self.cwd)
        except BaseException as exc:
            self._error = exc
        finally:
            self._done.set()

    def done(self) -> bool:
        return self._done.is_set()

    def result(self) -> subprocess.Popen[bytes]:
        self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._process is not None
        return self._process


_jobs: queue.SimpleQueue[Launch] = queue.SimpleQueue()
_thread: threading.Thread | None = None
_thread_lock = threading.Lock()


def _loop(jobs: queue.SimpleQueue[Launch]) -> None:
    while True:
        jobs.get().run()


def submit(
    environment: ExecutionEnvironment,
    argv: Sequence[str],
    *,
    pass_fds: Sequence[int] = (),
    cwd: str | None = None,
) -> Launch:
    """Queue a start on the launcher thread; returns at once."""
    global _thread
    job = Launch(environment, argv, pass_fds, cwd)
    with _thread_lock:
        if _thread is None:
            _thread = threading.Thread(target=_loop, args=(_jobs,), name="rlm-compat-launcher", daemon=True)
            _thread.start()
        _jobs.put(job)
    return job


def start_process(
    environment: ExecutionEnvironment,
    argv: Sequence[str],
    *,
    pass_fds: Sequence[int] = (),
    cwd: str | None = None,
) -> subprocess.Popen[bytes]:
    """Start a process on the launcher thread and wait until it is started."""
    return submit(environment, argv, pass_fds=pass_fds, cwd=cwd).result()


def _forget_after_fork() -> None:
    """A forked child has no launcher thread (threads do not survive fork)."""
    global _thread, _jobs, _thread_lock
    _thread = None
    _jobs = queue.SimpleQueue()
    _thread_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)
