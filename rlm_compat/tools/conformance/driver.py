"""Conformance driver: serves the implementation protocol for one implementation, in its Python.

This is the reference implementation of the protocol published in docs/protocol.md (JSON lines:
case messages on stdin, result messages on stdout; schema in ``schemas/protocol.schema.json``).
Two ways in, one code path:

* as a script, ``python driver.py --backend NAME [--path DIR]... [--label TEXT]``, under another
  interpreter: upstream's venv with its checkout's ``src`` on ``sys.path``, or a venv holding
  recursive-llm 0.5.0 or rlms 0.1.1. Nothing of rlm_compat is importable there, so the driver's
  modules (this file, ``case_isolation.py``, ``case_runs.py``, ``peer_backends.py``) use only the
  standard library plus ``values.py``, ``reference.py`` and ``rlm_compat/fences.py``, and run on
  Python 3.10+: :func:`standalone_package` lets their relative imports find each other by path,
  without importing rlm_compat. Fd 1 is pointed at stderr once started, so stray prints of the
  code under test cannot corrupt replies.
* in process, by rlm_compat's own adapter: the same :class:`Driver` with rlm_compat's backend,
  its replies handed back without a pipe.

REPL and loop cases each run isolated (``case_isolation.py``): in a forked child in script mode,
in a helper thread in process. Parser cases are pure functions and run directly.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
import traceback
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

STANDALONE = "_rlm_compat_standalone"
"""The package name rlm_compat's directory is registered under in script mode."""


def standalone_package() -> str:
    """Register this file's package by path, for a script whose package is not importable.

    Run as a script, this file has no package, so its relative imports would fail; and importing
    ``rlm_compat`` is impossible (another implementation's venv) or unwanted (its ``__init__``
    modules import the library). So rlm_compat's directory, ``tools``, ``tools/conformance`` and
    ``sandbox`` are registered in ``sys.modules`` as empty packages under :data:`STANDALONE`, each
    with its directory as ``__path__``: a relative import then loads just the sibling module, by
    path, whether or not the script's directory is on ``sys.path`` (``python -I``). The name of
    this module's package there is returned, for ``__package__`` (PEP 366).
    """
    root = Path(__file__).resolve().parents[2]
    for parts in ((), ("tools",), ("tools", "conformance"), ("sandbox",)):
        name = ".".join((STANDALONE, *parts))
        if name not in sys.modules:
            package = types.ModuleType(name)
            package.__path__ = [str(root.joinpath(*parts))]
            sys.modules[name] = package
    return f"{STANDALONE}.tools.conformance"


if not __package__:  # run as a script (or re-imported by a multiprocessing spawn child)
    __package__ = standalone_package()

from .case_isolation import Emit, Event, assemble_loop, assemble_repl, run_forked, run_inline  # noqa: E402
from .case_runs import Backend, UnsupportedTask, error_of, lookup_tools  # noqa: E402
from .peer_backends import BACKENDS  # noqa: E402

PROTOCOL_VERSION = 1
"""The protocol version the conformance runner speaks (docs/protocol.md): cases only."""
TASK_PROTOCOL_VERSION = 2
"""Version 2 = version 1 plus the ``task`` message (a whole task through the implementation's own
loop, against a model endpoint). This driver answers a hello of either version with that version."""
SUPPORTED_PROTOCOLS = (PROTOCOL_VERSION, TASK_PROTOCOL_VERSION)


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
        followups, tools = message.get("followups") or [], message.get("tools") or []
        if not isinstance(followups, list) or not all(isinstance(q, str) for q in followups):
            raise ProtocolViolation("a task message's followups must be a list of strings")
        reply: dict[str, Any] = {"type": "task-result", "id": message["id"]}
        started = time.monotonic()
        try:
            context = Path(message["context_file"]).read_text(encoding="utf-8")
            if followups or tools or message.get("session"):
                outcome = self._conversation(message, context, [message["query"], *followups], tools)
            else:
                outcome = self.backend.task(message, context)
        except UnsupportedTask as exc:
            outcome = {"answer": None, "error": {"type": "UnsupportedTask", "message": str(exc)}}
        except Exception as exc:
            outcome = {"answer": None, "error": error_of(exc)}
        reply.update(outcome)
        reply["seconds"] = round(time.monotonic() - started, 6)
        return reply

    def _conversation(
        self, message: dict[str, Any], context: str, queries: list[str], tools: Any
    ) -> dict[str, Any]:
        """Every question in turn (``turns``); the answer is the last turn's, figures the sums."""
        turns = self.backend.conversation(
            message, context, queries, lookup_tools(tools), bool(message.get("session"))
        )
        outcome: dict[str, Any] = {"answer": turns[-1].get("answer") if turns else None, "turns": turns}
        for key in ("iterations", "calls", "prompt_tokens", "completion_tokens", "cost_usd"):
            figures = [t.get(key) for t in turns if isinstance(t.get(key), (int, float))]
            outcome[key] = sum(figures) if figures else None
        error = next((t["error"] for t in turns if t.get("error")), None)
        if error is not None:
            outcome["error"] = error
        return outcome

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
