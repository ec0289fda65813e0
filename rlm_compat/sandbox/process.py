"""``isolation="process"``: each executor's code runs in its own persistent worker process.

What it adds to inline isolation: the timeout stops anything, even a single long C call (a
catastrophic regex, ``sum(range(10**12))``), because the worker is killed and replaced; and the
worker's address space is capped, so one enormous allocation fails there instead of here.

How the session is kept: the worker holds the namespace. Before each step the parent sends the
``env`` entries that changed since the last step (pickled; modules by name; host functions as
stubs that call back into this process, where the real function runs with the clock paused);
after it, the worker sends back every variable it can pickle, and ``env`` gets them. Objects
that cannot cross a process boundary (functions, classes and instances defined by the code)
stay in the worker and appear in ``env`` as :class:`WorkerObject` placeholders. When a timeout
kills the worker, they are lost (a fresh worker gets everything ``env`` holds).
"""

from __future__ import annotations

import os
import pickle
import select
import subprocess
import sys
import threading
import time
import types
from typing import Any

from .. import errors as _errors
from ..errors import REPLError, REPLTimeoutError
from .hostcall import HostCall, sanitized
from .worker import read_message, write_message

__all__ = ["ProcessRunner", "WorkerObject"]


class WorkerObject:
    """Stands in ``env`` for a value that lives only in the worker (a function, a class...)."""

    __slots__ = ("name", "type_name")

    def __init__(self, name: str, type_name: str) -> None:
        self.name = name
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"<{self.type_name} {self.name!r} (lives in the REPL worker process)>"


class ProcessRunner:
    """The parent side: one worker per executor, restarted after a timeout or a crash."""

    def __init__(
        self, profile: Any, max_output_chars: int, memory_limit_mb: int | None, timeout: float
    ) -> None:
        self._profile = profile
        self._max_output_chars = max_output_chars
        self._memory_limit_mb = memory_limit_mb
        self._timeout = timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._sent: dict[str, Any] = {}
        self._lock = threading.Lock()

    # --- lifecycle ----------------------------------------------------------------------------

    def _start(self) -> subprocess.Popen[bytes]:
        env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True")
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
        proc = subprocess.Popen(
            [sys.executable, "-c", "from rlm_compat.sandbox.worker import main; main()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        assert proc.stdin is not None and proc.stdout is not None
        write_message(
            proc.stdin, ("init", self._profile, self._max_output_chars, self._memory_limit_mb)
        )
        reply = read_message(proc.stdout)
        if reply[0] != "ready":
            raise REPLError("Execution error: the REPL worker process failed to start")
        self._sent = {}
        return proc

    def close(self) -> None:
        """Stop the worker (a new one starts on the next call)."""
        proc, self._proc = self._proc, None
        if proc is not None:
            try:
                proc.kill()
            except OSError:
                pass
            proc.wait()
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    # --- one step -------------------------------------------------------------------------------

    def execute(self, code: str, env: dict[str, Any]) -> str:
        """Run ``code`` in the worker with ``env`` as the session's namespace."""
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self.close()
                self._proc = self._start()
            proc = self._proc
            assert proc.stdin is not None and proc.stdout is not None
            try:
                self._sync(proc, env)
                write_message(proc.stdin, ("exec", code))
                reply = self._serve(proc, env)
            except (EOFError, BrokenPipeError, OSError) as exc:
                code_ = proc.poll()
                self.close()
                raise REPLError(
                    f"Execution error: the REPL worker process died (exit status {code_}; {exc})"
                ) from None
            return self._finish(reply, env)

    def _sync(self, proc: subprocess.Popen[bytes], env: dict[str, Any]) -> None:
        values: dict[str, bytes] = {}
        modules: dict[str, str] = {}
        hosts: list[str] = []
        for key, value in env.items():
            if not isinstance(key, str) or self._sent.get(key, _NOTHING) is value:
                continue
            if isinstance(value, WorkerObject):
                continue
            if isinstance(value, types.ModuleType):
                modules[key] = value.__name__
            elif isinstance(value, HostCall) or (callable(value) and not isinstance(value, type)):
                hosts.append(key)  # runs here, called from the worker
            else:
                try:
                    values[key] = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
                except Exception:
                    continue  # cannot cross: the code will not see it
            self._sent[key] = value
        removed = [k for k in self._sent if k not in env]
        for key in removed:
            del self._sent[key]
        assert proc.stdin is not None
        write_message(proc.stdin, ("sync", values, modules, hosts, removed))

    def _serve(self, proc: subprocess.Popen[bytes], env: dict[str, Any]) -> Any:
        """Answer host calls until the step is done; kill the worker when time is up."""
        assert proc.stdin is not None and proc.stdout is not None
        budget = self._timeout
        fd = proc.stdout.fileno()
        while True:
            started = time.monotonic()
            wait = None if budget == float("inf") else max(budget, 0.0)
            ready, _, _ = select.select([fd], [], [], wait)
            budget -= time.monotonic() - started
            if not ready:
                self.close()
                raise REPLTimeoutError(
                    f"Execution error: TimeoutError: execution exceeded the {self._timeout:g} s "
                    "timeout (the REPL worker process was restarted; functions and objects "
                    "that lived only there are lost)"
                )
            message = read_message(proc.stdout)
            if message[0] != "call":
                return message
            _, name, args, kwargs = message
            write_message(proc.stdin, self._host_call(env, name, args, kwargs))

    @staticmethod
    def _host_call(env: dict[str, Any], name: str, args: Any, kwargs: Any) -> tuple[str, Any]:
        fn = env.get(name)
        if not callable(fn) or isinstance(fn, (type, WorkerObject)):
            return ("raise", NameError(f"name {name!r} is not defined"))
        try:
            result = fn(*args, **kwargs)
            pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
            return ("ret", result)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:
            safe = sanitized(exc)
            try:
                pickle.dumps(safe, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception:
                safe = RuntimeError(f"{type(exc).__name__}: {exc}")
            return ("raise", safe)

    def _finish(self, reply: Any, env: dict[str, Any]) -> str:
        _, result, changed, opaque, removed = reply
        for key in removed:
            env.pop(key, None)
            self._sent.pop(key, None)
        for key, value in changed.items():
            env[key] = value
            self._sent[key] = value
        for key, type_name in opaque.items():
            placeholder = WorkerObject(key, type_name)
            env[key] = placeholder
            self._sent[key] = placeholder
        if result[0] == "ok":
            return str(result[1])
        error_type = getattr(_errors, result[1], None)
        if not (isinstance(error_type, type) and issubclass(error_type, REPLError)):
            error_type = REPLError
        raise error_type(result[2])


_NOTHING = object()
