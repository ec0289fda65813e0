"""The CPython reference executor: what profile ``fixed`` promises, run as plain Python.

Profile fixed promises "plain Python in one namespace, minus what is unsafe". This module is
that promise with nothing taken away: one dict as the namespace (functions, comprehensions and
classes all see it), ``print`` captured, the last top-level expression statement shown once with
``str()`` (nothing for ``None``), every runnable fenced block of a response run in order, errors
reported as ``Execution error: {Type}: {message} (line N)`` — the rules of docs/repl.md, written
again independently of the sandbox so the two can be compared (only the fence rules and the
``line N of code block M`` wording are shared, from ``rlm_compat/fences.py``: they decide which
code runs and how a line is named, not how it behaves). Whatever fixed does differently must be a
registered restriction (``reference_fixtures/restrictions.toml``).

It is one more implementation of the conformance registry (``cpython-reference``), served by
``driver.py --backend cpython-reference`` under every supported Python with nothing of rlm_compat
importable, so it uses only the standard library plus ``values.py`` and ``rlm_compat/fences.py``
(loaded by path there, through the driver's ``standalone_package``). The driver runs each case in
a forked child: a fresh interpreter state per case, an address-space limit and a hard kill for
what the step's ``SIGALRM`` cannot stop.
"""

from __future__ import annotations

import ast
import contextlib
import io
import re
import signal
from collections.abc import Callable
from typing import Any

from ... import fences
from . import values

__all__ = [
    "NO_CODE",
    "NO_OUTPUT",
    "ReferenceExecutor",
    "ReferenceStepError",
    "ReferenceTimeout",
    "extract",
    "run_case",
]

NO_CODE = "No code to execute"
NO_OUTPUT = "Code executed successfully (no output)"
FILENAME = "<reference-repl>"


def extract(text: str) -> tuple[str, tuple[tuple[int, int], ...], int]:
    """The code of a response, per code line ``(block, line in block)``, and the block count
    (docs/repl.md: every runnable fenced block, in order; no fence: the whole text)."""
    return fences.extract_code(text, fences.MARKDOWN)


# --- one executor ----------------------------------------------------------------------------------


class ReferenceStepError(Exception):
    """A step failed; the message is the observation text (``Execution error: ...``)."""


class ReferenceTimeout(ReferenceStepError):
    """A step ran past its timeout."""


class _Alarm(BaseException):
    """Raised by SIGALRM at the step deadline (a BaseException, as the sandbox's signal)."""


class ReferenceExecutor:
    """``execute(code, env)`` as plain CPython, with the observation rules of docs/repl.md."""

    def __init__(self, timeout: float = 5.0, max_output_chars: int = 2000, **_: Any) -> None:
        self.timeout = float(timeout)
        self.max_output_chars = int(max_output_chars)

    def execute(self, code: str, env: dict[str, Any]) -> str:
        source, line_map, blocks = extract(code)
        if not source.strip():
            return NO_CODE
        try:
            tree = ast.parse(source, FILENAME, "exec")
            body, last = _split(tree)
            compiled = compile(body, FILENAME, "exec", dont_inherit=True)
            shown = compile(last, FILENAME, "eval", dont_inherit=True) if last is not None else None
        except SyntaxError as exc:
            raise ReferenceStepError(
                _error(type(exc).__name__, exc.msg, exc.lineno, line_map, blocks)
            ) from None
        except ValueError as exc:  # null bytes
            raise ReferenceStepError(f"Execution error: ValueError: {exc}") from None
        out = io.StringIO()
        env["__builtins__"] = _builtins()
        try:
            with contextlib.redirect_stdout(out), _deadline(self.timeout):
                exec(compiled, env)
                if shown is not None:
                    value = eval(shown, env)
                    if value is not None:
                        print(str(value))
        except _Alarm as exc:
            where = _where(fences.traceback_line(exc.__traceback__, FILENAME), line_map, blocks)
            raise ReferenceTimeout(
                f"Execution error: TimeoutError: execution exceeded the {self.timeout:g} s timeout{where}"
            ) from None
        except BaseException as exc:  # everything the code raised is reported
            try:
                message = str(exc)
            except BaseException as inner:
                message = f"<unprintable {type(exc).__name__}: str() raised {type(inner).__name__}>"
            line = fences.traceback_line(exc.__traceback__, FILENAME)
            raise ReferenceStepError(_error(type(exc).__name__, message, line, line_map, blocks)) from None
        finally:
            env.pop("__builtins__", None)
        text = out.getvalue()
        if not text:
            return NO_OUTPUT
        if len(text) > self.max_output_chars:
            limit = self.max_output_chars
            return f"{text[:limit]}\n\n[Output truncated: {len(text)} chars total, showing first {limit}]"
        return text.strip()


