"""The driver's backends: each implementation the driver can serve, behind one :class:`Backend`.

Part of the driver (``driver.py``), so it runs as a by-path module under the implementation's own
interpreter (upstream's venv, a venv holding recursive-llm 0.5.0, rlms or dspy, a bare CPython):
the standard library and its conformance siblings only; each implementation is imported from the
paths given on the command line, never at import time.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.metadata
import os
import platform
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import values
from .case_isolation import Emit, Event
from .case_runs import (
    Backend,
    call_each,
    encode_env,
    error_of,
    run_executor_case,
    run_loop_case,
    run_parser_functions,
    task_outcome,
    timed_turn,
)

__all__ = [
    "BACKENDS",
    "DspyBackend",
    "ImportedBackend",
    "RecursiveLLM050Backend",
    "ReferenceBackend",
    "RlmsBackend",
    "YszBackend",
]


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


class ImportedBackend(Backend):
    """A backend importing the implementation from ``paths`` (put first on ``sys.path``)."""

    sandbox = True

    def __init__(self, paths: list[str], label: str) -> None:
        for path in reversed(paths):
            sys.path.insert(0, path)
        self.label = label

    def describe(
        self, version: str | None, packages: tuple[str, ...], files: dict[str, str] | None = None
    ) -> dict[str, Any]:
        """The handshake's self-description: the versions of ``packages`` as installed here."""
        return {
            "implementation": self.implementation,
            "version": version,
            "sandbox": self.sandbox,
            "packages": {d: _version(d) for d in packages},
            "files": files or {},
        }


class ExecutorBackend(ImportedBackend):
    """Implementations with upstream's ``REPLExecutor(...).execute(code, env)`` and ``rlm.parser``."""

    kinds = frozenset({"repl", "parser"})
    iterations_key = "iterations"
    """The key of the implementation's stats that counts iterations."""

    def __init__(self, paths: list[str], label: str) -> None:
        super().__init__(paths, label)
        self.repl_module = importlib.import_module("rlm.repl")
        self.parser_module = importlib.import_module("rlm.parser")

    def repl(self, case: dict[str, Any], emit: Emit) -> None:
        run_executor_case(self.repl_module.REPLExecutor, case, emit)

    def parser(self, case: dict[str, Any]) -> dict[str, Any]:
        return run_parser_functions(self.parser_module, case)

    def task(self, task: dict[str, Any], context: str) -> dict[str, Any]:
        """Both releases take the same constructor; they differ in how a task is completed."""
        rlm = importlib.import_module("rlm").RLM(
            model=task["model"],
            api_base=task.get("api_base"),
            api_key=task.get("api_key"),
            max_iterations=int(task.get("max_iterations", 30)),
        )
        try:
            answer, stats = self.complete(rlm, task["query"], context)
        except Exception as exc:
            failed = task_outcome(None, self.failed_stats(rlm, exc), iterations_key=self.iterations_key)
            return {**failed, "error": error_of(exc)}
        return task_outcome(answer, stats, iterations_key=self.iterations_key)

    def complete(self, rlm: Any, query: str, context: str) -> tuple[Any, Any]:
        """The answer to ``query`` over ``context`` and the implementation's stats mapping."""
        raise NotImplementedError(f"{self.implementation} has no task entry point in this driver")

    def failed_stats(self, rlm: Any, exc: Exception) -> Any:
        """The stats mapping after ``complete`` raised ``exc``."""
        return {}


class YszBackend(ExecutorBackend):
    """A ysz/recursive-llm checkout (``paths`` = its ``src``): REPL, parser and the loop."""

    kinds = frozenset({"repl", "parser", "loop"})
    implementation = "ysz/recursive-llm"

    def __init__(self, paths: list[str], label: str) -> None:
        super().__init__(paths, label)
        self.package = importlib.import_module("rlm")
        self.core = importlib.import_module("rlm.core")

    def info(self) -> dict[str, Any]:
        root = Path(str(self.package.__file__)).parent
        return self.describe(self.label, ("RestrictedPython", "litellm"), _hash_tree(root))

    def loop(self, case: dict[str, Any], emit: Emit) -> None:
        run_loop_case(self.core, lambda kwargs, _prompt_version: self.package.RLM(**kwargs), case, emit)

    def complete(self, rlm: Any, query: str, context: str) -> tuple[Any, Any]:
        return rlm.completion(query, context), rlm.stats

    def failed_stats(self, rlm: Any, exc: Exception) -> Any:
        return rlm.stats


class RecursiveLLM050Backend(ExecutorBackend):
    """recursive-llm 0.5.0 from PyPI (same ``rlm`` import name and REPL / parser signatures)."""

    implementation = "recursive-llm"
    iterations_key = "total_iterations"

    def complete(self, rlm: Any, query: str, context: str) -> tuple[Any, Any]:
        result = rlm.complete_result(query, context)
        return result.answer, result.stats

    def failed_stats(self, rlm: Any, exc: Exception) -> Any:
        return getattr(exc, "stats", None) or {}

    def info(self) -> dict[str, Any]:
        return self.describe(_version("recursive-llm"), ("recursive-llm", "RestrictedPython", "litellm"))


