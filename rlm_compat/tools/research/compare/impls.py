"""Implementations in the grid: each task through another implementation's own RLM loop.

``rlm-compat compare --impl NAME[=COMMAND]`` adds a column per implementation beside the profile
configs. A cell of implementation NAME (its ``config`` is ``impl:NAME``) starts the
implementation's driver in its own interpreter, sends it the task through protocol 2's ``task``
message (docs/protocol.md: the query, the context as a file, the model name and endpoint), and
grades the answer it returns with the task's grader, like any other cell. With model
``scripted`` every cell gets its own loopback OpenAI-compatible endpoint serving the task's
scripted policy (:mod:`.endpoint`), which follows each implementation's conventions from its
system prompt; calls and tokens are then counted at that endpoint, the same way for every
implementation. A driver that exits, crashes or hangs past ``time_limit`` is a failing record
with its error, never an exception of the grid; its stderr (and any log files it writes) are kept
beside the record as its raw log.

Registry entries: ``rlm_compat`` (this package, profile ``fixed``, in process, through litellm
to the same endpoint), ``ysz-2fb46cc`` (a checkout of ysz/recursive-llm), ``recursive-llm-0.5.0``,
``rlms`` and ``dspy-rlm`` (from PyPI, each in its own venv; dspy's interpreter from local copies of
Deno and Pyodide, :mod:`.dspy_runtime`);
any other ``NAME=COMMAND`` is a command speaking protocol 2. :func:`setup_implementations`
(``--setup``) makes throwaway venvs for the registry's peers.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ....errors import ConfigurationError
from ...conformance.driver import TASK_PROTOCOL_VERSION
from ...conformance.dspy_runtime import prepare_dspy_runtime
from ...conformance.implementations import find_dspy_runtime
from ...conformance.protocol import DRIVER_PATH, driver_environment
from ...shared.peer_venv import peer_venv, setup_step
from ...shared.tooling_errors import ToolUsageError

__all__ = [
    "CANNOT_START",
    "IMPLEMENTATIONS",
    "IMPL_PREFIX",
    "GridImplementation",
    "TaskOutcome",
    "hello_message",
    "impl_config",
    "parse_grid_impl",
    "run_driver_task",
    "setup_implementations",
    "task_message",
]

IMPL_PREFIX = "impl:"
"""A grid config naming an implementation instead of a profile: ``impl:ysz-2fb46cc``."""

CANNOT_START = "CannotStart"
"""The ``error_type`` of a run whose implementation never completed the handshake: the
implementation the user named cannot start, which ``rlm-compat compare`` turns into exit 1."""

_HELLO_LIMIT = 120.0  # seconds: a peer's first import of litellm alone can take 10 s on a busy machine


def impl_config(name: str) -> str:
    """The grid config of implementation ``name``."""
    return IMPL_PREFIX + name


@dataclasses.dataclass(frozen=True)
class GridImplementation:
    """How to run one implementation's loop on a task.

    ``start``: ``in-process`` (rlm_compat itself), ``driver`` (``driver.py --backend backend``
    under ``python``, with ``paths`` first on ``sys.path``), ``command`` (anything speaking
    protocol 2) or ``unavailable`` (``unavailable`` says why). ``requirements``: what ``--setup``
    installs into its venv; ``needs_checkout``: ``paths`` is a ysz/recursive-llm checkout's src.
    """

    name: str
    description: str
    start: str
    backend: str = ""
    python: str | None = None
    paths: tuple[str, ...] = ()
    command: tuple[str, ...] = ()
    requirements: tuple[str, ...] = ()
    needs_checkout: bool = False
    unavailable: str = ""
    needs_runtime: bool = False
    """dspy-rlm: ``paths[0]`` is the offline Deno + Pyodide runtime (:mod:`.dspy_runtime`)."""

    def argv(self) -> list[str]:
        """The command line of its driver (``driver`` and ``command`` starts)."""
        if self.start == "command":
            return list(self.command)
        if self.python is None:
            raise ToolUsageError(
                f"{self.name} runs in its own venv: give --impl {self.name}=/path/to/python, "
                "or --setup to create one"
            )
        if self.needs_checkout and not self.paths:
            raise ToolUsageError(
                f"{self.name} needs a ysz/recursive-llm checkout at 2fb46cc: set RLM_COMPAT_UPSTREAM, "
                "pass --upstream PATH, or --setup (clones --upstream-bundle)"
            )
        if self.needs_runtime and not self.paths:
            raise ToolUsageError(
                f"{self.name} needs its offline Deno + Pyodide runtime: --setup (npm), or --impl-path "
                f"{self.name}=DIR with DIR made by "
                "rlm_compat.tools.conformance.dspy_runtime.prepare_dspy_runtime"
            )
        argv = [self.python, str(DRIVER_PATH), "--backend", self.backend, "--label", self.name]
        for path in self.paths:
            argv += ["--path", os.path.abspath(path)]
        return argv


IMPLEMENTATIONS: dict[str, GridImplementation] = {
    entry.name: entry
    for entry in (
        GridImplementation(
            "rlm_compat", "rlm_compat, profile fixed (in process, through litellm)", "in-process"
        ),
        GridImplementation(
            "ysz-2fb46cc",
            "ysz/recursive-llm at 2fb46cc (a checkout), RLM.completion",
            "driver",
            backend="ysz",
            requirements=("RestrictedPython==9.0", "litellm==1.106.2"),
            needs_checkout=True,
        ),
        GridImplementation(
            "recursive-llm-0.5.0",
            "recursive-llm 0.5.0 from PyPI, RLM.complete_result",
            "driver",
            backend="recursive-llm-0.5",
            requirements=("recursive-llm==0.5.0",),
        ),
        GridImplementation(
            "rlms",
            "rlms from PyPI (alexzhang13/rlm, the paper's), RLM.completion, local REPL",
            "driver",
            backend="rlms",
            requirements=("rlms==0.1.3",),
        ),
        GridImplementation(
            "dspy-rlm",
            "dspy.RLM (dspy 3.4.1), its Deno + Pyodide interpreter from local copies (npm)",
            "driver",
            backend="dspy",
            requirements=("dspy==3.4.1",),
            needs_runtime=True,
        ),
    )
}


def parse_grid_impl(spec: str, *, checkout: Path | None = None) -> GridImplementation:
    """``NAME`` or ``NAME=PYTHON`` (a registry entry; ysz-2fb46cc also takes ``checkout``) or
    ``NAME=COMMAND`` (anything else, speaking protocol 2)."""
    name, sep, value = (part.strip() for part in spec.partition("="))
    if not name or not all(c.isalnum() or c in "._-" for c in name):
        raise ToolUsageError(f"--impl {spec!r}: give NAME[=PYTHON|=COMMAND], NAME of letters, digits, . _ -")
    entry = IMPLEMENTATIONS.get(name)
    if entry is None:
        if not sep or not value:
            raise ToolUsageError(
                f"unknown implementation {name!r}; known: {', '.join(IMPLEMENTATIONS)}; "
                "or give NAME=COMMAND for a command speaking protocol 2 (docs/protocol.md)"
            )
        words = tuple(shlex.split(value))
        return GridImplementation(name, f"{value} (protocol 2)", "command", command=words)
    if entry.start == "unavailable":
        raise ToolUsageError(f"{name} cannot run here: {entry.unavailable}")
    if value:
        entry = dataclasses.replace(entry, python=value)
    if entry.needs_runtime and value:  # the runtime beside its venv, as `rlm-compat conformance` finds it
        try:
            entry = dataclasses.replace(entry, paths=(str(find_dspy_runtime(value)),))
        except ToolUsageError:
            pass  # --setup or --impl-path gives it; argv() says so otherwise
    if entry.needs_checkout and checkout is not None:
        entry = dataclasses.replace(entry, paths=(str(checkout / "src"),))
    return entry


def setup_implementations(
    impls: Sequence[GridImplementation],
    directory: Path,
    *,
    bundle: Path | None = None,
    progress: Callable[[str], None] = lambda message: None,
) -> list[GridImplementation]:
    """A throwaway venv (``python -m venv`` + pip) under ``directory`` for each registry peer that
    has no interpreter yet, and a clone of ``bundle`` at 2fb46cc for ysz-2fb46cc without a checkout."""
    out = []
    for impl in impls:
        needs_path = impl.needs_checkout or impl.needs_runtime
        if impl.start != "driver" or (impl.python is not None and (impl.paths or not needs_path)):
            out.append(impl)
            continue
        if impl.python is None:
            python = peer_venv(directory, impl.name, impl.requirements, progress)
            impl = dataclasses.replace(impl, python=python)
        if impl.needs_runtime and not impl.paths:
            assert impl.python is not None
            progress(f"{impl.name}: Deno and Pyodide from npm into {directory / 'dspy-runtime'}")
            runtime = prepare_dspy_runtime(directory / "dspy-runtime", impl.python)
            impl = dataclasses.replace(impl, paths=(str(runtime),))
        if impl.needs_checkout and not impl.paths:
            if bundle is None or not bundle.is_file():
                raise ToolUsageError(
                    f"{impl.name}: --setup needs the ysz/recursive-llm history: --upstream-bundle FILE "
                    "(a git bundle) or --upstream CHECKOUT"
                )
            clone = directory / "recursive-llm-2fb46cc"
            if not (clone / "src" / "rlm").is_dir():
                progress(f"{impl.name}: git clone {bundle} {clone} && git checkout 2fb46cc")
                setup_step(["git", "clone", "-q", str(bundle), str(clone)], f"cloning {bundle}")
                setup_step(["git", "-C", str(clone), "checkout", "-q", "2fb46cc"], "checking out 2fb46cc")
            impl = dataclasses.replace(impl, paths=(str(clone / "src"),))
        out.append(impl)
    return out


@dataclasses.dataclass(frozen=True)
class TaskOutcome:
    """What an implementation's loop did with one task (``error_type`` set when it failed)."""

    answer: str | None
    iterations: int | None = None
    calls: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None
    error_type: str | None = None
    error: str | None = None
    info: dict[str, Any] = dataclasses.field(default_factory=dict)
    turns: tuple[dict[str, Any], ...] = ()
    """Per question of a multi-question task, as the driver reported it (``taskResult.turns``)."""


