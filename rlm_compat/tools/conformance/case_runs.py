"""How a conformance case runs through an upstream-shaped implementation, and what a backend is.

Part of the driver (``driver.py``), so it also runs as a by-path module under another
implementation's interpreter: the standard library and ``values.py`` only. The case runners here
are shared by every backend with upstream's shapes (upstream, recursive-llm 0.5.0 and rlm_compat
in process), so every implementation's steps are recorded by the same code.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
import types
import unittest.mock
from collections.abc import Callable, Mapping
from typing import Any

from . import values
from .case_isolation import Emit, Event

__all__ = [
    "Backend",
    "NewRLM",
    "ScriptedModel",
    "UnsupportedTask",
    "call_each",
    "encode_env",
    "error_of",
    "lookup_tools",
    "run_executor_case",
    "run_loop_case",
    "run_parser_functions",
    "task_outcome",
    "timed_turn",
]


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
    return call_each(functions)


def call_each(functions: Mapping[str, Callable[[], Any]]) -> dict[str, Any]:
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
    task_tools = False
    """Whether :meth:`task` takes a third argument, the task's tools as functions."""

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

    def conversation(
        self,
        task: dict[str, Any],
        context: str,
        queries: list[str],
        tools: list[Callable[..., Any]],
        session: bool,
    ) -> list[dict[str, Any]]:
        """Protocol 2 with follow-ups or tools: one ``task-result``'s fields per question.

        Here: a fresh run per question (:meth:`task` each time, given the tools when the backend
        says it takes them: :attr:`task_tools`); a backend whose implementation has sessions
        overrides this. What it cannot do raises :class:`UnsupportedTask`, which the driver reports
        as the result's error.
        """
        if session:
            raise UnsupportedTask(f"{self.implementation} has no persistent sessions in this driver")
        if tools and not self.task_tools:
            raise UnsupportedTask(f"{self.implementation} takes no custom tools in this driver")
        extra = (tools,) if tools else ()
        asks = (functools.partial(self.task, {**task, "query": query}, context, *extra) for query in queries)
        return [timed_turn(ask) for ask in asks]


def timed_turn(run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """One question's ``task-result`` fields, with the ``seconds`` it took."""
    started = time.monotonic()
    turn = run()
    return {**turn, "seconds": round(time.monotonic() - started, 6)}


class UnsupportedTask(Exception):
    """The implementation cannot run the task as asked (a session, tools): reported, not faked."""


def lookup_tools(specs: Any) -> list[Callable[[str], str]]:
    """Protocol 2's ``tools``: each ``{name, description, parameter, table}`` as a function of one
    string returning the table's value (``KeyError`` for a key it does not hold)."""
    if not isinstance(specs, list):
        raise ValueError("tools must be a list")
    out: list[Callable[[str], str]] = []
    for spec in specs:
        if not isinstance(spec, dict) or not isinstance(spec.get("table"), dict):
            raise ValueError("a tool needs name, description, parameter and a table")
        name, table = str(spec["name"]), {str(k): str(v) for k, v in spec["table"].items()}
        if not name.isidentifier():
            raise ValueError(f"tool name {name!r} is not an identifier")

        def lookup(key: str, _table: dict[str, str] = table, _name: str = name) -> str:
            if not isinstance(key, str) or key not in _table:
                raise KeyError(f"{_name}: no entry for {key!r}")
            return _table[key]

        lookup.__name__ = lookup.__qualname__ = name
        lookup.__doc__ = str(spec.get("description") or "")
        lookup.__annotations__ = {str(spec.get("parameter") or "key"): "str", "return": "str"}
        out.append(lookup)
    return out


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
