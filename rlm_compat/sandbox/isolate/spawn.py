"""Start, kill and account for REPL worker processes: the parent's side.

Every REPL session gets its own killable worker. :func:`start_worker` returns a
:class:`WorkerHandle` whose ``sock`` is the parent's end of a socketpair; the worker's end is
the worker's channel (its fd 3), handed to the entry function (``"module:function"``).

Two start methods, one result (see :mod:`.workerinit` for what a worker looks like inside):

- ``"forkserver"`` (default where ``fork`` exists): workers are forked by the fork server of
  :mod:`.zygote`, started once per parent process; about a millisecond per worker.
- ``"spawn"`` (macOS's and Windows' way): a fresh interpreter per worker, owned by the parent.

Both kinds of processes are started through :meth:`ExecutionEnvironment.start_process
<rlm_compat.environments.ExecutionEnvironment.start_process>` of a
:class:`~rlm_compat.environments.LocalExecutionEnvironment` (filtered environment variables),
so hosting workers in a container later is a new environment class, not a new code path.
Each worker runs in a private empty directory under one private temporary directory, removed
when the worker is reaped and by :func:`shutdown` (registered with :mod:`atexit`).
"""

from __future__ import annotations

import atexit
import collections
import itertools
import json
import os
import queue
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from ...environments import LocalExecutionEnvironment
from ...errors import ConfigurationError
from ..step.repl_config import START_METHODS, Limits
from . import launcher, mapped
from .hardening import DISABLE_ENV
from .rlimits import cap_address_space, cap_cpu, current_address_space
from .templates import SharedContext, Template, Templates
from .workerinit import EXIT_HARDENING_FAILED, EXIT_OUT_OF_MEMORY, limits_to_json
from .zygote import ForkServerClient, ZygoteClient, ZygoteError, python_argv

__all__ = [
    "DEFAULT_ENTRY",
    "DEFAULT_PRELOAD",
    "WorkerHandle",
    "WorkerStartError",
    "echo_serve",
    "prewarm",
    "recv_message",
    "send_message",
    "shared_contexts",
    "shutdown",
    "start_worker",
]


class WorkerStartError(OSError):
    """No worker could be started (the runner turns it into a REPLError observation)."""


DEFAULT_ENTRY = "rlm_compat.sandbox.isolate.worker:serve"
DEFAULT_PRELOAD: tuple[str, ...] = ("rlm_compat.sandbox.isolate.worker",)
"""What the fork server imports before forking (a missing module is skipped); the module of the
entry a fork server is first started for is added (see :func:`start_worker`)."""
_PASSED_ENV = ("LITELLM_LOCAL_MODEL_COST_MAP", DISABLE_ENV)


def _remove_tree(path: str) -> None:
    """Remove a worker's directory even if the worker took permissions away inside it."""

    def retry(function: Callable[..., Any], failed: str, _exc: Any) -> None:
        try:
            os.chmod(os.path.dirname(failed), stat.S_IRWXU)
            if os.path.isdir(failed) and not os.path.islink(failed):
                os.chmod(failed, stat.S_IRWXU)
            function(failed)
        except OSError:
            pass

    if not os.path.lexists(path):
        return
    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=retry)
    else:
        shutil.rmtree(path, onerror=retry)


def _environment(root: str) -> LocalExecutionEnvironment:
    """Taken per start, so a worker sees the parent's environment as it is now (filtered)."""
    return LocalExecutionEnvironment(
        root,
        env_vars=dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True"),
        extra_allowed_env=_PASSED_ENV,
    )


def _reap(
    zygote: ForkServerClient | None,
    process: subprocess.Popen[bytes] | None,
    pid: int,
    workdir: str,
    template: tuple[Templates, Template] | None = None,
) -> None:
    if process is not None:
        if process.returncode is None:
            try:
                os.killpg(pid, signal.SIGKILL)  # its own session: the group id is its pid
            except OSError:
                pass
            try:
                process.kill()
            except OSError:
                pass
        process.wait()
    elif zygote is not None:
        zygote.kill(pid)
    if template is not None:
        template[0].release(template[1])
    _remove_tree(workdir)