def run_driver_task(
    impl: GridImplementation,
    *,
    query: str,
    context_file: Path,
    model: str,
    api_base: str | None,
    api_key: str | None,
    max_iterations: int,
    time_limit: float,
    log_dir: Path,
    extra: dict[str, Any] | None = None,
) -> TaskOutcome:
    """Start ``impl``'s driver, say hello (protocol 2), send the task, wait for its result.
    ``extra``: the task message's optional fields (``followups``, ``session``, ``tools``).

    Everything the driver writes to stderr goes to ``log_dir/stderr.log``. Failing to start,
    exiting, a protocol error or no result within ``time_limit`` seconds (the process group is
    then killed) are returned as an outcome with ``error_type``, never raised.
    """
    log_dir.mkdir(parents=True, exist_ok=True)
    home = log_dir / ".home"
    home.mkdir(exist_ok=True)
    try:
        argv = impl.argv()
    except (ConfigurationError, ToolUsageError) as exc:
        return TaskOutcome(None, error_type=CANNOT_START, error=f"{type(exc).__name__}: {exc}")
    with (log_dir / "stderr.log").open("w", encoding="utf-8") as stderr:
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                encoding="utf-8",
                errors="replace",
                cwd=home,
                env=driver_environment(str(home)),
                start_new_session=True,
            )
        except OSError as exc:
            return TaskOutcome(None, error_type=CANNOT_START, error=f"cannot start {argv[0]}: {exc}")
        outcome = TaskOutcome(None, error_type="Crash", error="the runner failed")
        try:
            outcome = _converse(
                proc,
                impl,
                query,
                context_file,
                model,
                api_base,
                api_key,
                max_iterations,
                time_limit,
                log_dir,
                extra or {},
            )
            return outcome
        finally:
            _stop(proc, patient=outcome.error_type is None)


