"""The fork server: a pre-warmed template process that forks REPL workers in about a millisecond.

Starting a worker as a fresh interpreter costs 100–200 ms (interpreter start, RestrictedPython,
the sandbox). The zygote pays that once per parent process: it is a *fresh* interpreter
(``python -I -S`` with the parent's ``sys.path`` passed explicitly), so nothing of the
application's ``__main__`` — litellm, open connections, threads — is ever copied into a worker;
it imports the sandbox up front and then forks one child per request.

Protocol on the control socket (a Unix socketpair; each frame a 4-byte length and JSON):
the zygote first sends ``{"ready": pid}``; then it answers one request at a time —
``fork`` (the worker's end of a fresh socketpair travels as SCM_RIGHTS) → ``{"pid": n}``;
``template`` (a control socket and a sealed memory file travel as SCM_RIGHTS) → ``{"pid": n}``
of a *template*: a fork server of its own, forked from this one, that reads the value once and
then answers ``fork`` with workers that inherit it copy-on-write (:mod:`.templates`);
``kill`` → SIGKILL to the worker's process group and the worker, then ``waitpid``;
``alive``; ``shutdown``. The zygote alone signals and reaps its children, and it reaps a child
only in its own loop, so a pid it signals can never have been reused. When the parent dies or
closes the control socket, the zygote kills its children and exits; the children also have
SIGKILL as their parent-death signal.
"""

from __future__ import annotations

import dataclasses
import gc
import importlib
import json
import os
import select
import signal
import socket
import struct
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from ..step.repl_config import Limits
from . import hardening, mapped
from .workerinit import EXIT_ENTRY_FAILED, die_with_parent, hold_inherited, name_process, prepare, run_entry

__all__ = [
    "ForkServerClient",
    "ZygoteClient",
    "ZygoteError",
    "child_sys_path",
    "python_argv",
    "recv_frame",
    "send_frame",
    "serve",
]

if TYPE_CHECKING:
    import subprocess

    from ...environments import ExecutionEnvironment

_HEADER = struct.Struct("!I")
_MAX_FRAME = 16 << 20
_PR_SET_CHILD_SUBREAPER = 36
_REQUEST_TIMEOUT = 60.0
_START_TIMEOUT = 60.0


class ZygoteError(OSError):
    """The fork server is gone or answered nonsense (the caller may start a new one)."""


# --- framing ------------------------------------------------------------------------------------


def send_frame(sock: socket.socket, message: Any, fds: Sequence[int] = ()) -> None:
    """One JSON frame; ``fds`` ride along with its first byte."""
    body = json.dumps(message, separators=(",", ":")).encode()
    data = _HEADER.pack(len(body)) + body
    sent = socket.send_fds(sock, [data], list(fds)) if fds else sock.send(data)
    if sent < len(data):
        sock.sendall(data[sent:])


def recv_frame(sock: socket.socket, max_fds: int = 0) -> tuple[Any, list[int]]:
    """One JSON frame and the descriptors sent with it; EOFError when the peer closed."""
    fds: list[int] = []
    if max_fds:
        data, fds, _, _ = socket.recv_fds(sock, 65536, max_fds)
    else:
        data = sock.recv(65536)
    if not data:
        raise EOFError("control socket closed")
    buffer = bytearray(data)
    while len(buffer) < _HEADER.size:
        buffer += _recv_some(sock)
    (size,) = _HEADER.unpack_from(buffer)
    if size > _MAX_FRAME:
        raise ValueError(f"frame of {size} bytes")
    while len(buffer) < _HEADER.size + size:
        buffer += _recv_some(sock)
    return json.loads(buffer[_HEADER.size : _HEADER.size + size]), fds


def _recv_some(sock: socket.socket) -> bytes:
    chunk = sock.recv(65536)
    if not chunk:
        raise EOFError("control socket closed mid-frame")
    return chunk


# --- the zygote process ---------------------------------------------------------------------------