class RlmsBackend(ImportedBackend):
    """rlms (alexzhang13/rlm) from PyPI: ``LocalREPL.execute_code`` and ``find_final_answer``.

    rlms has no sandbox (real ``__import__`` and ``open``), and says so in its handshake.
    """

    kinds = frozenset({"repl", "parser"})
    implementation = "rlms"
    sandbox = False

    def __init__(self, paths: list[str], label: str) -> None:
        super().__init__(paths, label)
        self.local_repl = importlib.import_module("rlm.environments.local_repl")
        self.parsing = importlib.import_module("rlm.utils.parsing")

    def info(self) -> dict[str, Any]:
        return self.describe(_version("rlms"), ("rlms",))

    def task(self, task: dict[str, Any], context: str) -> dict[str, Any]:
        """``RLM(backend="openai").completion(context, root_prompt=query)``: the OpenAI client at
        ``api_base`` (a model ``openai/NAME`` is NAME there); iterations as its logger counts them
        (0.1.3 never fires ``on_iteration_start``), its JSONL trajectory written into ``log_dir``."""
        rlm, logger = self._rlm(task, [], persistent=False)
        return self._completion(rlm, logger, context, task["query"])

    def conversation(
        self,
        task: dict[str, Any],
        context: str,
        queries: list[str],
        tools: list[Callable[..., Any]],
        session: bool,
    ) -> list[dict[str, Any]]:
        """Each question in turn: one ``RLM(persistent=True)`` for a session (the context given with
        the first question; later ones give an empty context, ``context_0`` stays ``context``), or
        a fresh RLM per question given the context; tools as rlms' ``custom_tools``."""
        turns = []
        rlm, logger = self._rlm(task, tools, persistent=session)
        try:
            for index, query in enumerate(queries):
                if index and not session:
                    rlm, logger = self._rlm(task, tools, persistent=False)
                given = context if index == 0 or not session else ""
                turns.append(timed_turn(functools.partial(self._completion, rlm, logger, given, query)))
        finally:
            if session:
                rlm.close()
        return turns

    def _rlm(
        self, task: dict[str, Any], tools: list[Callable[..., Any]], *, persistent: bool
    ) -> tuple[Any, Any]:
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
        options: dict[str, Any] = {"persistent": True} if persistent else {}
        if tools:
            options["custom_tools"] = {t.__name__: {"tool": t, "description": t.__doc__ or ""} for t in tools}
        rlm = core.RLM(
            backend="openai",
            backend_kwargs=kwargs,
            max_iterations=int(task.get("max_iterations", 30)),
            logger=logger,
            **options,
        )
        return rlm, logger

    @staticmethod
    def _completion(rlm: Any, logger: Any, context: str, query: str) -> dict[str, Any]:
        try:
            result = rlm.completion(context, root_prompt=query)
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
        return call_each(
            {
                "answer": lambda: self.parsing.find_final_answer(
                    case["response"], environment=self._new_repl(env)
                ),
            }
        )


class DspyBackend(ImportedBackend):
    """dspy.RLM (dspy 3.4) for protocol 2's task message, its interpreter run offline.

    ``paths[0]`` is a runtime directory made by ``rlm_compat.tools.research.dspy_runtime`` (a Deno
    binary from npm, a Deno cache holding ``npm:pyodide``, an import map sending dspy's one
    deno.land import to a local ``readLines``): Deno runs with ``--cached-only``, so the sandbox
    reaches no network. No conformance cases: its ``SUBMIT`` ending and typed signatures have no
    recorded fixtures. Tasks take tools (``dspy.RLM(tools=[...])``); no sessions: 3.4.1's RLM keeps
    no interpreter between calls (3.5's History keeps messages, not variables).
    """

    kinds: frozenset[str] = frozenset()
    implementation = "dspy.RLM"
    task_tools = True

    def __init__(self, paths: list[str], label: str) -> None:
        super().__init__([], label)
        self.runtime = Path(paths[0]) if paths else None

    def info(self) -> dict[str, Any]:
        return self.describe(_version("dspy"), ("dspy",))

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

    def task(
        self, task: dict[str, Any], context: str, tools: list[Callable[..., Any]] | None = None
    ) -> dict[str, Any]:
        dspy = importlib.import_module("dspy")
        kwargs = {k: task[k] for k in ("api_base", "api_key") if task.get(k)}
        lm = dspy.LM(task["model"], cache=False, **kwargs)
        rlm = dspy.RLM(
            "context, query -> answer",
            max_iters=int(task.get("max_iterations", 30)),
            interpreter_factory=self._interpreter_factory(),
            **({"tools": list(tools)} if tools else {}),
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


class ReferenceBackend(ImportedBackend):
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
        from . import reference  # after site-packages left: it may see the standard library only

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
                for name in ("reference.py", "values.py", "../../fences.py")
            },
        }

    def repl(self, case: dict[str, Any], emit: Emit) -> None:
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 - the child's whole life
        self.reference.run_case(case, emit)


BACKENDS: dict[str, type[ImportedBackend]] = {
    "ysz": YszBackend,
    "recursive-llm-0.5": RecursiveLLM050Backend,
    "rlms": RlmsBackend,
    "cpython-reference": ReferenceBackend,
    "dspy": DspyBackend,
}
"""What ``--backend NAME`` loads in script mode (the registry's entries name these)."""
