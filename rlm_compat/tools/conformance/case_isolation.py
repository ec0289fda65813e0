"""Where a conformance case runs: a forked child (script mode) or a helper thread (in process).

Part of the driver (``driver.py``), so it also runs as a by-path module under another
implementation's interpreter: the standard library only. REPL and loop cases each run in a forked
child with its own process group, so every case starts from a fresh executor and module state,
and a case that hangs (upstream never enforces its timeout) is killed after ``step_limit`` seconds
without an event and recorded as ``{"hang": true}``. In process, a case runs in a helper thread
under a generous deadline: rlm_compat enforces its own timeouts, so a missed deadline is a failure,
not a recorded hang.
"""

from __future__ import annotations

import json
import os
import resource
import select
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

__all__ = ["Emit", "Event", "assemble_loop", "assemble_repl", "run_forked", "run_inline"]

Event = dict[str, Any]
Emit = Callable[[Event], None]
_MEMORY_HEADROOM = 2 << 30  # bytes of address space a case may add to the driver's own


class _Reply:
    """Where the model-facing fake (loop cases) and step results go: JSON lines on a pipe."""

    def __init__(self, fd: int) -> None:
        self._file = os.fdopen(fd, "w", encoding="utf-8")
        self._lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        line = json.dumps(event, ensure_ascii=False, allow_nan=False)
        with self._lock:
            self._file.write(line + "\n")
            self._file.flush()


def _limit_memory() -> None:
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            pages = int(f.read().split()[0])
        limit = pages * os.sysconf("SC_PAGE_SIZE") + _MEMORY_HEADROOM
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (OSError, ValueError):
        pass


def run_forked(
    target: Callable[[Emit], None], step_limit: float, case_limit: float
) -> tuple[list[Event], str | None]:
    """Run ``target`` in a fresh child process; its events, and ``"hang"`` or a crash text."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        code = 0
        try:
            os.close(read_fd)
            os.setpgid(0, 0)
            _limit_memory()
            target(_Reply(write_fd))
        except BaseException:
            traceback.print_exc()
            code = 70
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
    os.close(write_fd)
    events: list[Event] = []
    failure: str | None = None
    buffer = b""
    start = time.monotonic()
    last_event = start
    with os.fdopen(read_fd, "rb", buffering=0) as pipe:
        while True:
            now = time.monotonic()
            wait = min(last_event + step_limit, start + case_limit) - now
            if wait <= 0:
                failure = "hang"
                break
            ready, _, _ = select.select([pipe], [], [], wait)
            if not ready:
                continue
            chunk = pipe.read(65536)
            if not chunk:
                break
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                events.append(json.loads(line))
                last_event = time.monotonic()
    if failure == "hang":
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    _, status = os.waitpid(pid, 0)
    if failure is None and status != 0:
        if os.WIFSIGNALED(status):
            failure = f"killed by signal {os.WTERMSIG(status)}"
        else:
            failure = f"exited with status {os.WEXITSTATUS(status)}"
    if failure is not None and failure != "hang":
        try:
            os.killpg(pid, signal.SIGKILL)  # stray grandchildren (worker processes)
        except (ProcessLookupError, PermissionError):
            pass
    return events, failure


def run_inline(target: Callable[[Emit], None], limit: float) -> tuple[list[Event], str | None]:
    """Run ``target`` in a helper thread of this process; its events, and a failure text or None.

    For implementations that enforce their own timeouts (rlm_compat in process): a case still
    running after ``limit`` seconds is a bug, reported as a failure; the thread is left behind
    (a daemon) rather than wedging the whole run.
    """
    events: list[Event] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            target(events.append)
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=work, name="conformance-case", daemon=True)
    worker.start()
    worker.join(limit)
    if worker.is_alive():
        return list(events), f"did not finish within {limit:.0f}s (timeout not enforced?)"
    if errors:
        return events, f"backend raised {type(errors[0]).__name__}: {errors[0]}"
    return events, None


def assemble_repl(events: list[Event], failure: str | None) -> Event:
    steps = [e["step"] for e in events if "step" in e]
    if failure == "hang":
        return {"steps": [*steps, {"hang": True}]}
    if failure is not None:
        return {"failure": failure, "steps": steps}
    return {"steps": steps}


def assemble_loop(events: list[Event], failure: str | None) -> Event:
    calls = [e["call"] for e in events if "call" in e]
    ends = [e["end"] for e in events if "end" in e]
    if failure == "hang":
        return {"calls": calls, "hang": True}
    if failure is not None or not ends:
        return {"failure": failure or "no result", "calls": calls}
    return {"calls": calls, **ends[0]}
