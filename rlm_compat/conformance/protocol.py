"""Client side of the driver protocol: start a driver under another Python, send cases, stop it.

Used by the recorder (against upstream) and by the subprocess adapters (upstream checkout,
recursive-llm 0.5.0, rlms 0.1.1). The driver itself isolates each case in a forked child and turns
hangs into ``{"hang": true}``; this side only guards against the driver dying or wedging, by
restarting it and reporting the cases in flight as failures.

Every driver runs offline and out of harm's way: ``LITELLM_LOCAL_MODEL_COST_MAP=True``,
``PYTHONHASHSEED=0`` (set order in printed output is part of what is recorded),
``PYTHONDONTWRITEBYTECODE=1`` (never write ``__pycache__`` into a read-only checkout), and HOME
and the working directory in a private temporary directory.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from ..errors import RLMError

__all__ = ["DRIVER_PATH", "DriverError", "DriverProcess", "driver_environment"]

DRIVER_PATH = Path(__file__).with_name("driver.py")
_STDERR_TAIL = 4000


class DriverError(RLMError):
    """The driver could not be started, or stopped answering."""


def driver_environment(home: str, hash_seed: int = 0) -> dict[str, str]:
    """The environment every driver runs with (see the module docstring for why)."""
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


class DriverProcess:
    """One running driver: ``python driver.py`` with one backend loaded.

    ``start()`` returns the driver's self-description (implementation, version, Python, package
    versions, file hashes). ``run(kind, cases)`` returns one result per case, in order; if the
    driver dies or exceeds ``reply_limit`` seconds, it is killed and restarted and the cases of
    that request come back as ``{"id", "failure"}``.
    """

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
        self.python = os.path.abspath(python) if os.sep in python else (shutil.which(python) or python)
        self.backend = backend
        self.paths = [os.path.abspath(p) for p in paths]
        self.label = label
        self.step_limit = step_limit
        self.case_limit = case_limit
        self.startup_limit = startup_limit
        self.hash_seed = hash_seed
        self.info: dict[str, Any] = {}
        self._proc: subprocess.Popen[str] | None = None
        self._home: str | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr: list[str] = []

    # --- lifecycle ------------------------------------------------------------------------------

    def start(self) -> dict[str, Any]:
        """Launch the driver and load the backend; raises DriverError with its stderr on failure."""
        self._home = tempfile.mkdtemp(prefix="rlm-conformance-")
        try:
            self._proc = subprocess.Popen(
                [self.python, str(DRIVER_PATH)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                encoding="utf-8",
                cwd=self._home,
                env=driver_environment(self._home, self.hash_seed),
            )
        except OSError as exc:
            raise DriverError(f"cannot start {self.python}: {exc}") from None
        assert self._proc.stdout is not None and self._proc.stderr is not None
        self._lines = queue.Queue()
        self._stderr = []
        threading.Thread(target=self._pump, args=(self._proc.stdout, self._lines), daemon=True).start()
        threading.Thread(target=self._drain, args=(self._proc.stderr,), daemon=True).start()
        reply = self._request(
            {
                "op": "start",
                "backend": self.backend,
                "paths": self.paths,
                "label": self.label,
                "step_limit": self.step_limit,
                "case_limit": self.case_limit,
            },
            self.startup_limit,
        )
        self.info = reply
        return reply

    def stop(self) -> None:
        """Ask the driver to exit, then make sure it did; remove its private HOME."""
        proc, self._proc = self._proc, None
        if proc is not None:
            try:
                if proc.poll() is None and proc.stdin is not None:
                    proc.stdin.write(json.dumps({"op": "stop"}) + "\n")
                    proc.stdin.flush()
                proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait()
        if self._home is not None:
            shutil.rmtree(self._home, ignore_errors=True)
            self._home = None

    def __enter__(self) -> DriverProcess:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    # --- requests -------------------------------------------------------------------------------

    def run(self, kind: str, cases: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Results for ``cases`` (``{"id", "result"}`` or ``{"id", "failure"}``), in order."""
        if not cases:
            return []
        limit = self.startup_limit + len(cases) * self.case_limit
        try:
            reply = self._request({"op": "run", "kind": kind, "cases": list(cases)}, limit)
        except DriverError as exc:
            self.stop()
            self.start()
            return [{"id": c.get("id"), "failure": f"driver failed: {exc}"} for c in cases]
        results: list[dict[str, Any]] = reply["results"]
        return results

    def _request(self, message: dict[str, Any], limit: float) -> dict[str, Any]:
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise DriverError("driver is not running")
        try:
            proc.stdin.write(json.dumps(message, ensure_ascii=False) + "\n")
            proc.stdin.flush()
        except OSError as exc:
            raise DriverError(f"driver stopped reading: {exc}; stderr: {self.stderr_tail()}") from None
        try:
            line = self._lines.get(timeout=limit)
        except queue.Empty:
            proc.kill()
            raise DriverError(f"no reply within {limit:.0f}s; stderr: {self.stderr_tail()}") from None
        if line is None:
            proc.wait()
            raise DriverError(f"driver exited with status {proc.returncode}; stderr: {self.stderr_tail()}")
        reply: dict[str, Any] = json.loads(line)
        if not reply.get("ok"):
            raise DriverError(f"{reply.get('error')}\n{reply.get('traceback', '')}")
        return reply

    def stderr_tail(self) -> str:
        """The last few thousand characters the driver wrote to stderr (for error messages)."""
        return "".join(self._stderr)[-_STDERR_TAIL:]

    @staticmethod
    def _pump(stream: IO[str], lines: queue.Queue[str | None]) -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    def _drain(self, stream: IO[str]) -> None:
        for line in stream:
            self._stderr.append(line)
            if len(self._stderr) > 200:
                del self._stderr[:100]
