"""Client side of the implementation protocol (docs/protocol.md): talk to one implementation.

An implementation is a command that reads JSON-lines messages on stdin and writes JSON-lines
replies on stdout: a ``hello`` handshake, then one ``case`` message per case, answered in order by
``result`` messages. :class:`Session` speaks it over a :class:`Connection`: a pipe to a subprocess
(:class:`PipeConnection`: upstream's checkout, the PyPI peers through ``driver.py``, any
third-party adapter) or, for rlm_compat itself, a :class:`LocalConnection` handing messages to the
same :class:`~.driver.Driver` code in this process.

The session guards against implementations that misbehave: a reply that is not JSON, a wrong
protocol version, a result for another case, a process that dies or stops answering. Each becomes
a typed :class:`ProtocolError` / :class:`DriverError`; during a run, the case in flight is reported
as a failure naming the cause, the implementation is restarted and the remaining cases go on.

Every subprocess runs offline and out of harm's way: ``LITELLM_LOCAL_MODEL_COST_MAP=True``,
``PYTHONHASHSEED=0`` (set order in printed output is part of what is recorded),
``PYTHONDONTWRITEBYTECODE=1`` (never write ``__pycache__`` into a read-only checkout), and HOME
and the working directory in a private temporary directory.
"""

from __future__ import annotations

import collections
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from ..shared.tooling_errors import ToolError
from .driver import PROTOCOL_VERSION, Driver, respond

__all__ = [
    "DRIVER_PATH",
    "KINDS",
    "PROTOCOL_VERSION",
    "SCHEMA_PATH",
    "Connection",
    "DriverError",
    "DriverProcess",
    "LocalConnection",
    "PipeConnection",
    "ProtocolError",
    "Session",
    "driver_environment",
]

DRIVER_PATH = Path(__file__).with_name("driver.py")
SCHEMA_PATH = Path(__file__).parent / "schemas" / "protocol.schema.json"
KINDS = ("repl", "parser", "loop")
_STDERR_TAIL = 4000
_WINDOW = 32  # cases sent ahead of the replies read (parser cases are many and fast)
_REPLY_SLACK = 30.0  # seconds beyond the case limit before a silent implementation is killed


class DriverError(ToolError):
    """The implementation could not be started, or stopped answering."""


class ProtocolError(DriverError):
    """The implementation answered, but not in the protocol (see docs/protocol.md)."""