class _State:
    """Everything this process started; reset in a forked child (none of it is the child's)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.root: str | None = None
        self.zygote: ZygoteClient | None = None
        self.handles: weakref.WeakSet[WorkerHandle] = weakref.WeakSet()
        self.orphans: collections.deque[Callable[[], None]] = collections.deque()
        self.wake: queue.SimpleQueue[None] = queue.SimpleQueue()
        self.reaper: threading.Thread | None = None
        self.counter = itertools.count()
        self.registered = False
        self.templates = Templates(lambda: self.wake.put(None))

    def ensure_root(self) -> str:
        with self.lock:
            if not self.registered:
                atexit.register(shutdown)
                self.registered = True
            if self.root is None:
                self.root = tempfile.mkdtemp(prefix=f"rlm-compat-{os.getpid()}-")
            return self.root

    def new_workdir(self) -> str:
        """Made under the lock :func:`shutdown` removes the root under: a directory made while the
        root is being removed would keep the root alive after ``state.root`` forgot it (a leak)."""
        with self.lock:
            path = os.path.join(self.ensure_root(), f"w{next(self.counter)}")
            os.mkdir(path, 0o700)
            return path

    def ensure_zygote(self, preload: Sequence[str]) -> ZygoteClient:
        with self.lock:
            if self.zygote is None or self.zygote.closed:
                if self.zygote is not None:
                    self.zygote.close()
                root = self.ensure_root()
                self.zygote = ZygoteClient(_environment(root), preload)
            return self.zygote

    def ensure_reaper(self) -> None:
        """The thread that reaps dropped workers soon after they are dropped (started here, in
        an ordinary call, because a finalizer must not start threads or take locks)."""
        if self.reaper is None:
            with self.lock:
                if self.reaper is None:
                    self.reaper = threading.Thread(
                        target=_reap_dropped, args=(self,), name="rlm-compat-reaper", daemon=True
                    )
                    self.reaper.start()

    def drain_orphans(self) -> None:
        while True:
            try:
                reap = self.orphans.popleft()
            except IndexError:
                return
            reap()


def _reap_dropped(state: _State) -> None:
    """Reap dropped workers and shut down the context templates no worker uses any more."""
    while True:
        try:
            state.wake.get(timeout=state.templates.wait_time())
        except queue.Empty:
            pass
        try:
            state.drain_orphans()
            state.templates.sweep()
        except Exception:  # what a failed reap leaves, shutdown() removes with the root
            pass


def _orphaned(
    orphans: collections.deque[Callable[[], None]], wake: queue.SimpleQueue[None], reap: Callable[[], None]
) -> None:
    """A handle's finalizer: queue its reaping and wake the reaper thread.

    It may run inside any allocation, in any thread, through the cyclic garbage collector, even
    while that thread holds the fork server's lock mid-request: so it only appends and signals
    (``deque.append`` and ``SimpleQueue.put`` take none of our locks); the kill, which asks the
    fork server, and the directory's removal happen on the reaper thread.
    """
    orphans.append(reap)
    wake.put(None)


_state = _State()


def _reset_after_fork() -> None:
    global _state
    _state = _State()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


class WorkerHandle:
    """One worker process and the parent's end of its channel.

    Killing is race-free: a forked worker is signalled and reaped only by its fork server, a
    spawned one only through its Popen while unreaped, so a reused pid is never hit. A handle
    dropped without :meth:`close` is killed, and its directory removed, by a reaper thread soon
    after (see :func:`_orphaned`), at the latest by the next :func:`start_worker` or
    :func:`shutdown` (the dropped socket also tells a well-behaved worker to exit).
    """

    pid: int
    sock: socket.socket

    def __init__(
        self,
        pid: int,
        sock: socket.socket,
        workdir: str,
        *,
        zygote: ForkServerClient | None = None,
        process: subprocess.Popen[bytes] | None = None,
        template: Template | None = None,
    ) -> None:
        self.pid = pid
        self.sock = sock
        self.workdir = workdir
        self._zygote = zygote
        self._process = process
        self._lock = threading.Lock()
        self._reaped = False
        state = _state
        use = None if template is None else (state.templates, template)
        self.inherited: str | bytes | None = None if template is None else template.value
        """The value this worker inherited from its context template (None: it has none)."""
        self._reap: Callable[[], None] = lambda: _reap(zygote, process, pid, workdir, use)
        self._finalizer = weakref.finalize(self, _orphaned, state.orphans, state.wake, self._reap)

    def __repr__(self) -> str:
        how = "spawned" if self._process is not None else "forked"
        return f"<WorkerHandle pid={self.pid} {how}{' reaped' if self._reaped else ''}>"

    def kill(self) -> None:
        """SIGKILL the worker (and its process group) and reap it; idempotent."""
        with self._lock:
            if self._reaped:
                return
            self._reaped = True
            self._finalizer.detach()
            self._reap()

    def alive(self) -> bool:
        """Whether the worker process still exists (False once it exited, even unreaped)."""
        with self._lock:
            if self._reaped:
                return False
            if self._process is not None:
                return self._process.poll() is None
            assert self._zygote is not None
            return self._zygote.alive(self.pid)

    def exit_description(self, wait: float = 0.2) -> str:
        """How the worker ended (``killed by signal SIGSEGV``, ``exit status 70``), or ''.

        Waits up to ``wait`` seconds for a worker that just closed its channel to be reaped.
        """
        deadline = time.monotonic() + wait
        while True:
            if self._process is not None:
                code = self._process.poll()
                status = None if code is None else _status_from_returncode(code)
            else:
                assert self._zygote is not None
                status = self._zygote.status(self.pid)
            if status is not None or time.monotonic() >= deadline:
                break
            time.sleep(0.01)
        if status is None:
            return ""
        if os.WIFSIGNALED(status):
            number = os.WTERMSIG(status)
            try:
                name = signal.Signals(number).name
            except ValueError:
                name = str(number)
            return f"killed by signal {name}"
        code = os.waitstatus_to_exitcode(status)
        if code == EXIT_HARDENING_FAILED:
            return f"exit status {code}: it could not apply its OS hardening (see `rlm-compat doctor`)"
        if code == EXIT_OUT_OF_MEMORY:
            return f"exit status {code}: MemoryError, its memory allowance was used up outside a step"
        return f"exit status {code}"

    def close(self) -> None:
        """:meth:`kill`, then close the socket; idempotent."""
        self.kill()
        self.sock.close()


def _spawn_statement(fd: int, limits: Limits, entry: str) -> str:
    return (
        "from rlm_compat.sandbox.isolate.workerinit import spawned_main; "
        f"spawned_main({fd}, {os.getpid()}, {limits_to_json(limits)!r}, {entry!r})"
    )


def _check_method(start_method: str) -> None:
    if start_method not in START_METHODS:
        raise ConfigurationError(f"start_method must be one of {START_METHODS}, not {start_method!r}")
    if start_method == "forkserver" and not (hasattr(os, "fork") and hasattr(socket, "send_fds")):
        raise ConfigurationError("start_method 'forkserver' needs os.fork and socket.send_fds; use 'spawn'")


def _preload_for(entry: str) -> tuple[str, ...]:
    module = entry.partition(":")[0]
    return DEFAULT_PRELOAD if module in DEFAULT_PRELOAD else (*DEFAULT_PRELOAD, module)


def start_worker(
    limits: Limits, start_method: str, entry: str = DEFAULT_ENTRY, *, share: str | bytes | None = None
) -> WorkerHandle:
    """Start one worker running ``entry(channel)``; returns as soon as the process exists.

    ``share``: a big value (the session's context) the worker should inherit from a context
    template (:mod:`.templates`) instead of receiving a copy; ``handle.inherited`` says whether it
    did (only with ``"forkserver"``, and only when a template could be had).
    """
    _check_method(start_method)
    state = _state
    state.ensure_reaper()
    state.drain_orphans()
    workdir = state.new_workdir()
    parent_end, child_end = socket.socketpair()
    try:
        if start_method == "forkserver":
            handle = _fork_worker(state, child_end.fileno(), parent_end, workdir, limits, entry, share)
        else:
            fd = child_end.fileno()
            process = launcher.start_process(
                _environment(state.ensure_root()),
                python_argv(_spawn_statement(fd, limits, entry)),
                pass_fds=(fd,),
                cwd=workdir,
            )
            handle = WorkerHandle(process.pid, parent_end, workdir, process=process)
    except BaseException:
        parent_end.close()
        _remove_tree(workdir)
        raise
    finally:
        child_end.close()
    state.handles.add(handle)
    return handle


def _fork_worker(
    state: _State,
    channel_fd: int,
    parent_end: socket.socket,
    workdir: str,
    limits: Limits,
    entry: str,
    share: str | bytes | None,
) -> WorkerHandle:
    """A worker forked by the context template of ``share``, else by the zygote (restarted once
    if it is gone). A template that cannot fork (it died) is shut down and a new one made once;
    failing that, the zygote forks and the worker gets the context as a copy."""
    env = _environment(state.ensure_root()).env_vars
    if share is not None and mapped.available():
        for _ in (1, 2):
            template = state.templates.acquire(share, state.ensure_zygote(_preload_for(entry)))
            if template is None:
                break
            try:
                pid = template.client.fork(channel_fd, limits=limits, cwd=workdir, env=env, entry=entry)
                return WorkerHandle(pid, parent_end, workdir, zygote=template.client, template=template)
            except ZygoteError:
                state.templates.discard(template)
                state.templates.release(template)
    for attempt in (1, 2):
        zygote = state.ensure_zygote(_preload_for(entry))
        try:
            pid = zygote.fork(channel_fd, limits=limits, cwd=workdir, env=env, entry=entry)
            break
        except ZygoteError as exc:
            if attempt == 2 or not zygote.closed:
                raise WorkerStartError(f"the fork server could not start it: {exc}") from None
    return WorkerHandle(pid, parent_end, workdir, zygote=zygote)


def prewarm(start_method: str = "forkserver", *, preload: Sequence[str] = DEFAULT_PRELOAD) -> None:
    """Start the fork server now, in the background (returns at once; idempotent)."""
    _check_method(start_method)
    if start_method == "forkserver":
        _state.ensure_zygote(tuple(preload))
    else:
        _state.ensure_root()


def shared_contexts() -> list[SharedContext]:
    """The context templates this process runs now (:mod:`.templates`): what ``doctor``, the run
    record and the benchmarks count once, however many workers share each."""
    return _state.templates.describe()


def shutdown() -> None:
    """Kill every worker and the fork server, remove the temporary directories; idempotent.

    Meant for the end (it runs at exit): a worker started by another thread *while* this runs
    may lose its directory. Starting workers afterwards is fine (everything starts afresh).
    """
    state = _state
    with state.lock:
        for handle in list(state.handles):
            handle.close()
        state.drain_orphans()
        state.templates.sweep(everything=True)
        zygote, state.zygote = state.zygote, None
        if zygote is not None:
            zygote.close()
        root, state.root = state.root, None
        if root is not None:
            _remove_tree(root)


# --- a diagnostic entry (tests and benchmarks) -----------------------------------------------------

_HEADER = struct.Struct("!I")


def send_message(sock: socket.socket, message: Any) -> None:
    """One framed JSON message (the diagnostic entry's protocol)."""
    body = json.dumps(message).encode()
    sock.sendall(_HEADER.pack(len(body)) + body)


def recv_message(sock: socket.socket) -> Any:
    """One framed JSON message; EOFError when the peer closed."""
    header = _recv_exactly(sock, _HEADER.size)
    return json.loads(_recv_exactly(sock, _HEADER.unpack(header)[0]))


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    buffer = bytearray()
    while len(buffer) < size:
        chunk = sock.recv(size - len(buffer))
        if not chunk:
            raise EOFError("channel closed")
        buffer += chunk
    return bytes(buffer)


def _describe() -> dict[str, Any]:
    import resource

    fd_dir = "/proc/self/fd" if os.path.isdir("/proc/self/fd") else "/dev/fd"
    fds = sorted(int(n) for n in os.listdir(fd_dir))
    limits = {
        name: list(resource.getrlimit(getattr(resource, name)))
        for name in ("RLIMIT_NOFILE", "RLIMIT_FSIZE", "RLIMIT_CORE", "RLIMIT_AS", "RLIMIT_CPU")
    }
    cwd = os.getcwd()
    return {
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "sid": os.getsid(0),
        "pgid": os.getpgid(0),
        "cwd": cwd,
        "vsize": current_address_space(),
        "cwd_mode": stat.S_IMODE(os.stat(cwd).st_mode),
        "cwd_entries": os.listdir(cwd),
        "env": dict(os.environ),
        "rlimits": limits,
        "fds": fds,
        "stdio": [os.path.realpath(f"{fd_dir}/{n}") for n in (0, 1, 2)],
        "modules": sorted(sys.modules),
        "dont_write_bytecode": sys.dont_write_bytecode,
    }


def _try_write(size: int) -> str:
    try:
        with open("probe.bin", "wb") as f:
            f.write(b"x" * size)
            f.flush()
    except OSError as exc:
        return f"{type(exc).__name__}: errno {exc.errno}"
    return "ok"


def echo_serve(sock: socket.socket) -> None:
    """Answer ``ping`` / ``info`` / ``write`` / ``cap`` / ``alloc`` / ``print`` / ``exit`` until the
    channel closes: the diagnostic stand-in for the real worker."""
    while True:
        try:
            request = recv_message(sock)
        except EOFError:
            return
        op = request.get("op")
        if op == "ping":
            reply: Any = {"pong": request.get("n")}
        elif op == "info":
            reply = _describe()
        elif op == "write":
            reply = {"result": _try_write(int(request["size"]))}
        elif op == "cap":
            cap_address_space(request.get("address_space"))
            cap_cpu(request.get("cpu"))
            reply = _describe()
        elif op == "alloc":
            try:
                reply = {"result": len(bytearray(int(request["size"])))}
            except MemoryError:
                reply = {"result": "MemoryError"}
        elif op == "print":
            print("stray output", flush=True)
            print("stray error", file=sys.stderr, flush=True)
            reply = {"printed": True}
        elif op == "exit":
            return
        else:
            reply = {"error": f"unknown op {op!r}"}
        send_message(sock, reply)


def _status_from_returncode(code: int) -> int:
    """A wait status from Popen's returncode (negative: the signal that ended it)."""
    return -code if code < 0 else code << 8