def _converse(
    proc: subprocess.Popen[str],
    impl: GridImplementation,
    query: str,
    context_file: Path,
    model: str,
    api_base: str | None,
    api_key: str | None,
    max_iterations: int,
    time_limit: float,
    log_dir: Path,
    extra: dict[str, Any],
) -> TaskOutcome:
    lines = _Lines(proc)
    hello = hello_message(time_limit)
    task = task_message(
        query=query,
        context_file=context_file,
        model=model,
        api_base=api_base,
        api_key=api_key,
        max_iterations=max_iterations,
        log_dir=log_dir,
    )
    task.update(extra)
    try:
        _send(proc, hello)
        greeting = lines.next(_HELLO_LIMIT, "the hello reply", log_dir)
        if greeting.get("type") != "hello" or greeting.get("protocol") != TASK_PROTOCOL_VERSION:
            raise _Failure(
                "ProtocolError",
                f"hello reply {json.dumps(greeting)[:300]}: it must be a hello speaking protocol "
                f"{TASK_PROTOCOL_VERSION} (docs/protocol.md)",
            )
    except _Failure as failure:
        return TaskOutcome(None, error_type=CANNOT_START, error=f"{failure.kind}: {failure.message}")
    try:
        started = time.monotonic()
        _send(proc, task)
        result = lines.next(time_limit, f"a task-result within {time_limit:g} s", log_dir, hang=True)
        if result.get("type") == "error":
            raise _Failure("ProtocolError", f"the driver refused the task: {result.get('message')}")
        if result.get("type") != "task-result":
            raise _Failure("ProtocolError", f"expected a task-result, got {json.dumps(result)[:300]}")
    except _Failure as failure:
        return TaskOutcome(None, error_type=failure.kind, error=failure.message)
    error = result.get("error")
    answer = result.get("answer")

    def number(key: str) -> Any:
        value = result.get(key)
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    info: dict[str, Any] = {
        k: greeting.get(k) for k in ("implementation", "version", "python") if k in greeting
    }
    info["seconds"] = round(time.monotonic() - started, 6)
    return TaskOutcome(
        answer=answer if isinstance(answer, str) else None,
        iterations=number("iterations"),
        calls=number("calls"),
        prompt_tokens=number("prompt_tokens"),
        completion_tokens=number("completion_tokens"),
        cost_usd=number("cost_usd"),
        error_type=str(error.get("type", "Error")) if isinstance(error, dict) else None,
        error=str(error.get("message", "")) if isinstance(error, dict) else None,
        info=info,
        turns=tuple(t for t in result.get("turns") or () if isinstance(t, dict)),
    )


