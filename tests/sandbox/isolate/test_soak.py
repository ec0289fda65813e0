"""Soak: 20 sessions, 1,000 steps, 100 worker kills, and nothing left behind afterwards.

Half the kills are timeouts of a single long C call (the parent kills the worker), half are an
outside SIGKILL between steps (the next step finds the worker gone). Every session checks its own
state as it goes: plain data survives each kill, the function defined before it is named lost,
the 1 MB context (a memory file, see rlm_compat/sandbox/isolate/mapped.py) reaches every new worker.
Afterwards, with the executors closed (half explicitly, half by being dropped and reaped at the
next start, as documented for dropped workers): no worker process of ours is left under the fork
server, the parent holds no more descriptors, the private temporary
root holds no more worker directories, and the parent's memory is back where it was.

Two sessions run at a time: on a 2-core machine that keeps one core for the trivial steps while
the other burns on a doomed ``sum``, so no ordinary step comes near its 0.3 s timeout.
"""

from __future__ import annotations

import concurrent.futures
import functools
import gc
import os
import re
import signal
import threading
import time
from typing import Any

import pytest
from process_probe import open_fds, rss_mb

from rlm_compat.config import ISOLATION_ENV, START_METHOD_ENV
from rlm_compat.errors import REPLError, REPLTimeoutError
from rlm_compat.repl import REPLExecutor
from rlm_compat.sandbox.isolate import spawn

SESSIONS = 20
STEPS_PER_SESSION = 50
KILL_AT = (7, 16, 25, 34, 43)
RACE_AT = 25
"""Where an outside kill is not waited for: the next step may find the worker alive and die with it."""
TIMEOUT = 0.3
PARALLEL = 2
RSS_SLACK_MB = 20
"""The parent keeps nothing per step; what 1,000 steps may still leave is allocator slack (freed
pymalloc arenas and malloc'd pickle buffers not handed back to the OS), a few MB at most. A leak
of one pickled message or output per step would be tens of MB."""
FD_SLACK = 3

STEP = "def keep():\n    return n\nn += 1\nlog.append(n)\nsize = len(context)\nprint(keep())"
CONTEXT = "c" * (1 << 20)
"""Big enough to cross as a memory file: sent again to every replacement worker."""
LOST = re.compile(r"no longer defined: keep\b")


@pytest.fixture(autouse=True)
def default_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (ISOLATION_ENV, START_METHOD_ENV, "RLM_COMPAT_PROFILE"):
        monkeypatch.delenv(name, raising=False)


def _children(parent: int) -> set[int]:
    """Processes (zombies included) whose parent is ``parent``."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        if int(stat.rpartition(")")[2].split()[1]) == parent:
            found.add(int(entry))
    return found


def _wait_for(condition: Any, seconds: float = 20.0) -> bool:
    """Poll ``condition``; a generous limit, not a timing assertion."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _dead(handle: Any) -> bool:
    return not handle.alive()


def _session(index: int, *, close: bool) -> tuple[int, int]:
    """One session's 50 steps with 5 kills; returns (steps, kills)."""
    ex = REPLExecutor(timeout=TIMEOUT)
    env: dict[str, Any] = {"context": CONTEXT}
    assert ex.execute("n = 0\nlog = []", env) == "Code executed successfully (no output)"
    steps, kills, n = 1, 0, 0
    for position in range(1, STEPS_PER_SESSION):
        steps += 1
        if position in KILL_AT and (index + position) % 2 == 0:
            with pytest.raises(REPLTimeoutError) as info:
                ex.execute("sum(range(10 ** 12))", env)
            assert LOST.search(str(info.value)), str(info.value)
            assert "keep" not in env and env["n"] == n
            kills += 1
            continue
        notice = position in KILL_AT
        if notice:
            handle = ex._runner._worker[0]  # type: ignore[attr-defined]
            os.kill(handle.pid, signal.SIGKILL)
            kills += 1
            if position == RACE_AT:
                try:  # the kill may land before or after the step's liveness check: both read clean
                    out = ex.execute(STEP, env)
                except REPLError as exc:
                    assert "the REPL worker process died" in str(exc) and LOST.search(str(exc)), str(exc)
                    assert "keep" not in env and env["n"] == n
                    continue
            else:
                assert _wait_for(functools.partial(_dead, handle))
                out = ex.execute(STEP, env)
        else:
            out = ex.execute(STEP, env)
        n += 1
        lines = out.splitlines()
        assert lines[-1] == str(n), out
        assert bool(LOST.search(out)) == notice and ("had stopped" in out) == notice, out
        assert env["n"] == n and env["log"] == list(range(1, n + 1)) and env["size"] == len(CONTEXT)
    if close:
        ex.close()
    return steps, kills


# once_per_ci: the leak checks count this host's processes, files and descriptors, not Python's
@pytest.mark.once_per_ci
def test_soak_leaves_nothing_behind() -> None:
    _session(1, close=True)  # warm-up: every code path imported, the fork server up
    gc.collect()
    zygote = spawn._state.zygote
    root = spawn._state.root
    assert zygote is not None and zygote.pid is not None and root is not None
    server = zygote.pid
    before_children = _children(server)
    before_dirs = set(os.listdir(root))
    before_fds = open_fds()
    before_threads = {t.ident for t in threading.enumerate()}
    before_rss = rss_mb()

    with concurrent.futures.ThreadPoolExecutor(PARALLEL, thread_name_prefix="soak") as pool:
        futures = [pool.submit(_session, i, close=i % 2 == 0) for i in range(SESSIONS)]
        totals = [f.result() for f in futures]
    del futures
    gc.collect()
    with REPLExecutor() as ex:  # a dropped executor's worker is reaped at the next start
        assert ex.execute("print('after')", {}) == "after"

    assert sum(s for s, _ in totals) == SESSIONS * STEPS_PER_SESSION == 1000
    assert sum(k for _, k in totals) == SESSIONS * len(KILL_AT) == 100
    assert spawn._state.zygote is zygote and zygote.pid == server  # one fork server throughout
    assert _wait_for(lambda: _children(server) <= before_children), _children(server) - before_children
    assert _wait_for(lambda: set(os.listdir(root)) <= before_dirs), set(os.listdir(root)) - before_dirs
    assert open_fds() <= before_fds + FD_SLACK
    assert {t.ident for t in threading.enumerate()} <= before_threads
    assert rss_mb() - before_rss < RSS_SLACK_MB, (before_rss, rss_mb())
