"""Conformance driver: runs cases against one implementation, inside that implementation's Python.

The recorder and the subprocess adapters start this file as a script (``python driver.py``) under
another interpreter: upstream's venv with its checkout's ``src`` on ``sys.path``, or a venv holding
recursive-llm 0.5.0 or rlms 0.1.1. Nothing of rlm_compat is importable there, so this file uses only
the standard library plus ``values.py`` loaded by path, and runs on Python 3.10+.

Protocol: one JSON object per line on stdin, one reply per line on the original stdout (fd 1 is
pointed at stderr once started, so stray prints from the code under test cannot corrupt replies).

* ``{"op": "start", "backend": NAME, "paths": [...], "label": STR, "step_limit": S, "case_limit": S}``
  -> ``{"ok": true, "implementation", "version", "python", "packages", "files"}``
* ``{"op": "run", "kind": "repl"|"parser"|"loop", "cases": [input, ...]}``
  -> ``{"ok": true, "results": [{"id", "result"} | {"id", "failure"}, ...]}``
* ``{"op": "stop"}`` -> ``{"ok": true}``; any failure of the driver itself -> ``{"ok": false, "error"}``.

REPL and loop cases each run in a forked child with its own process group, so every case starts
from a fresh executor and module state, and a case that hangs (upstream never enforces its timeout)
is killed after ``step_limit`` seconds without an event and recorded as ``{"hang": true}``. Parser
cases are pure functions and run in the driver process, in batches.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import resource
import select
import signal
import sys
import threading
import time
import traceback
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

PROTOCOL_VERSION = 1
_MEMORY_HEADROOM = 2 << 30  # bytes of address space a case may add to the driver's own

Event = dict[str, Any]
Emit = Callable[[Event], None]


def _load_values() -> Any:
    """values.py, loaded by path (no package is importable in the implementation's venv)."""
    path = Path(__file__).with_name("values.py")
    spec = importlib.util.spec_from_file_location("_rlm_conformance_values", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


values: Any
if __package__:  # imported by rlm_compat's own adapters
    from . import values as _package_values

    values = _package_values
else:  # run as a script (or re-imported by a multiprocessing spawn child)
    values = _load_values()


def error_of(exc: BaseException, *, isa: bool = False) -> dict[str, Any]:
    """An exception as recorded: type name and message (addresses normalised).

    With ``isa``, also the names of every class in its MRO, so a comparison can accept a subclass
    of the recorded type (code that catches upstream's class still catches it).
    """
    out: dict[str, Any] = {"type": type(exc).__name__, "message": values.normalize_text(str(exc))}
    if isa:
        out["isa"] = [cls.__name__ for cls in type(exc).__mro__]
    return out


def encode_env(env: dict[str, Any]) -> dict[str, Any]:
    return {str(k): values.encode(v) for k, v in env.items() if k != "__builtins__"}


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _hash_tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*.py"))
        if "__pycache__" not in p.parts
    }


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


class _FakeChoiceMessage:
    def __init__(self, content: Any) -> None:
        self.content = content


def _fake_response(content: Any) -> Any:
    """The shape litellm returns that upstream reads: ``response.choices[0].message.content``."""
    message = _FakeChoiceMessage(content)
    return types.SimpleNamespace(choices=[types.SimpleNamespace(message=message)])


class ScriptedModel:
    """An async stand-in for ``litellm.acompletion`` answering from a script and reporting calls."""

    def __init__(self, replies: list[Any], emit: Emit) -> None:
        self._replies = list(replies)
        self._emit = emit
        self._lock = threading.Lock()
        self.calls = 0

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            self.calls += 1
            number = self.calls
            call: Event = {
                "model": values.encode(kwargs.pop("model", None)),
                "messages": values.encode(kwargs.pop("messages", None)),
                "kwargs": values.encode(kwargs),
            }
            if args:
                call["args"] = values.encode(list(args))
            self._emit({"call": call})
            if number > len(self._replies):
                raise RuntimeError(
                    f"scripted model has no reply left: call {number}, {len(self._replies)} scripted"
                )
            return _fake_response(self._replies[number - 1])


def run_executor_case(
    factory: Callable[..., Any], case: dict[str, Any], emit: Emit, *, isa: bool = False
) -> None:
    """A REPL case through an upstream-shaped executor: ``factory(**options).execute(code, env)``.

    Shared by the driver (upstream, recursive-llm 0.5.0) and rlm_compat's in-process adapter, so
    every implementation's steps are recorded by the same code.
    """
    env = values.decode(case.get("env", {}))
    try:
        executor = factory(**case.get("options", {}))
    except Exception as exc:  # an implementation may refuse an option upstream accepts
        emit({"step": {"error": error_of(exc, isa=isa), "env": encode_env(env)}})
        return
    for code in case["steps"]:
        step: Event
        try:
            step = {"output": values.normalize_text(executor.execute(code, env))}
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # recorded, whatever the implementation lets escape
            step = {"error": error_of(exc, isa=isa)}
        step["env"] = encode_env(env)
        emit({"step": step})


# --- backends -----------------------------------------------------------------------------------


class Backend:
    """One implementation's entry points; subclasses fill in what the implementation has."""

    kinds: frozenset[str] = frozenset()
    implementation = "?"

    def __init__(self, paths: list[str], label: str) -> None:
        for path in reversed(paths):
            sys.path.insert(0, path)
        self.label = label

    def info(self) -> dict[str, Any]:
        raise NotImplementedError

    def repl(self, case: dict[str, Any], emit: Emit) -> None:
        raise NotImplementedError

    def parser(self, case: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def loop(self, case: dict[str, Any], emit: Emit) -> None:
        raise NotImplementedError


def _call_each(functions: dict[str, Callable[[], Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, fn in functions.items():
        try:
            out[name] = values.encode(fn())
        except Exception as exc:
            out[name] = {"$error": error_of(exc)}
    return out


class _ExecutorBackend(Backend):
    """Implementations with upstream's ``REPLExecutor(...).execute(code, env)`` and ``rlm.parser``."""

    kinds = frozenset({"repl", "parser"})

    def __init__(self, paths: list[str], label: str) -> None:
        super().__init__(paths, label)
        self.repl_module = importlib.import_module("rlm.repl")
        self.parser_module = importlib.import_module("rlm.parser")

    def repl(self, case: dict[str, Any], emit: Emit) -> None:
        run_executor_case(self.repl_module.REPLExecutor, case, emit)

    def parser(self, case: dict[str, Any]) -> dict[str, Any]:
        p = self.parser_module
        response = case["response"]
        env = values.decode(case.get("env", {}))
        return _call_each(
            {
                "extract_final": lambda: p.extract_final(response),
                "extract_final_var": lambda: p.extract_final_var(response, env),
                "is_final": lambda: p.is_final(response),
                "parse_response": lambda: p.parse_response(response, env),
            }
        )


class YszBackend(_ExecutorBackend):
    """A ysz/recursive-llm checkout (``paths`` = its ``src``): REPL, parser and the loop."""

    kinds = frozenset({"repl", "parser", "loop"})
    implementation = "ysz/recursive-llm"

    def __init__(self, paths: list[str], label: str) -> None:
        super().__init__(paths, label)
        self.package = importlib.import_module("rlm")
        self.core = importlib.import_module("rlm.core")

    def info(self) -> dict[str, Any]:
        root = Path(str(self.package.__file__)).parent
        return {
            "implementation": self.implementation,
            "version": self.label,
            "packages": {d: _version(d) for d in ("RestrictedPython", "litellm")},
            "files": _hash_tree(root),
        }

    def loop(self, case: dict[str, Any], emit: Emit) -> None:
        options = dict(case.get("options", {}))
        call = options.pop("call", "acompletion")
        options.pop("prompt_version", None)
        call_kwargs = options.pop("call_kwargs", {})
        llm_kwargs = options.pop("llm_kwargs", {})
        model = ScriptedModel(case["replies"], emit)
        self.core.litellm.acompletion = model
        end: Event = {}
        rlm = None
        try:
            rlm = self.package.RLM(**{"model": "test-model", **options, **llm_kwargs})
            method = getattr(rlm, call)
            args = [case.get("query", "")]
            if "context" in case:
                args.append(case["context"])
            if asyncio.iscoroutinefunction(method):
                answer = asyncio.run(method(*args, **call_kwargs))
            else:
                answer = method(*args, **call_kwargs)
            end["answer"] = values.encode(answer)
        except BaseException as exc:
            end["error"] = error_of(exc)
        if rlm is not None:
            end["stats"] = values.encode(rlm.stats)
        emit({"end": end})


class RecursiveLLM050Backend(_ExecutorBackend):
    """recursive-llm 0.5.0 from PyPI (same ``rlm`` import name and REPL / parser signatures)."""

    implementation = "recursive-llm"

    def info(self) -> dict[str, Any]:
        return {
            "implementation": self.implementation,
            "version": _version("recursive-llm"),
            "packages": {d: _version(d) for d in ("recursive-llm", "RestrictedPython", "litellm")},
            "files": {},
        }


class RlmsBackend(Backend):
    """rlms (alexzhang13/rlm) from PyPI: ``LocalREPL.execute_code`` and ``find_final_answer``."""

    kinds = frozenset({"repl", "parser"})
    implementation = "rlms"

    def __init__(self, paths: list[str], label: str) -> None:
        super().__init__(paths, label)
        self.local_repl = importlib.import_module("rlm.environments.local_repl")
        self.parsing = importlib.import_module("rlm.utils.parsing")

    def info(self) -> dict[str, Any]:
        return {
            "implementation": self.implementation,
            "version": _version("rlms"),
            "packages": {"rlms": _version("rlms")},
            "files": {},
        }

    def _new_repl(self, env: dict[str, Any]) -> Any:
        repl = self.local_repl.LocalREPL()
        repl.locals.update(env)
        return repl

    def repl(self, case: dict[str, Any], emit: Emit) -> None:
        repl = self._new_repl(values.decode(case.get("env", {})))
        for text in case["steps"]:
            blocks = self.parsing.find_code_blocks(text) if "```" in text else [text]
            stdout, error = [], None
            for code in blocks:
                result = repl.execute_code(code)
                stdout.append(result.stdout)
                error = error or _rlms_exception(result.stderr)
            step: Event = {"output": "".join(stdout).strip()}
            if error is not None:
                step = {"error": error}
            step["env"] = encode_env(repl.locals)
            emit({"step": step})

    def parser(self, case: dict[str, Any]) -> dict[str, Any]:
        env = values.decode(case.get("env", {}))
        return _call_each(
            {
                "find_final_answer": lambda: self.parsing.find_final_answer(
                    case["response"], environment=self._new_repl(env)
                ),
            }
        )


def _rlms_exception(stderr: str) -> dict[str, str] | None:
    """rlms appends ``"\\n{type}: {message}"`` to stderr when the code raised; recover it."""
    if not stderr.strip():
        return None
    last = stderr.rstrip("\n").rsplit("\n", 1)[-1]
    kind, sep, message = last.partition(": ")
    if sep and kind.isidentifier():
        return {"type": kind, "message": values.normalize_text(message)}
    return {"type": "stderr", "message": values.normalize_text(stderr.strip())}


BACKENDS: dict[str, type[Backend]] = {
    "ysz": YszBackend,
    "recursive-llm-0.5": RecursiveLLM050Backend,
    "rlms": RlmsBackend,
}


# --- isolation ----------------------------------------------------------------------------------


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


# --- protocol -----------------------------------------------------------------------------------


class Driver:
    """The protocol state: one backend, started once, serving many run requests."""

    def __init__(self) -> None:
        self.backend: Backend | None = None
        self.step_limit = 5.0
        self.case_limit = 60.0

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        if op == "start":
            return self._start(request)
        if op == "run":
            return self._run(request)
        if op == "stop":
            return {"ok": True}
        raise ValueError(f"unknown op {op!r}")

    def _start(self, request: dict[str, Any]) -> dict[str, Any]:
        name = request["backend"]
        if name not in BACKENDS:
            raise ValueError(f"unknown backend {name!r}; known: {sorted(BACKENDS)}")
        self.step_limit = float(request.get("step_limit", self.step_limit))
        self.case_limit = float(request.get("case_limit", self.case_limit))
        self.backend = BACKENDS[name](list(request.get("paths", [])), str(request.get("label", "")))
        return {
            "ok": True,
            "protocol": PROTOCOL_VERSION,
            "python": platform.python_version(),
            "kinds": sorted(self.backend.kinds),
            **self.backend.info(),
        }

    def _run(self, request: dict[str, Any]) -> dict[str, Any]:
        backend = self.backend
        if backend is None:
            raise RuntimeError("run before start")
        kind = request["kind"]
        if kind not in backend.kinds:
            raise ValueError(f"backend has no {kind!r} entry point")
        results = []
        for case in request["cases"]:
            results.append({"id": case.get("id"), **self._one(backend, kind, case)})
        return {"ok": True, "results": results}

    def _one(self, backend: Backend, kind: str, case: dict[str, Any]) -> dict[str, Any]:
        if kind == "parser":
            try:
                return {"result": backend.parser(case)}
            except Exception as exc:
                return {"failure": f"{type(exc).__name__}: {exc}"}
        if kind == "repl":
            events, failure = run_forked(
                lambda emit: backend.repl(case, emit), self.step_limit, self.case_limit
            )
            result = assemble_repl(events, failure)
        else:
            events, failure = run_forked(
                lambda emit: backend.loop(case, emit), self.step_limit, self.case_limit
            )
            result = assemble_loop(events, failure)
        if "failure" in result:
            return {"failure": result["failure"], "partial": result}
        return {"result": result}


def serve(requests: Any, replies: Any) -> None:
    """Answer requests until ``stop`` or end of input."""
    driver = Driver()
    for line in requests:
        if not line.strip():
            continue
        request: dict[str, Any] = {}
        try:
            request = json.loads(line)
            reply = driver.handle(request)
        except Exception as exc:
            reply = {
                "ok": False,
                "error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc(limit=8),
            }
        replies.write(json.dumps(reply, ensure_ascii=False, allow_nan=False) + "\n")
        replies.flush()
        if request.get("op") == "stop":
            break


def main() -> None:
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    serve(sys.stdin, replies)


if __name__ == "__main__":
    main()