def driver_environment(home: str, hash_seed: int = 0) -> dict[str, str]:
    """The environment every implementation runs with (see the module docstring for why)."""
    keep = ("PATH", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.update(
        HOME=home,
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        PYTHONHASHSEED=str(hash_seed),
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONIOENCODING="utf-8",
        PYTHONUTF8="1",
        NO_PROXY="*",
    )
    return env


class Connection:
    """A message channel to one running implementation."""

    def open(self) -> None:
        raise NotImplementedError

    def send(self, message: dict[str, Any]) -> None:
        """Queue ``message``; a channel that broke shows on the next :meth:`receive`."""
        raise NotImplementedError

    def receive(self, limit: float) -> dict[str, Any]:
        """The next reply; DriverError if none comes within ``limit`` seconds or the channel ended."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def stderr_tail(self) -> str:
        return ""


class LocalConnection(Connection):
    """The protocol in this process: each message goes straight to a :class:`Driver`."""

    def __init__(self, make_driver: Callable[[], Driver]) -> None:
        self._make_driver = make_driver
        self._driver: Driver | None = None
        self._replies: collections.deque[dict[str, Any]] = collections.deque()

    def open(self) -> None:
        self._driver = self._make_driver()
        self._replies.clear()

    def send(self, message: dict[str, Any]) -> None:
        if self._driver is None:
            raise DriverError("the in-process implementation is not open")
        reply = respond(self._driver, message)
        if reply is not None:
            self._replies.append(reply)

    def receive(self, limit: float) -> dict[str, Any]:
        if not self._replies:
            raise ProtocolError("the in-process implementation sent no reply")
        return self._replies.popleft()

    def close(self) -> None:
        self._driver = None


class PipeConnection(Connection):
    """A subprocess speaking the protocol on its stdin and stdout (stderr kept for messages)."""

    def __init__(self, command: Sequence[str], *, hash_seed: int = 0) -> None:
        if not command:
            raise DriverError("empty implementation command")
        self.command = list(command)
        self.hash_seed = hash_seed
        self._proc: subprocess.Popen[str] | None = None
        self._home: str | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr: list[str] = []
        self._drainer: threading.Thread | None = None

    def open(self) -> None:
        self._home = tempfile.mkdtemp(prefix="rlm-conformance-")
        try:
            self._proc = subprocess.Popen(
                self.command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                encoding="utf-8",
                errors="replace",
                cwd=self._home,
                env=driver_environment(self._home, self.hash_seed),
            )
        except OSError as exc:
            self.close()
            raise DriverError(f"cannot start {self.command[0]}: {exc}") from None
        assert self._proc.stdout is not None and self._proc.stderr is not None
        self._lines = queue.Queue()
        self._stderr = []
        threading.Thread(target=self._pump, args=(self._proc.stdout, self._lines), daemon=True).start()
        self._drainer = threading.Thread(target=self._drain, args=(self._proc.stderr,), daemon=True)
        self._drainer.start()

    def send(self, message: dict[str, Any]) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise DriverError("the implementation is not running")
        try:
            proc.stdin.write(json.dumps(message, ensure_ascii=False) + "\n")
            proc.stdin.flush()
        except OSError:
            pass  # it died; the next receive reports how

    def receive(self, limit: float) -> dict[str, Any]:
        proc = self._proc
        if proc is None:
            raise DriverError("the implementation is not running")
        try:
            line = self._lines.get(timeout=limit)
        except queue.Empty:
            proc.kill()
            proc.wait()
            self._drained()
            raise DriverError(f"no reply within {limit:.0f}s; stderr: {self.stderr_tail()}") from None
        if line is None:
            proc.wait()
            self._drained()
            raise DriverError(
                f"the implementation exited with status {proc.returncode}; stderr: {self.stderr_tail()}"
            )
        try:
            reply = json.loads(line)
        except ValueError:
            raise ProtocolError(f"reply is not JSON: {line.strip()[:200]!r}") from None
        if not isinstance(reply, dict):
            raise ProtocolError(f"reply is not a JSON object: {line.strip()[:200]!r}")
        return reply

    def close(self) -> None:
        """Say ``bye``, give it a moment to exit, then make sure; remove its private HOME."""
        proc, self._proc = self._proc, None
        if proc is not None:
            try:
                if proc.poll() is None and proc.stdin is not None:
                    proc.stdin.write(json.dumps({"type": "bye"}) + "\n")
                    proc.stdin.close()
                proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait()
        if self._home is not None:
            shutil.rmtree(self._home, ignore_errors=True)
            self._home = None

    def _drained(self, limit: float = 2.0) -> None:
        """Wait (briefly) until the stderr of an exited implementation is read to its end, so the
        error message carries its last words (a process that outlived it may hold the pipe open)."""
        if self._drainer is not None:
            self._drainer.join(limit)

    def stderr_tail(self) -> str:
        """The last few thousand characters written to stderr (for error messages)."""
        return "".join(self._stderr)[-_STDERR_TAIL:]

    @staticmethod
    def _pump(stream: IO[str], lines: queue.Queue[str | None]) -> None:
        for line in stream:
            if line.strip():
                lines.put(line)
        lines.put(None)

    def _drain(self, stream: IO[str]) -> None:
        for line in stream:
            self._stderr.append(line)
            if len(self._stderr) > 200:
                del self._stderr[:100]


class Session:
    """One implementation behind the protocol: handshake, cases in order, restart on breakage.

    ``start()`` returns the implementation's ``hello`` (implementation, version, kinds, Python,
    ...). ``run(kind, cases)`` returns one outcome per case, in order: ``{"id", "result"}``,
    ``{"id", "skip"}`` or ``{"id", "failure"}``; it never raises for one broken case. A case whose
    result does not come within ``reply_limit`` seconds (default: ``case_limit`` + 30) is a failure.
    """

    def __init__(
        self,
        connection: Connection,
        *,
        name: str = "implementation",
        step_limit: float = 5.0,
        case_limit: float = 60.0,
        startup_limit: float = 120.0,
        reply_limit: float | None = None,
    ) -> None:
        self.connection = connection
        self.name = name
        self.step_limit = step_limit
        self.case_limit = case_limit
        self.startup_limit = startup_limit
        self.reply_limit = case_limit + _REPLY_SLACK if reply_limit is None else reply_limit
        self.info: dict[str, Any] = {}

    def start(self) -> dict[str, Any]:
        """Open the connection and shake hands; DriverError / ProtocolError if that fails."""
        self.connection.open()
        try:
            self.connection.send(
                {
                    "type": "hello",
                    "protocol": PROTOCOL_VERSION,
                    "step_limit": self.step_limit,
                    "case_limit": self.case_limit,
                }
            )
            reply = self.connection.receive(self.startup_limit)
            self.info = self._check_hello(reply)
        except DriverError:
            self.connection.close()
            raise
        return self.info

    def _check_hello(self, reply: dict[str, Any]) -> dict[str, Any]:
        where = f"{self.name}: handshake"
        if reply.get("type") == "error":
            raise ProtocolError(f"{where}: refused: {reply.get('message')}")
        if reply.get("type") != "hello":
            raise ProtocolError(f"{where}: expected a hello message, got {_brief(reply)}")
        if reply.get("protocol") != PROTOCOL_VERSION:
            raise ProtocolError(
                f"{where}: it speaks protocol {reply.get('protocol')!r}, this runner speaks "
                f"{PROTOCOL_VERSION} (docs/protocol.md)"
            )
        kinds = reply.get("kinds")
        if not isinstance(kinds, list) or not set(kinds) <= set(KINDS):
            raise ProtocolError(f"{where}: 'kinds' must list some of {list(KINDS)}, got {kinds!r}")
        for key in ("implementation", "version"):
            if not isinstance(reply.get(key), str):
                raise ProtocolError(f"{where}: {key!r} must be a string, got {reply.get(key)!r}")
        return {k: v for k, v in reply.items() if k != "type"}

    def stop(self) -> None:
        self.connection.close()

    def __enter__(self) -> Session:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def stderr_tail(self) -> str:
        return self.connection.stderr_tail()

    def run(self, kind: str, cases: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Outcomes for ``cases``, in order (see the class docstring)."""
        limit = self.reply_limit
        out: list[dict[str, Any]] = []
        pending = collections.deque(cases)
        inflight: collections.deque[dict[str, Any]] = collections.deque()
        while pending or inflight:
            try:
                while pending and len(inflight) < _WINDOW:
                    self.connection.send({"type": "case", "kind": kind, "case": pending[0]})
                    inflight.append(pending.popleft())
            except DriverError as exc:  # not running at all: nothing to restart
                out.extend({"id": c.get("id"), "failure": str(exc)} for c in [*inflight, *pending])
                break
            case = inflight.popleft()
            try:
                out.append(self._outcome(case, self.connection.receive(limit)))
            except DriverError as exc:
                out.append({"id": case.get("id"), "failure": f"{type(exc).__name__}: {exc}"})
                pending.extendleft(reversed(inflight))
                inflight.clear()
                self._restart(pending, out)
        return out

    def _outcome(self, case: dict[str, Any], reply: dict[str, Any]) -> dict[str, Any]:
        case_id = case.get("id")
        if reply.get("type") == "error":  # the stream is intact: no restart needed
            return {"id": case_id, "failure": f"refused the case: {reply.get('message')}"}
        if reply.get("type") != "result" or reply.get("id") != case_id:
            raise ProtocolError(f"expected the result of {case_id!r}, got {_brief(reply)}")
        answers = [key for key in ("result", "skip", "failure") if key in reply]
        if len(answers) != 1:
            raise ProtocolError(f"a result needs exactly one of result/skip/failure, got {_brief(reply)}")
        key = answers[0]
        value = reply[key]
        if key == "result" and not isinstance(value, dict):
            raise ProtocolError(f"'result' must be an object, got {_brief(reply)}")
        outcome = {"id": case_id, key: value if key == "result" else str(value)}
        if "partial" in reply:
            outcome["partial"] = reply["partial"]
        return outcome

    def _restart(self, pending: collections.deque[dict[str, Any]], out: list[dict[str, Any]]) -> None:
        """Restart after a breakage; if that fails, every remaining case fails with the reason."""
        self.connection.close()
        try:
            self.start()
        except DriverError as exc:
            out.extend({"id": c.get("id"), "failure": f"could not restart: {exc}"} for c in pending)
            pending.clear()


def _brief(reply: dict[str, Any]) -> str:
    text = json.dumps(reply, ensure_ascii=False)
    return text if len(text) <= 200 else text[:199] + "…"


class DriverProcess(Session):
    """``python driver.py --backend NAME``: upstream or a PyPI peer, under its own interpreter."""

    def __init__(
        self,
        python: str,
        backend: str,
        *,
        paths: Sequence[str] = (),
        label: str = "",
        step_limit: float = 5.0,
        case_limit: float = 60.0,
        startup_limit: float = 120.0,
        hash_seed: int = 0,
    ) -> None:
        # The driver runs in a private working directory: relative paths must be fixed now.
        interpreter = os.path.abspath(python) if os.sep in python else (shutil.which(python) or python)
        command = [interpreter, str(DRIVER_PATH), "--backend", backend, "--label", label]
        for path in paths:
            command += ["--path", os.path.abspath(path)]
        super().__init__(
            PipeConnection(command, hash_seed=hash_seed),
            name=backend,
            step_limit=step_limit,
            case_limit=case_limit,
            startup_limit=startup_limit,
        )

    def __enter__(self) -> DriverProcess:
        self.start()
        return self
