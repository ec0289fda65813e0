"""Conformance driver: serves the implementation protocol for one implementation, in its Python.

This is the reference implementation of the protocol published in docs/protocol.md (JSON lines:
case messages on stdin, result messages on stdout; schema in ``schemas/protocol.schema.json``).
Two ways in, one code path:

* as a script, ``python driver.py --backend NAME [--path DIR]... [--label TEXT]``, under another
  interpreter: upstream's venv with its checkout's ``src`` on ``sys.path``, or a venv holding
  recursive-llm 0.5.0 or rlms 0.1.1. Nothing of rlm_compat is importable there, so this file uses
  only the standard library plus ``values.py`` loaded by path, and runs on Python 3.10+. Fd 1 is
  pointed at stderr once started, so stray prints of the code under test cannot corrupt replies.
* in process, by rlm_compat's own adapter: the same :class:`Driver` with rlm_compat's backend,
  its replies handed back without a pipe.

REPL and loop cases each run in a forked child with its own process group (script mode), so every
case starts from a fresh executor and module state, and a case that hangs (upstream never enforces
its timeout) is killed after ``step_limit`` seconds without an event and recorded as
``{"hang": true}``. In process, a case runs in a helper thread under a generous deadline: rlm_compat
enforces its own timeouts, so a missed deadline is a failure, not a recorded hang. Parser cases are
pure functions and run directly.
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
import unittest.mock
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

PROTOCOL_VERSION = 1
"""The protocol version the conformance runner speaks (docs/protocol.md): cases only."""
TASK_PROTOCOL_VERSION = 2
"""Version 2 = version 1 plus the ``task`` message (a whole task through the implementation's own
loop, against a model endpoint). This driver answers a hello of either version with that version."""
SUPPORTED_PROTOCOLS = (PROTOCOL_VERSION, TASK_PROTOCOL_VERSION)
_MEMORY_HEADROOM = 2 << 30  # bytes of address space a case may add to the driver's own

Event = dict[str, Any]
Emit = Callable[[Event], None]


def load_sibling(relative: str) -> Any:
    """A module of rlm_compat loaded by path, relative to this file (nothing of the package is
    importable in an implementation's venv). It is registered as ``_rlm_conformance_<stem>`` in
    ``sys.modules``, the name a by-path module imports its by-path siblings under."""
    path = (Path(__file__).parent / relative).resolve()
    name = f"_rlm_conformance_{path.stem}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
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
    values = load_sibling("values.py")


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

    Shared by every backend with upstream's executor shape (upstream, recursive-llm 0.5.0 and
    rlm_compat in process), so every implementation's steps are recorded by the same code.
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


NewRLM = Callable[[dict[str, Any], Any], Any]
"""Builds an RLM from the case's keyword arguments and its ``prompt_version`` (or None)."""


def run_loop_case(core: Any, new_rlm: NewRLM, case: dict[str, Any], emit: Emit, *, isa: bool = False) -> None:
    """A loop case through an upstream-shaped ``RLM``, its model calls answered from the script.

    ``core`` is the module whose ``litellm.acompletion`` the RLM calls (upstream's ``rlm.core``,
    rlm_compat's ``rlm_compat.core``); it is patched with :class:`ScriptedModel` for the case.
    Shared by upstream's backend and rlm_compat's in-process one, so the loop code exists once.
    """
    options = dict(case.get("options", {}))
    call = options.pop("call", "acompletion")
    prompt_version = options.pop("prompt_version", None)
    call_kwargs = options.pop("call_kwargs", {})
    llm_kwargs = options.pop("llm_kwargs", {})
    model = ScriptedModel(case["replies"], emit)
    end: Event = {}
    rlm = None
    with unittest.mock.patch.object(core.litellm, "acompletion", model):
        try:
            rlm = new_rlm({"model": "test-model", **options, **llm_kwargs}, prompt_version)
            method = getattr(rlm, call)
            args = [case.get("query", "")]
            if "context" in case:
                args.append(case["context"])
            if asyncio.iscoroutinefunction(method):
                answer = asyncio.run(method(*args, **call_kwargs))
            else:
                answer = method(*args, **call_kwargs)
            end["answer"] = values.encode(answer)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            end["error"] = error_of(exc, isa=isa)
    if rlm is not None:
        end["stats"] = values.encode(rlm.stats)
    emit({"end": end})


def run_parser_functions(parser: Any, case: dict[str, Any]) -> dict[str, Any]:
    """Upstream's four ``rlm.parser`` functions on the case's response (shared like the above)."""
    response = case["response"]
    env = values.decode(case.get("env", {}))
    functions: dict[str, Callable[[], Any]] = {
        "extract_final": lambda: parser.extract_final(response),
        "extract_final_var": lambda: parser.extract_final_var(response, env),
        "is_final": lambda: parser.is_final(response),
        "parse_response": lambda: parser.parse_response(response, env),
    }
    return _call_each(functions)


def _call_each(functions: Mapping[str, Callable[[], Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, fn in functions.items():
        try:
            out[name] = values.encode(fn())
        except Exception as exc:
            out[name] = {"$error": error_of(exc)}
    return out


# --- backends -----------------------------------------------------------------------------------


class Backend:
    """One implementation's entry points; subclasses fill in what the implementation has.

    ``info()`` goes into the handshake reply: at least ``implementation`` and ``version``;
    ``sandbox`` says whether model code runs confined (without it, the runner never sends a
    REPL case that touches the host).
    """

    kinds: frozenset[str] = frozenset()
    implementation = "?"

    def info(self) -> dict[str, Any]:
        raise NotImplementedError

    def repl(self, case: dict[str, Any], emit: Emit) -> None:
        raise NotImplementedError

    def parser(self, case: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def loop(self, case: dict[str, Any], emit: Emit) -> None:
        raise NotImplementedError

    def task(self, task: dict[str, Any], context: str) -> dict[str, Any]:
        """Protocol 2: run ``task["query"]`` over ``context`` through the implementation's own
        loop against ``task["model"]`` at ``task["api_base"]``; the ``task-result`` fields."""
        raise NotImplementedError(f"{self.implementation} has no task entry point in this driver")


def task_outcome(
    answer: Any, stats: Mapping[str, Any], *, iterations_key: str = "iterations"
) -> dict[str, Any]:
    """The ``task-result`` fields from an answer and an implementation's own stats mapping."""

    def number(key: str) -> Any:
        value = stats.get(key)
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    return {
        "answer": None if answer is None else str(answer),
        "iterations": number(iterations_key),
        "calls": number("llm_calls"),
        "prompt_tokens": number("prompt_tokens"),
        "completion_tokens": number("completion_tokens"),
        "cost_usd": number("estimated_cost_usd"),
    }


class _ImportedBackend(Backend):
    """A backend importing the implementation from ``paths`` (put first on ``sys.path``)."""

    def __init__(self, paths: list[str], label: str) -> None:
        for path in reversed(paths):
            sys.path.insert(0, path)
        self.label = label


class _ExecutorBackend(_ImportedBackend):
    """Implementations with upstream's ``REPLExecutor(...).execute(code, env)`` and ``rlm.parser``."""

    kinds = frozenset({"repl", "parser"})

    def __init__(self, paths: list[str], label: str) -> None:
        super().__init__(paths, label)
        self.repl_module = importlib.import_module("rlm.repl")
        self.parser_module = importlib.import_module("rlm.parser")

    def repl(self, case: dict[str, Any], emit: Emit) -> None:
        run_executor_case(self.repl_module.REPLExecutor, case, emit)

    def parser(self, case: dict[str, Any]) -> dict[str, Any]:
        return run_parser_functions(self.parser_module, case)


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
            "sandbox": True,
            "packages": {d: _version(d) for d in ("RestrictedPython", "litellm")},
            "files": _hash_tree(root),
        }

    def loop(self, case: dict[str, Any], emit: Emit) -> None:
        run_loop_case(self.core, lambda kwargs, _prompt_version: self.package.RLM(**kwargs), case, emit)

    def task(self, task: dict[str, Any], context: str) -> dict[str, Any]:
        rlm = self.package.RLM(
            model=task["model"],
            api_base=task.get("api_base"),
            api_key=task.get("api_key"),
            max_iterations=int(task.get("max_iterations", 30)),
        )
        try:
            answer = rlm.completion(task["query"], context)
        except Exception as exc:
            return {**task_outcome(None, rlm.stats), "error": error_of(exc)}
        return task_outcome(answer, rlm.stats)


class RecursiveLLM050Backend(_ExecutorBackend):
    """recursive-llm 0.5.0 from PyPI (same ``rlm`` import name and REPL / parser signatures)."""

    implementation = "recursive-llm"

    def task(self, task: dict[str, Any], context: str) -> dict[str, Any]:
        package = importlib.import_module("rlm")
        rlm = package.RLM(
            model=task["model"],
            api_base=task.get("api_base"),
            api_key=task.get("api_key"),
            max_iterations=int(task.get("max_iterations", 30)),
        )
        try:
            result = rlm.complete_result(task["query"], context)
        except Exception as exc:
            stats = getattr(exc, "stats", None) or {}
            return {**task_outcome(None, stats, iterations_key="total_iterations"), "error": error_of(exc)}
        return task_outcome(result.answer, result.stats, iterations_key="total_iterations")

    def info(self) -> dict[str, Any]:
        return {
            "implementation": self.implementation,
            "version": _version("recursive-llm"),
            "sandbox": True,
            "packages": {d: _version(d) for d in ("recursive-llm", "RestrictedPython", "litellm")},
            "files": {},
        }


class RlmsBackend(_ImportedBackend):
    """rlms (alexzhang13/rlm) from PyPI: ``LocalREPL.execute_code`` and ``find_final_answer``.

    rlms has no sandbox (real ``__import__`` and ``open``), and says so in its handshake.
    """

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
            "sandbox": False,
            "packages": {"rlms": _version("rlms")},
            "files": {},
        }

    def task(self, task: dict[str, Any], context: str) -> dict[str, Any]:
        """``RLM(backend="openai").completion(context, root_prompt=query)``: the OpenAI client at
        ``api_base`` (a model ``openai/NAME`` is NAME there); iterations as its logger counts them
        (0.1.3 never fires ``on_iteration_start``), its JSONL trajectory written into ``log_dir``."""
        core = importlib.import_module("rlm")
        logger_module = importlib.import_module("rlm.logger")
        model = str(task["model"])
        kwargs: dict[str, Any] = {
            "model_name": model.split("/", 1)[1] if model.startswith("openai/") else model
        }
        if task.get("api_base"):
            kwargs["base_url"] = task["api_base"]
        if task.get("api_key"):
            kwargs["api_key"] = task["api_key"]
        logger = logger_module.RLMLogger(log_dir=task.get("log_dir") or None)
        rlm = core.RLM(
            backend="openai",
            backend_kwargs=kwargs,
            max_iterations=int(task.get("max_iterations", 30)),
            logger=logger,
        )
        try:
            result = rlm.completion(context, root_prompt=task["query"])
        except Exception as exc:
            return {**task_outcome(None, {"iterations": logger.iteration_count}), "error": error_of(exc)}
        usage = result.usage_summary
        stats = {
            "iterations": logger.iteration_count,
            "llm_calls": sum(m.total_calls for m in usage.model_usage_summaries.values()),
            "prompt_tokens": usage.total_input_tokens,
            "completion_tokens": usage.total_output_tokens,
            "estimated_cost_usd": usage.total_cost,
        }
        return task_outcome(result.response, stats)

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
        """Only the answer a loop would end with: rlms has none of upstream's four functions."""
        env = values.decode(case.get("env", {}))
        return _call_each(
            {
                "answer": lambda: self.parsing.find_final_answer(
                    case["response"], environment=self._new_repl(env)
                ),
            }
        )


class DspyBackend(_ImportedBackend):
    """dspy.RLM (dspy 3.4) for protocol 2's task message, its interpreter run offline.

    ``paths[0]`` is a runtime directory made by ``rlm_compat.tools.research.dspy_runtime`` (a Deno
    binary from npm, a Deno cache holding ``npm:pyodide``, an import map sending dspy's one
    deno.land import to a local ``readLines``): Deno runs with ``--cached-only``, so the sandbox
    reaches no network. No conformance cases: its ``SUBMIT`` ending and typed signatures have no
    recorded fixtures.
    """

    kinds: frozenset[str] = frozenset()
    implementation = "dspy.RLM"

    def __init__(self, paths: list[str], label: str) -> None:
        super().__init__([], label)
        self.runtime = Path(paths[0]) if paths else None

    def info(self) -> dict[str, Any]:
        return {
            "implementation": self.implementation,
            "version": _version("dspy"),
            "sandbox": True,
            "packages": {"dspy": _version("dspy")},
            "files": {},
        }

    def _interpreter_factory(self) -> Callable[[], Any]:
        interpreter = importlib.import_module("dspy.primitives.python_interpreter")
        if self.runtime is None:
            return interpreter.PythonInterpreter  # type: ignore[no-any-return]
        runtime = self.runtime.resolve()
        runner = str(Path(str(interpreter.__file__)).parent.resolve() / "runner.js")
        cache, imports = runtime / "denodir", runtime / "import_map.json"
        readable = [runner, str(cache), str(imports), str(runtime / "read_lines.ts")]
        os.environ["DENO_DIR"] = str(cache)
        command = [
            str(runtime / "deno"),
            "run",
            "--no-config",
            "--no-lock",
            "--node-modules-dir=false",
            "--cached-only",
            f"--import-map={imports}",
            f"--allow-read={','.join(readable)}",
            runner,
            "",
            f"--dspy-deno-dir={cache}",
        ]
        return lambda: interpreter.PythonInterpreter(deno_command=command)

    def task(self, task: dict[str, Any], context: str) -> dict[str, Any]:
        dspy = importlib.import_module("dspy")
        kwargs = {k: task[k] for k in ("api_base", "api_key") if task.get(k)}
        lm = dspy.LM(task["model"], cache=False, **kwargs)
        rlm = dspy.RLM(
            "context, query -> answer",
            max_iters=int(task.get("max_iterations", 30)),
            interpreter_factory=self._interpreter_factory(),
        )
        try:
            with dspy.context(lm=lm):
                prediction = rlm(context=context, query=task["query"])
        except Exception as exc:
            return {**task_outcome(None, self._usage(lm)), "error": error_of(exc)}
        stats = self._usage(lm)
        stats["iterations"] = len(getattr(prediction, "trajectory", None) or [])
        return task_outcome(getattr(prediction, "answer", None), stats)

    @staticmethod
    def _usage(lm: Any) -> dict[str, Any]:
        history = list(getattr(lm, "history", []) or [])
        usage = [entry.get("usage") or {} for entry in history]
        costs = [entry.get("cost") for entry in history if isinstance(entry.get("cost"), (int, float))]
        return {
            "llm_calls": len(history),
            "prompt_tokens": sum(int(u.get("prompt_tokens") or 0) for u in usage),
            "completion_tokens": sum(int(u.get("completion_tokens") or 0) for u in usage),
            "estimated_cost_usd": sum(costs) if costs else None,
        }


def _rlms_exception(stderr: str) -> dict[str, str] | None:
    """rlms appends ``"\\n{type}: {message}"`` to stderr when the code raised; recover it."""
    if not stderr.strip():
        return None
    last = stderr.rstrip("\n").rsplit("\n", 1)[-1]
    kind, sep, message = last.partition(": ")
    if sep and kind.isidentifier():
        return {"type": kind, "message": values.normalize_text(message)}
    return {"type": "stderr", "message": values.normalize_text(stderr.strip())}


class ReferenceBackend(_ImportedBackend):
    """Plain CPython, the reference executor of profile fixed (``reference.py``; REPL cases only).

    ``paths`` are ignored and site-packages leave ``sys.path``: it stands for the interpreter
    and its standard library, so a recording must not depend on what else a venv holds (``import
    numpy`` fails as on a bare CPython). Each case runs in the forked child with stdin at
    /dev/null, so a case's ``input()`` reads nothing of the protocol.
    """

    kinds = frozenset({"repl"})
    implementation = "cpython-reference"

    def __init__(self, paths: list[str], label: str) -> None:
        super().__init__([], label)
        sys.path[:] = [
            p for p in sys.path if not p.rstrip(os.sep).endswith(("site-packages", "dist-packages"))
        ]
        if __package__:
            from . import reference
        else:
            load_sibling("../../sandbox/fences.py")
            reference = load_sibling("reference.py")
        self.reference = reference

    def info(self) -> dict[str, Any]:
        here = Path(__file__).parent
        return {
            "implementation": self.implementation,
            "version": platform.python_version(),
            "sandbox": False,
            "compare": "exact",
            "files": {
                name: hashlib.sha256((here / name).read_bytes()).hexdigest()
                for name in ("reference.py", "values.py", "../../sandbox/fences.py")
            },
        }

    def repl(self, case: dict[str, Any], emit: Emit) -> None:
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 - the child's whole life
        self.reference.run_case(case, emit)


BACKENDS: dict[str, type[_ImportedBackend]] = {
    "ysz": YszBackend,
    "recursive-llm-0.5": RecursiveLLM050Backend,
    "rlms": RlmsBackend,
    "cpython-reference": ReferenceBackend,
    "dspy": DspyBackend,
}
"""What ``--backend NAME`` loads in script mode (the registry's entries name these)."""


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


def run_inline(target: Callable[[Emit], None], limit: float) -> tuple[list[Event], str | None]:
    """Run ``target`` in a helper thread of this process; its events, and a failure text or None.

    For implementations that enforce their own timeouts (rlm_compat in process): a case still
    running after ``limit`` seconds is a bug, reported as a failure; the thread is left behind
    (a daemon) rather than wedging the whole run.
    """
    events: list[Event] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            target(events.append)
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=work, name="conformance-case", daemon=True)
    worker.start()
    worker.join(limit)
    if worker.is_alive():
        return list(events), f"did not finish within {limit:.0f}s (timeout not enforced?)"
    if errors:
        return events, f"backend raised {type(errors[0]).__name__}: {errors[0]}"
    return events, None


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


class ProtocolViolation(ValueError):
    """A message this side cannot act on (its text goes back in an ``error`` message)."""


class Driver:
    """The protocol state of one implementation: the handshake, then one case at a time.

    ``fork`` isolates each REPL and loop case in a child process (script mode); without it a
    case runs in a helper thread under a deadline derived from its own timeout (in process).
    """

    def __init__(self, backend: Backend, *, fork: bool = True) -> None:
        self.backend = backend
        self.fork = fork
        self.step_limit = 5.0
        self.case_limit = 60.0
        self.greeted = False
        self.protocol = PROTOCOL_VERSION

    def handle(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """The reply to one message (None for ``bye``, which has none)."""
        kind = message.get("type")
        if kind == "hello":
            return self._hello(message)
        if kind == "case":
            if not self.greeted:
                raise ProtocolViolation("a case before the hello message")
            return self._case(message)
        if kind == "task":
            if self.protocol < TASK_PROTOCOL_VERSION:
                raise ProtocolViolation(
                    f"a task message needs protocol {TASK_PROTOCOL_VERSION}; "
                    f"the hello asked for {self.protocol}"
                )
            return self._task(message)
        if kind == "bye":
            return None
        raise ProtocolViolation(f"unknown message type {kind!r}")

    def _hello(self, message: dict[str, Any]) -> dict[str, Any]:
        if message.get("protocol") not in SUPPORTED_PROTOCOLS:
            raise ProtocolViolation(
                f"runner speaks protocol {message.get('protocol')!r}; this driver speaks "
                + " or ".join(str(v) for v in SUPPORTED_PROTOCOLS)
            )
        self.protocol = int(message["protocol"])
        self.step_limit = float(message.get("step_limit", self.step_limit))
        self.case_limit = float(message.get("case_limit", self.case_limit))
        self.greeted = True
        return {
            "type": "hello",
            "protocol": self.protocol,
            "python": platform.python_version(),
            "kinds": sorted(self.backend.kinds),
            "hash_seed": os.environ.get("PYTHONHASHSEED"),
            **self.backend.info(),
        }

    def _case(self, message: dict[str, Any]) -> dict[str, Any]:
        kind, case = message.get("kind"), message.get("case")
        if not isinstance(case, dict) or not isinstance(case.get("id"), str):
            raise ProtocolViolation("a case message needs a case object with a string id")
        reply: dict[str, Any] = {"type": "result", "id": case["id"]}
        if kind not in ("repl", "parser", "loop"):
            raise ProtocolViolation(f"unknown case kind {kind!r}")
        if kind not in self.backend.kinds:
            return {**reply, "skip": f"{self.backend.implementation} has no {kind} entry point"}
        return {**reply, **self._one(kind, case)}

    def _task(self, message: dict[str, Any]) -> dict[str, Any]:
        """Run one task in this process (the runner starts a driver per task and kills it on a
        hang); any exception of the implementation is the result's ``error``, not a violation."""
        if not isinstance(message.get("id"), str) or not isinstance(message.get("query"), str):
            raise ProtocolViolation("a task message needs a string id and a string query")
        if not isinstance(message.get("context_file"), str) or not isinstance(message.get("model"), str):
            raise ProtocolViolation("a task message needs context_file (a path) and model (a name)")
        reply: dict[str, Any] = {"type": "task-result", "id": message["id"]}
        started = time.monotonic()
        try:
            context = Path(message["context_file"]).read_text(encoding="utf-8")
            outcome = self.backend.task(message, context)
        except Exception as exc:
            outcome = {"answer": None, "error": error_of(exc)}
        reply.update(outcome)
        reply["seconds"] = round(time.monotonic() - started, 6)
        return reply

    def _one(self, kind: str, case: dict[str, Any]) -> dict[str, Any]:
        backend = self.backend
        if kind == "parser":
            try:
                return {"result": backend.parser(case)}
            except Exception as exc:
                return {"failure": f"{type(exc).__name__}: {exc}"}
        run = backend.repl if kind == "repl" else backend.loop
        events, failure = self._isolated(lambda emit: run(case, emit), case)
        result = assemble_repl(events, failure) if kind == "repl" else assemble_loop(events, failure)
        if "failure" in result:
            return {"failure": result.pop("failure"), "partial": result}
        return {"result": result}

    def _isolated(
        self, target: Callable[[Emit], None], case: dict[str, Any]
    ) -> tuple[list[Event], str | None]:
        if self.fork:
            return run_forked(target, self.step_limit, self.case_limit)
        timeout = float(case.get("options", {}).get("timeout", 5))
        steps = len(case.get("steps", case.get("replies", [])))
        return run_inline(target, (timeout + 2) * max(steps, 1) + 10)


def respond(driver: Driver, message: Any) -> dict[str, Any] | None:
    """``driver``'s reply to ``message``; anything it cannot act on becomes an ``error`` message."""
    try:
        if not isinstance(message, dict):
            raise ProtocolViolation("a message must be a JSON object")
        return driver.handle(message)
    except Exception as exc:
        reply: dict[str, Any] = {"type": "error", "message": f"{type(exc).__name__}: {exc}"}
        if not isinstance(exc, ProtocolViolation):
            reply["traceback"] = traceback.format_exc(limit=8)
        return reply


def serve(driver: Driver, requests: Any, replies: Any) -> None:
    """Answer messages until ``bye`` or end of input."""
    for line in requests:
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except ValueError as exc:
            message = None
            reply: dict[str, Any] | None = {"type": "error", "message": f"not JSON: {exc}"}
        else:
            reply = respond(driver, message)
        if reply is None:
            break
        replies.write(json.dumps(reply, ensure_ascii=False, allow_nan=False) + "\n")
        replies.flush()


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(description="Serve the rlm-compat conformance protocol.")
    parser.add_argument("--backend", required=True, choices=sorted(BACKENDS))
    parser.add_argument("--path", action="append", default=[], help="put first on sys.path")
    parser.add_argument("--label", default="", help="the version to report (a checkout's commit)")
    args = parser.parse_args(argv)
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    serve(Driver(BACKENDS[args.backend](args.path, args.label)), sys.stdin, replies)


if __name__ == "__main__":
    main()