def hello_message(time_limit: float) -> dict[str, Any]:
    """The runner's hello of protocol 2 (both limits: the task's time limit)."""
    return {
        "type": "hello",
        "protocol": TASK_PROTOCOL_VERSION,
        "step_limit": time_limit,
        "case_limit": time_limit,
    }


def task_message(
    *,
    query: str,
    context_file: Path,
    model: str,
    api_base: str | None,
    api_key: str | None,
    max_iterations: int,
    log_dir: Path,
    task_id: str = "task",
) -> dict[str, Any]:
    """Protocol 2's ``task`` message (docs/protocol.md; ``taskMessage`` in the schema)."""
    return {
        "type": "task",
        "id": task_id,
        "query": query,
        "context_file": str(context_file),
        "model": model,
        "api_base": api_base,
        "api_key": api_key,
        "max_iterations": max_iterations,
        "log_dir": str(log_dir),
    }


class _Failure(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind, self.message = kind, message


class _Lines:
    """The driver's stdout, one JSON message a line, read by a thread (so a wait can time out)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: list[str | None] = []
        self.ready = threading.Condition()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip():
                with self.ready:
                    self.lines.append(line)
                    self.ready.notify()
        with self.ready:
            self.lines.append(None)
            self.ready.notify()

    def next(self, limit: float, what: str, log_dir: Path, *, hang: bool = False) -> dict[str, Any]:
        with self.ready:
            if not self.ready.wait_for(lambda: bool(self.lines), timeout=limit):
                raise _Failure("Hang" if hang else "Timeout", f"no {what}: killed after {limit:g} s")
            line = self.lines.pop(0)
        if line is None:
            code = self.proc.wait()
            raise _Failure(
                "Crash", f"the driver exited with status {code} before {what}; stderr: {_tail(log_dir)}"
            )
        try:
            message = json.loads(line)
        except ValueError:
            raise _Failure("ProtocolError", f"not JSON: {line.strip()[:200]!r}") from None
        if not isinstance(message, dict):
            raise _Failure("ProtocolError", f"not a JSON object: {line.strip()[:200]!r}")
        return message


def _tail(log_dir: Path) -> str:
    try:
        text = (log_dir / "stderr.log").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return text.strip()[-600:]


def _send(proc: subprocess.Popen[str], message: dict[str, Any]) -> None:
    try:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(message, ensure_ascii=False) + "\n")
        proc.stdin.flush()
    except OSError:
        pass  # it died: the next read says how


def _stop(proc: subprocess.Popen[str], *, patient: bool) -> None:
    """``bye`` and (``patient``: after a result) a moment to exit, then the whole process group
    is killed (a hung or broken one at once)."""
    if patient and proc.poll() is None:
        _send(proc, {"type": "bye"})
        try:
            proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
