"""dspy.RLM's REPL cases: one long-lived Deno + Pyodide interpreter per driver, a fresh namespace a case.

Run as a script under a venv holding dspy 3.4.1: ``python dspy_cases.py --path RUNTIME``, where
RUNTIME is the offline Deno + Pyodide directory of ``rlm_compat.tools.conformance.dspy_runtime``. It
serves the implementation protocol (docs/protocol.md) like ``driver.py`` (whose :class:`Driver` it
uses; this module is not part of what a fixture recording hashes), with one difference in where a
case runs: not in a forked child each, because a dspy interpreter takes 5-15 s to start, but one
after another in one :class:`Pyodide` session. Between cases its namespace is reset through the
runner's own ``execute`` (``dspy_observer.py``); a case that leaves state the reset cannot undo,
hangs, or kills the interpreter is followed by a new interpreter.

Each step is what dspy.RLM does with one iteration's ``code`` field: ``_strip_code_fences``, then
``PythonInterpreter.execute(code, variables=inputs)`` with the case's env as the inputs (dspy.RLM
injects its inputs again before *every* iteration, as Python literals; a module in the env, such as
the ``re`` 2fb46cc's loop puts there, is no input but a name of the loop: it is imported under that
name once, before the first step), the result shown as dspy.RLM
shows it (a list one item a line, anything else ``str()``, nothing for a falsy value; ``SUBMIT``'s
value as ``FINAL: ...``), an exception as the error dspy reports (type from the sandbox, message as
dspy.RLM formats it for the model). dspy has no step timeout: a step still running after the case's
own timeout plus a second (and at least the runner's step limit) is recorded as a hang, and the
interpreter killed. The env after each step is read through ``execute`` as well.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
import platform
import sys
import threading
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

if not __package__:  # a script: driver.py, loaded by path, registers the package its siblings need
    import importlib.util

    _spec = importlib.util.spec_from_file_location(
        "_rlm_compat_dspy_boot", Path(__file__).with_name("driver.py")
    )
    assert _spec is not None and _spec.loader is not None
    _boot = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_boot)
    __package__ = _boot.standalone_package()

from . import values
from .case_isolation import Emit, Event
from .driver import Driver, serve
from .peer_backends import DspyBackend

__all__ = [
    "OBSERVE",
    "OWN_MODULES",
    "QUERY_LIMIT",
    "START_OBSERVER",
    "DspyCaseBackend",
    "DspyDriver",
    "Pyodide",
    "StepHang",
    "install_code",
    "main",
]

_HERE = Path(__file__).resolve().parent
_VALUES, _OBSERVER = "_rlm_compat_values", "_rlm_compat_dspy_observer"
OWN_MODULES = (_VALUES, _OBSERVER)
"""The modules sent into Pyodide (``values.py`` and ``dspy_observer.py``), by their name there."""
OBSERVE = f"__import__('sys').modules[{_OBSERVER!r}]"
"""An expression for the observer module inside Pyodide (it binds no name)."""
START_OBSERVER = (
    f"{OBSERVE}.__dict__.__setitem__('OBSERVER', {OBSERVE}.Observer(globals(), "
    f"__import__('sys').modules[{_VALUES!r}].encode, {OWN_MODULES!r}))"
)
"""One expression: the observer of the namespace as it is now (the state every case starts from)."""


def install_code() -> str:
    """One expression registering :data:`OWN_MODULES` from their sources (it binds no name)."""
    sources = [(_VALUES, _source("values.py")), (_OBSERVER, _source("dspy_observer.py"))]
    return (
        "(lambda sys, types, sources: [sys.modules.__setitem__(name, module) "
        "or exec(source, module.__dict__) for name, source in sources "
        "for module in [types.ModuleType(name)]] and None)"
        f"(__import__('sys'), __import__('types'), {sources!r})"
    )


QUERY_LIMIT = 60.0
"""Seconds an observer call or probe may take (an env of 200 items of 4,000 characters is < 1 s)."""
_PDEATHSIG = "import ctypes, os, sys; ctypes.CDLL(None).prctl(1, 9); os.execv(sys.argv[1], sys.argv[1:])"
"""Deno dies with this driver (PR_SET_PDEATHSIG = SIGKILL), so a killed driver leaves no spinning
Pyodide behind."""


class StepHang(Exception):
    """A step ran past its limit; the interpreter was killed."""


class Pyodide:
    """One dspy ``PythonInterpreter`` at a time, used from one thread, restarted when it must be.

    ``factory`` makes the interpreter (dspy's, with the offline Deno command). :meth:`fresh`
    gives the next case a clean namespace; :meth:`execute` runs one piece of code under a
    watchdog that kills Deno at the limit.
    """

    def __init__(self, factory: Callable[[], Any]) -> None:
        self.factory = factory
        self.interpreter: Any = None
        self.starts = 0
        self.restarts: dict[str, int] = {}
        self._expired = False
        errors = importlib.import_module("dspy.primitives.code_interpreter")
        self.execution_error: type[Exception] = errors.CodeExecutionError
        self.interpreter_error: type[Exception] = errors.CodeInterpreterError
        self.final_output: type[Any] = errors.FinalOutput

    def alive(self) -> bool:
        process = getattr(self.interpreter, "deno_process", None)
        return process is not None and process.poll() is None

    def ensure(self) -> Any:
        """The running interpreter, started (and its observer installed) if there is none."""
        if self.interpreter is not None and self.alive():
            return self.interpreter
        self.stop()
        interpreter = self.factory()
        interpreter.start()
        self.interpreter = interpreter
        self.starts += 1
        interpreter.execute(install_code())
        interpreter.execute(START_OBSERVER)
        return interpreter

    def restart(self, why: str) -> None:
        self.restarts[why] = self.restarts.get(why, 0) + 1
        print(f"dspy-cases: new interpreter: {why} (so far {self.restarts})", file=sys.stderr, flush=True)
        self.stop()

    def stop(self) -> None:
        interpreter, self.interpreter = self.interpreter, None
        if interpreter is not None:
            try:
                interpreter.shutdown()
            except Exception:
                process = getattr(interpreter, "deno_process", None)
                if process is not None:
                    process.kill()

    def fresh(self) -> None:
        """A clean namespace for the next case: reset, or a new interpreter if reset cannot."""
        if self.interpreter is not None and not self.alive():
            self.restart("the interpreter died")
        if self.interpreter is not None:
            try:
                leaks = json.loads(self.query(f"{OBSERVE}.OBSERVER.reset(globals())"))
            except StepHang:  # something the case left running (a scheduled task) holds it
                leaks = ["the interpreter did not answer the reset"]
            if leaks:
                print(f"dspy-cases: the case changed {leaks}", file=sys.stderr, flush=True)
                self.restart("state the reset cannot undo")
        self.ensure()

    def _expire(self, interpreter: Any) -> None:
        self._expired = True
        process = getattr(interpreter, "deno_process", None)
        if process is not None and process.poll() is None:
            process.kill()

    def execute(self, code: str, variables: dict[str, Any], limit: float) -> Any:
        """``execute(code, variables)``; StepHang past ``limit`` seconds (the interpreter killed)."""
        interpreter = self.ensure()
        self._expired = False
        watchdog = threading.Timer(limit, self._expire, args=(interpreter,))
        watchdog.start()
        result: Any = None
        try:
            result = interpreter.execute(code, variables=variables)
        except self.interpreter_error:
            if not self._expired:
                raise
        finally:
            watchdog.cancel()
        if self._expired:  # killed (or finished as the watchdog fired: that result is kept)
            self.restart(f"no answer within {limit:g} s")
            if result is None:
                raise StepHang
        return result

    def query(self, expression: str) -> Any:
        """The value of one expression that binds no name (observer calls, version probes);
        StepHang if it does not come within :data:`QUERY_LIMIT` seconds."""
        return self.execute(expression, {}, QUERY_LIMIT)

    def env(self) -> dict[str, Any]:
        decoded: dict[str, Any] = json.loads(self.query(f"{OBSERVE}.OBSERVER.env(globals())"))
        return decoded


def _source(name: str) -> str:
    return (_HERE / name).read_text(encoding="utf-8")


class DspyCaseBackend(DspyBackend):
    """dspy.RLM for REPL cases (and, as :class:`DspyBackend`, protocol 2's task message)."""

    kinds = frozenset({"repl"})

    def __init__(self, paths: list[str], label: str) -> None:
        super().__init__(paths, label)
        self.step_limit = 3.0
        rlm = importlib.import_module("dspy.predict.rlm")
        self.strip_fences: Callable[[str], str] = rlm._strip_code_fences
        self.format_error: Callable[[BaseException], str] = importlib.import_module(
            "dspy.utils.exceptions"
        ).format_error_for_lm
        self.pyodide = Pyodide(self._deno_factory())

    def _deno_factory(self) -> Callable[[], Any]:
        """dspy's interpreter with the offline Deno command, Deno tied to this process's life."""
        make = self._interpreter_factory()
        if not sys.platform.startswith("linux"):
            return make

        def factory() -> Any:
            interpreter = make()
            interpreter.deno_command = [sys.executable, "-c", _PDEATHSIG, *interpreter.deno_command]
            return interpreter

        return factory

    def info(self) -> dict[str, Any]:
        """The handshake: Pyodide's Python is the one whose fixtures apply (started here, so a
        runtime that cannot start is a handshake failure)."""
        probe = self.pyodide.query(
            "(lambda sys, pyodide: [sys.version.split()[0], sys.flags.hash_randomization, "
            "pyodide.__version__])(__import__('sys'), __import__('pyodide'))"
        )
        python, randomized, version = probe
        return {
            **self.describe(importlib.metadata.version("dspy"), ("dspy",)),
            "python": python,
            "driver_python": platform.python_version(),
            "pyodide": version,
            "hash_seed": "random" if randomized else "0",
            "compare": "semantic",
        }

    def repl(self, case: dict[str, Any], emit: Emit) -> None:
        self.pyodide.fresh()
        env = values.decode(case.get("env", {}))
        timeout = float(case.get("options", {}).get("timeout", 5))
        limit = max(self.step_limit, timeout + 1.0)
        modules = {k: v.__name__ for k, v in env.items() if isinstance(v, types.ModuleType)}
        if modules:  # the loop's own names (2fb46cc's ``re``), not data: imported once, as a user would
            imports = "\n".join(f"import {module} as {name}" for name, module in modules.items())
            self.pyodide.execute(imports, {}, limit)
        inputs = {k: v for k, v in env.items() if k not in modules}
        for text in case["steps"]:
            try:
                step = self._step(text, inputs, limit)
            except StepHang:
                emit({"step": {"hang": True}})
                return
            step["env"] = self.pyodide.env()
            emit({"step": step})

    def _step(self, text: str, inputs: dict[str, Any], limit: float) -> Event:
        try:
            code = self.strip_fences(text)
            result = self.pyodide.execute(code, dict(inputs), limit)
        except SyntaxError as exc:
            return self._error("SyntaxError", exc)
        except self.pyodide.execution_error as exc:
            return self._error(str(exc).split(":", 1)[0], exc)
        except self.pyodide.interpreter_error as exc:
            if not self.pyodide.alive():
                raise  # the interpreter died: the case fails, the next one starts a new one
            return self._error(type(exc).__name__, exc)  # refused before running (an input)
        return {"output": values.normalize_text(self.shown(result))}

    def _error(self, kind: str, exc: BaseException) -> Event:
        return {
            "error": {"type": kind, "message": values.normalize_text(f"[Error] {self.format_error(exc)}")}
        }

    def shown(self, result: Any) -> str:
        """What dspy.RLM puts in the REPL history for ``execute``'s result (its placeholder for
        an empty output, ``(no output - did you forget to print?)``, read as empty)."""
        if isinstance(result, self.pyodide.final_output):
            return f"FINAL: {result.output}"
        if isinstance(result, list):
            return "\n".join(map(str, result))
        return str(result) if result else ""

    def close(self) -> None:
        self.pyodide.stop()


class DspyDriver(Driver):
    """:class:`Driver`, each case run in this thread (dspy's interpreter belongs to the thread
    that first used it; the backend enforces the step limit itself)."""

    def __init__(self, backend: DspyCaseBackend) -> None:
        super().__init__(backend, fork=False)
        self.dspy = backend

    def _isolated(
        self, target: Callable[[Emit], None], case: dict[str, Any]
    ) -> tuple[list[Event], str | None]:
        self.dspy.step_limit = self.step_limit
        events: list[Event] = []
        try:
            target(events.append)
        except Exception as exc:
            return events, f"dspy interpreter failed: {type(exc).__name__}: {exc}"
        return events, None


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(description="Serve the rlm-compat conformance protocol for dspy.RLM.")
    parser.add_argument("--path", action="append", default=[], help="the offline Deno + Pyodide runtime")
    parser.add_argument("--label", default="", help="the version to report")
    args = parser.parse_args(argv)
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    backend = DspyCaseBackend(args.path, args.label)
    try:
        serve(DspyDriver(backend), sys.stdin, replies)
    finally:
        backend.close()


if __name__ == "__main__":
    main()
