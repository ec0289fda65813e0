"""The CPython reference executor: what profile ``fixed`` promises, run as plain Python.

Profile fixed promises "plain Python in one namespace, minus what is unsafe". This module is
that promise with nothing taken away: one dict as the namespace (functions, comprehensions and
classes all see it), ``print`` captured, the last top-level expression statement shown once with
``str()`` (nothing for ``None``), every runnable fenced block of a response run in order, errors
reported as ``Execution error: {Type}: {message} (line N)`` — the rules of docs/repl.md, written
again independently of the sandbox so the two can be compared. Whatever fixed does differently
must be a registered restriction (``reference_fixtures/restrictions.toml``).

It runs under every supported Python as a script, with nothing of rlm_compat importable
(``python reference.py`` reads cases as JSON lines on stdin and writes results on stdout), so it
uses only the standard library plus ``values.py`` loaded by path, like the conformance driver.
Each case runs in a forked child: a fresh interpreter state per case, a step timeout by
``SIGALRM`` and a hard kill for what a signal cannot stop.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import io
import json
import os
import re
import resource
import select
import signal
import sys
import textwrap
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

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
_RUN_TAGS = frozenset({"", "python", "py", "python3", "py3", "repl"})
_OPEN = re.compile(r"^([ \t]{0,3})(`{3,}|~{3,})[ \t]*([^\s`]*)[^`]*$")
_MEMORY_HEADROOM = 2 << 30
_KILL_GRACE = 5.0


def _load_values() -> Any:
    path = Path(__file__).with_name("values.py")
    spec = importlib.util.spec_from_file_location("_rlm_reference_values", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


values: Any
if __package__:
    from . import values as _package_values

    values = _package_values
else:
    values = _load_values()


# --- fences (docs/repl.md: every runnable fenced block, in order; no fence: the whole text) ------


def extract(text: str) -> tuple[str, list[tuple[int, int]], int]:
    """The code of a response, and per code line ``(block, line in block)``, and the block count."""
    lines = text.split("\n")
    blocks: list[str] = []
    seen = False
    i = 0
    while i < len(lines):
        m = _OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        seen = True
        indent, marker, tag = m.group(1), m.group(2), m.group(3).lower()
        close = re.compile(rf"^[ \t]*{re.escape(marker[0])}{{{len(marker)},}}[ \t]*$")
        body: list[str] = []
        i += 1
        while i < len(lines) and not close.match(lines[i]):
            body.append(lines[i])
            i += 1
        i += 1
        if tag in _RUN_TAGS:
            block = "\n".join(body)
            blocks.append(textwrap.dedent(block) if indent else block)
    if not seen:
        return text, [], 1
    line_map = [(n, k) for n, block in enumerate(blocks, 1) for k in range(1, block.count("\n") + 2)]
    return "\n".join(blocks), line_map, len(blocks)


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
            where = _where(_user_line(exc.__traceback__), line_map, blocks)
            raise ReferenceTimeout(
                f"Execution error: TimeoutError: execution exceeded the {self.timeout:g} s timeout{where}"
            ) from None
        except BaseException as exc:  # everything the code raised is reported
            try:
                message = str(exc)
            except BaseException as inner:
                message = f"<unprintable {type(exc).__name__}: str() raised {type(inner).__name__}>"
            line = _user_line(exc.__traceback__)
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


def _user_line(tb: TracebackType | None) -> int | None:
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == FILENAME:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _where(line: int | None, line_map: list[tuple[int, int]], blocks: int) -> str:
    if line is None:
        return ""
    if line_map and 0 < line <= len(line_map):
        block, in_block = line_map[line - 1]
        return f" (line {in_block})" if blocks == 1 else f" (line {in_block} of code block {block})"
    return f" (line {line})"


def _error(name: str, message: str, line: int | None, line_map: list[tuple[int, int]], blocks: int) -> str:
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


def _run_forked(case: dict[str, Any], wall_limit: float) -> dict[str, Any]:
    """One case in a forked child; a child that outlives ``wall_limit`` is killed (a hang)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(read_fd)
        code = 0
        try:
            _, hard = resource.getrlimit(resource.RLIMIT_AS)
            usage = _address_space()
            if usage:
                limit = usage + _MEMORY_HEADROOM
                resource.setrlimit(resource.RLIMIT_AS, (limit if hard < 0 else min(limit, hard), hard))
            out = os.fdopen(write_fd, "w", encoding="utf-8")

            def emit(event: dict[str, Any]) -> None:
                out.write(json.dumps(event, ensure_ascii=False, allow_nan=False) + "\n")
                out.flush()

            run_case(case, emit)
        except BaseException:
            traceback.print_exc()
            code = 1
        finally:
            os._exit(code)
    os.close(write_fd)
    steps: list[dict[str, Any]] = []
    buffer = b""
    deadline = time.monotonic() + wall_limit
    hang = False
    with os.fdopen(read_fd, "rb") as pipe:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                hang = True
                os.kill(pid, signal.SIGKILL)
                break
            ready, _, _ = select.select([pipe], [], [], left)
            if not ready:
                continue
            chunk = os.read(pipe.fileno(), 1 << 16)
            if not chunk:
                break
            buffer += chunk
    os.waitpid(pid, 0)
    for line in buffer.decode("utf-8").split("\n"):
        if line.strip():
            steps.append(json.loads(line)["step"])
    result: dict[str, Any] = {"steps": steps}
    if hang:
        result["hang"] = True
    elif len(steps) < len(case["steps"]):
        result["crash"] = True
    return result


def _address_space() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def main() -> None:
    """Script mode: REPL cases as JSON lines on stdin, ``{"id", "expected"}`` lines on stdout.

    Results go to the original stdout; fd 1 is pointed at stderr first, so nothing the cases
    write at the C level can corrupt them.
    """
    results = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    lines = sys.stdin.read().split("\n")  # all of it now: a case's input() must not eat the rest
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    for line in lines:
        if not line.strip():
            continue
        case = json.loads(line)
        steps = len(case["steps"])
        timeout = float(case.get("options", {}).get("timeout", 5.0))
        result = _run_forked(case, wall_limit=steps * (timeout + _KILL_GRACE))
        results.write(json.dumps({"id": case["id"], "expected": result}, sort_keys=True) + "\n")
        results.flush()


if __name__ == "__main__":
    main()