def _builtins() -> dict[str, Any]:
    """Python's builtins plus the names docs/repl.md says every step sees without an import
    (2fb46cc's injected ``re``, ``json``, ``math``, ``datetime``, ``timedelta``, ``Counter``,
    ``defaultdict``)."""
    import builtins
    import collections
    import datetime
    import json as json_module
    import math

    names = dict(vars(builtins))
    names["__name__"] = "__main__"  # as in a REPL: `if __name__ == '__main__':` runs
    names.update(
        re=re,
        json=json_module,
        math=math,
        datetime=datetime.datetime,
        timedelta=datetime.timedelta,
        Counter=collections.Counter,
        defaultdict=collections.defaultdict,
    )
    return names


def _split(tree: ast.Module) -> tuple[ast.Module, ast.Expression | None]:
    """The program without its last expression statement, and that expression (to show)."""
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = tree.body.pop()
        body = tree
        if tree.body and isinstance(tree.body[0], ast.Expr) and isinstance(tree.body[0].value, ast.Constant):
            tree.body.insert(0, ast.copy_location(ast.Pass(), tree.body[0]))  # no module docstring
        assert isinstance(last, ast.Expr)
        return body, ast.Expression(last.value)
    if tree.body and isinstance(tree.body[0], ast.Expr) and isinstance(tree.body[0].value, ast.Constant):
        tree.body.insert(0, ast.copy_location(ast.Pass(), tree.body[0]))
    return tree, None


def _where(line: int | None, line_map: tuple[tuple[int, int], ...], blocks: int) -> str:
    where = fences.describe_line(line, line_map, blocks)
    return f" ({where})" if where else ""


def _error(
    name: str, message: str, line: int | None, line_map: tuple[tuple[int, int], ...], blocks: int
) -> str:
    text = f"{name}: {message}" if message else name
    return f"Execution error: {text}{_where(line, line_map, blocks)}"


@contextlib.contextmanager
def _deadline(seconds: float) -> Any:
    """SIGALRM at the deadline, then every 50 ms (code may swallow one), until the step ends."""
    if not (0 < seconds < float("inf")) or not hasattr(signal, "setitimer"):
        yield
        return

    def ring(signum: int, frame: Any) -> None:
        raise _Alarm

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds, 0.05)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# --- cases -----------------------------------------------------------------------------------------

Emit = Callable[[dict[str, Any]], None]


def _encode_env(env: dict[str, Any]) -> dict[str, Any]:
    """Variables only: the namespace's own special names (``__annotations__``...) are not."""
    return {
        str(k): values.encode(v)
        for k, v in env.items()
        if not (isinstance(k, str) and k.startswith("__") and k.endswith("__"))
    }


def run_case(case: dict[str, Any], emit: Emit) -> None:
    """Every step of one REPL case, each reported as ``{"step": {output|error, env}}``."""
    env = values.decode(case.get("env", {}))
    executor = ReferenceExecutor(**case.get("options", {}))
    for code in case["steps"]:
        step: dict[str, Any]
        try:
            step = {"output": values.normalize_text(executor.execute(code, env))}
        except ReferenceStepError as exc:
            kind = "REPLTimeoutError" if isinstance(exc, ReferenceTimeout) else "REPLError"
            step = {"error": {"type": kind, "message": values.normalize_text(str(exc))}}
        step["env"] = _encode_env(env)
        emit({"step": step})