def _set_subreaper() -> None:
    """Orphaned grandchildren (a worker's own children) are re-parented here and reaped."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        except (OSError, AttributeError):
            pass


_STATUSES: dict[int, int] = {}
"""Wait statuses of recently reaped workers (for the parent's account of a death)."""
_KEEP_STATUSES = 256


def _reaped(pid: int, status: int, children: set[int]) -> None:
    children.discard(pid)
    _STATUSES[pid] = status
    while len(_STATUSES) > _KEEP_STATUSES:
        del _STATUSES[next(iter(_STATUSES))]


def _reap(children: set[int]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _reaped(pid, status, children)


def _kill(pid: int, children: set[int]) -> None:
    if pid not in children:
        return  # already reaped (or never ours): signalling it could hit a reused pid
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except OSError:
            pass
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
    children.discard(pid)


def _alive(pid: int, children: set[int]) -> bool:
    if pid not in children:
        return False
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        done, status = pid, 0
    if done:
        _reaped(pid, status, children)
        return False
    return True


def _leave_server(closing: Sequence[int]) -> None:
    """In a child just forked by a server: drop the server's wake-up pipe and control socket."""
    signal.set_wakeup_fd(-1)
    for fd in closing:
        os.close(fd)


def _fork(fds: list[int], request: Mapping[str, Any], closing: Sequence[int]) -> int:
    if len(fds) != 1:
        raise ValueError("a fork request carries exactly one descriptor")
    zygote_pid = os.getpid()
    try:
        pid = os.fork()
    except OSError:
        os.close(fds[0])
        raise
    if pid == 0:
        try:
            _leave_server(closing)
            channel = prepare(
                fds[0],
                parent_pid=zygote_pid,
                limits=Limits(**request["limits"]),
                cwd=request["cwd"],
                env=request["env"],
            )
        except BaseException:
            os._exit(EXIT_ENTRY_FAILED)
        run_entry(str(request["entry"]), channel)
    os.close(fds[0])
    return pid


def _template(fds: list[int], request: Mapping[str, Any], closing: Sequence[int]) -> int:
    """Fork a template: a fork server of its own that holds one value (a context) and forks
    workers that inherit it copy-on-write (see :mod:`.templates`). ``fds``: the template's control
    socket and the value's sealed memory file; the zygote keeps neither."""
    try:
        if len(fds) != 2:
            raise ValueError("a template request carries a control socket and a memory file")
        kind, size = str(request["kind"]), int(request["size"])
        zygote_pid = os.getpid()
        pid = os.fork()
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    if pid == 0:
        try:
            _leave_server(closing)
            die_with_parent(zygote_pid)
            name_process("rlm-template")
            _set_subreaper()
            hold_inherited(mapped.read(fds[1], kind, size))
        except BaseException:
            os._exit(EXIT_ENTRY_FAILED)
        _loop(fds[0], zygote_pid, {"ready": os.getpid(), "held": size}, templates=False)
    for fd in fds:
        os.close(fd)
    return pid


def _handle(
    request: Any, fds: list[int], children: set[int], closing: Sequence[int], templates: bool
) -> dict[str, Any] | None:
    op = request.get("op") if isinstance(request, dict) else None
    if op not in ("fork", "template") or (op == "template" and not templates):
        for fd in fds:
            os.close(fd)
    if op == "fork":
        pid = _fork(fds, request, closing)
        children.add(pid)
        return {"pid": pid}
    if op == "template" and templates:
        pid = _template(fds, request, closing)
        children.add(pid)
        return {"pid": pid}
    if op == "kill":
        _kill(int(request["pid"]), children)
        return {"ok": True}
    if op == "alive":
        pid = int(request["pid"])
        alive = _alive(pid, children)
        return {"alive": alive, "status": None if alive else _STATUSES.get(pid)}
    if op == "shutdown":
        return None
    return {"error": f"unknown request {op!r}"}


def serve(ctrl_fd: int, parent_pid: int, preload: Sequence[str]) -> NoReturn:
    """The zygote's main loop (run by :func:`python_argv`'s command line)."""
    die_with_parent(parent_pid)
    name_process("rlm-forkserver")
    _set_subreaper()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    loaded = []
    for name in preload:
        try:
            module = importlib.import_module(name)
            prewarm = getattr(module, "zygote_prewarm", None)
            if callable(prewarm):
                prewarm()  # built once here, shared by every forked worker
            loaded.append(name)
        except Exception:
            pass
    hardening.prewarm()  # what workers may read, and their system-call filter: made once
    gc.freeze()  # the template's objects stay shared: fewer copy-on-write faults in workers
    gc.enable()  # python_argv switched it off: imports run faster without collections
    _loop(ctrl_fd, parent_pid, {"ready": os.getpid(), "preloaded": loaded}, templates=True)


def _loop(ctrl_fd: int, parent_pid: int, hello: Mapping[str, Any], *, templates: bool) -> NoReturn:
    """Answer requests until the parent goes; then kill every child and exit. The zygote runs
    it, and so does each template it forks (``templates=False``: a template makes none)."""
    ctrl = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, 0, ctrl_fd)
    ctrl.setblocking(True)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    children: set[int] = set()
    closing = (ctrl.fileno(), wake_r, wake_w)
    try:
        send_frame(ctrl, dict(hello))
        while True:
            readable, _, _ = select.select([ctrl.fileno(), wake_r], [], [], 1.0)
            if wake_r in readable:
                try:
                    while os.read(wake_r, 512):
                        pass
                except BlockingIOError:
                    pass
            _reap(children)
            if os.getppid() != parent_pid:
                break
            if ctrl.fileno() not in readable:
                continue
            try:
                request, fds = recv_frame(ctrl, max_fds=4)
            except (EOFError, OSError, ValueError):
                break
            try:
                reply = _handle(request, fds, children, closing, templates)
            except Exception as exc:
                reply = {"error": f"{type(exc).__name__}: {exc}"}
            if reply is None:
                break
            send_frame(ctrl, reply)
    except OSError:
        pass
    finally:
        for pid in list(children):
            _kill(pid, children)
        _reap(children)
        try:
            send_frame(ctrl, {"ok": True})
        except OSError:
            pass
        os._exit(0)


# --- the parent's side --------------------------------------------------------------------------


def child_sys_path() -> list[str]:
    """The parent's import path for a fresh interpreter: this package's root first (an editable
    install elsewhere must not win), absolute entries, and never ``''`` (the parent's cwd)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__)))))
    path = [root]
    for entry in sys.path:
        if entry and isinstance(entry, str):
            absolute = os.path.abspath(entry)
            if absolute not in path:
                path.append(absolute)
    return path


def python_argv(statement: str) -> list[str]:
    """A fresh, isolated interpreter (no site, no PYTHON* variables) with the parent's path.

    The garbage collector starts switched off (imports are faster); ``statement`` must end by
    switching it back on. The package ``rlm_compat`` is registered bare, without running its
    ``__init__``: a worker needs the sandbox, not the public API, whose imports (asyncio, the
    releases, the client) cost about two thirds of a fork server's start, which the first run of
    every process waits for. Its submodules import as usual, and ``__file__`` names the package's
    directory as the real one does (the worker's Landlock read plan is made from it).
    """
    if not sys.executable:
        raise ZygoteError("sys.executable is unknown: cannot start a Python process")
    package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
    bare = (
        "import types; bare = types.ModuleType('rlm_compat'); "
        f"bare.__path__ = [{package!r}]; bare.__file__ = {os.path.join(package, '__init__.py')!r}; "
        "bare.__package__ = 'rlm_compat'; sys.modules['rlm_compat'] = bare; "
    )
    code = f"import gc; gc.disable(); import sys; sys.path[:] = {child_sys_path()!r}; {bare}{statement}"
    return [sys.executable, "-I", "-S", "-c", code]


class ForkServerClient:
    """The parent's handle on a fork server (the zygote, or a template of :mod:`.templates`):
    ``fork`` / ``kill`` / ``alive`` / ``status`` requests; thread-safe (one request at a time)."""

    def __init__(self, sock: socket.socket) -> None:
        self._lock = threading.Lock()
        self._sock = sock
        self._closed = False
        self._owner = os.getpid()
        self.pid: int | None = None

    @property
    def closed(self) -> bool:
        return self._closed

    def _ensure_ready(self) -> None:
        """Wait for the server's hello (called under the lock before each request)."""

    def request(self, message: Mapping[str, Any], fds: Sequence[int] = ()) -> dict[str, Any]:
        """One round trip; ZygoteError when the server is gone."""
        if os.getpid() != self._owner:
            raise ZygoteError("the REPL fork server belongs to the process this one was forked from")
        with self._lock:
            if self._closed:
                raise ZygoteError("the REPL fork server was shut down")
            self._ensure_ready()
            try:
                send_frame(self._sock, dict(message), fds)
                reply, _ = recv_frame(self._sock)
            except (EOFError, OSError, ValueError) as exc:
                self._closed = True
                raise ZygoteError(f"the REPL fork server is gone ({exc})") from None
        if not isinstance(reply, dict) or "error" in reply:
            raise ZygoteError(f"the REPL fork server refused: {reply!r}")
        return reply

    def fork(self, channel_fd: int, *, limits: Limits, cwd: str, env: Mapping[str, str], entry: str) -> int:
        """A new worker's pid; ``channel_fd`` becomes its fd 3 (the caller still closes its copy)."""
        reply = self.request(
            {
                "op": "fork",
                "limits": dataclasses.asdict(limits),
                "cwd": cwd,
                "env": dict(env),
                "entry": entry,
            },
            (channel_fd,),
        )
        return int(reply["pid"])

    def kill(self, pid: int) -> None:
        """SIGKILL and reap a worker; nothing when it (or the server) is already gone."""
        try:
            self.request({"op": "kill", "pid": pid})
        except ZygoteError:
            pass  # a dead server's workers died with it (parent-death signal, or its own cleanup)

    def alive(self, pid: int) -> bool:
        try:
            return bool(self.request({"op": "alive", "pid": pid})["alive"])
        except ZygoteError:
            return False

    def status(self, pid: int) -> int | None:
        """The wait status of a reaped worker (None while it runs, or when unknown)."""
        try:
            status = self.request({"op": "alive", "pid": pid}).get("status")
        except ZygoteError:
            return None
        return None if status is None else int(status)


class ZygoteClient(ForkServerClient):
    """The parent's handle on its zygote, started in the background when made."""

    def __init__(self, environment: ExecutionEnvironment, preload: Sequence[str]) -> None:
        from . import launcher  # the parent's side only: the fork server never imports it

        sock, child_end = socket.socketpair()
        super().__init__(sock)
        statement = (
            "from rlm_compat.sandbox.isolate.zygote import serve; "
            f"serve({child_end.fileno()}, {os.getpid()}, {tuple(preload)!r})"
        )
        self._child_end: socket.socket | None = child_end
        self._launch = launcher.submit(environment, python_argv(statement), pass_fds=(child_end.fileno(),))
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        """The server's process once it was started (None before and after :meth:`close`)."""
        return self._process

    def _ensure_ready(self) -> None:
        if self._process is not None:
            return
        try:
            process = self._launch.result()
        finally:
            if self._child_end is not None:
                self._child_end.close()
                self._child_end = None
        self._process = process
        self._sock.settimeout(_START_TIMEOUT)
        try:
            hello, _ = recv_frame(self._sock)
        except (EOFError, OSError, ValueError) as exc:
            self._closed = True
            raise ZygoteError(f"the REPL fork server failed to start ({exc})") from None
        self.pid = int(hello["ready"])
        self._sock.settimeout(_REQUEST_TIMEOUT)

    def close(self, timeout: float = 10.0) -> None:
        """Stop the server and every worker it made; idempotent."""
        if os.getpid() != self._owner:
            return
        with self._lock:
            if self._closed and self._process is None and self._child_end is None:
                return
            self._closed = True
            if self._process is None:
                try:
                    self._process = self._launch.result()
                except Exception:
                    self._process = None
                if self._child_end is not None:
                    self._child_end.close()
                    self._child_end = None
            process, self._process = self._process, None
            try:
                self._sock.settimeout(timeout)
                send_frame(self._sock, {"op": "shutdown"})
                recv_frame(self._sock)
            except (EOFError, OSError, ValueError):
                pass
            self._sock.close()
            if process is not None:
                import subprocess

                try:
                    process.wait(timeout)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
