"""Implementations the conformance runner can drive, behind one small interface.

* :class:`ProfileAdapter` runs rlm_compat itself, in process, in one profile: REPL cases through
  ``REPLExecutor(profile=...)``, parser cases through ``rlm_compat.parser``'s upstream-exact
  functions (drop-in users call ``rlm.parser`` directly, so both profiles must match upstream
  there), loop cases through ``RLM(profile=...)`` with ``rlm_compat.core.litellm.acompletion``
  patched by the same scripted fake the recorder used against upstream.
* :class:`DriverAdapter` runs another implementation in its own venv through the driver protocol
  (``driver.py``): the ysz/recursive-llm checkout (replaying exactly what the recorder did),
  recursive-llm 0.5.0 and rlms 0.1.1, each with the normalisation documented in
  docs/conformance.md.

An adapter answers ``run(kind, case)`` with ``{"result": ...}``, ``{"failure": text}`` (the
adapter could not produce a result: counted as *errored*) or ``{"skip": reason}``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import platform
import re
import threading
import unittest.mock
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..errors import ConfigurationError
from ..profiles import Profile
from . import values
from .driver import ScriptedModel, assemble_loop, assemble_repl, error_of, run_executor_case
from .protocol import DriverProcess

__all__ = [
    "IMPLEMENTATIONS",
    "Adapter",
    "DriverAdapter",
    "ImplementationSpec",
    "ProfileAdapter",
    "make_adapter",
]

_RESULT = dict[str, Any]
_STEP_SLACK = 10.0
# Steps that reach the host (files, processes, network, interpreter internals): never run them
# against an implementation without a sandbox, whatever upstream did with them.
_HOST_ACCESS = re.compile(
    r"\b(open|exec|eval|compile|__import__|breakpoint|input)\s*\("
    r"|\bimport\b|\b(os|sys|subprocess|shutil|socket|pathlib|builtins|signal|ctypes|codecs)\b"
    r"|__\w+__|\.(enum|codecs|decoder|scanner|copyreg|sre_\w+|_\w+)\b"
)
_UNSAFE_TAGS = frozenset({"escape", "security", "abuse", "host"})


class Adapter(Protocol):
    """What the runner needs from an implementation."""

    name: str
    mode: str
    gated: bool
    profile: str | None

    def start(self) -> dict[str, Any]: ...

    def run(self, kind: str, case: dict[str, Any]) -> _RESULT: ...

    def stop(self) -> None: ...


def _hash_seed_fixed() -> bool:
    return os.environ.get("PYTHONHASHSEED") == "0"


class ProfileAdapter:
    """rlm_compat in this process, in one profile (``upstream``, ``fixed`` or any Profile).

    Only the two presets are looked up in deviations.toml; an ablation profile
    (``Profile.upstream().replace(...)``) runs unregistered.
    """

    mode = "exact"
    gated = True

    def __init__(self, profile: str | Profile, isolation: str | None = None) -> None:
        self._profile = profile if isinstance(profile, Profile) else Profile.named(profile)
        self._isolation = isolation
        name = self._profile.name
        self.profile: str | None = name if name in ("upstream", "fixed") else None
        self.name = f"rlm_compat-{name}" + (f"-{isolation}" if isolation else "")
        self.hash_seed_fixed = _hash_seed_fixed()

    def start(self) -> dict[str, Any]:
        from .. import __version__

        return {
            "implementation": "rlm_compat",
            "version": __version__,
            "python": platform.python_version(),
            "profile": self._profile.name,
            "isolation": self._isolation or "default",
        }

    def stop(self) -> None:
        """Nothing to release: everything ran in this process."""

    def run(self, kind: str, case: dict[str, Any]) -> _RESULT:
        if kind == "parser":
            return {"result": self._parser(case)}
        limit = _in_process_limit(kind, case)
        target = self._repl if kind == "repl" else self._loop
        return _with_deadline(lambda: target(case), limit)

    def _repl(self, case: dict[str, Any]) -> _RESULT:
        from ..repl import REPLExecutor

        def factory(**options: Any) -> REPLExecutor:
            return REPLExecutor(**options, profile=self._profile, isolation=self._isolation)

        events: list[dict[str, Any]] = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)  # upstream's go to an unread stderr
            run_executor_case(factory, case, events.append, isa=True)
        return {"result": assemble_repl(events, None)}

    def _parser(self, case: dict[str, Any]) -> dict[str, Any]:
        from .. import parser

        response = case["response"]
        env = values.decode(case.get("env", {}))
        out: dict[str, Any] = {}
        for name, fn in (
            ("extract_final", lambda: parser.extract_final(response)),
            ("extract_final_var", lambda: parser.extract_final_var(response, env)),
            ("is_final", lambda: parser.is_final(response)),
            ("parse_response", lambda: parser.parse_response(response, env)),
        ):
            try:
                out[name] = values.encode(fn())
            except Exception as exc:
                out[name] = {"$error": error_of(exc)}
        return out

    def _loop(self, case: dict[str, Any]) -> _RESULT:
        from .. import core

        options = dict(case.get("options", {}))
        call = options.pop("call", "acompletion")
        prompt_version = options.pop("prompt_version", None)
        call_kwargs = options.pop("call_kwargs", {})
        llm_kwargs = options.pop("llm_kwargs", {})
        events: list[dict[str, Any]] = []
        model = ScriptedModel(case["replies"], events.append)
        end: dict[str, Any] = {}
        rlm = None
        with unittest.mock.patch.object(core.litellm, "acompletion", model):
            try:
                rlm = core.RLM(
                    **{"model": "test-model", **options, **llm_kwargs},
                    profile=self._profile,
                    prompt_version=prompt_version,
                    isolation=self._isolation,
                )
                method = getattr(rlm, call)
                args = [case.get("query", "")]
                if "context" in case:
                    args.append(case["context"])
                if asyncio.iscoroutinefunction(method):
                    answer = asyncio.run(method(*args, **call_kwargs))
                else:
                    answer = method(*args, **call_kwargs)
                end["answer"] = values.encode(answer)
            except Exception as exc:
                end["error"] = error_of(exc, isa=True)
        if rlm is not None:
            end["stats"] = values.encode(rlm.stats)
        events.append({"end": end})
        return {"result": assemble_loop(events, None)}


def _in_process_limit(kind: str, case: dict[str, Any]) -> float:
    timeout = float(case.get("options", {}).get("timeout", 5))
    steps = len(case.get("steps", case.get("replies", [])))
    return (timeout + 2) * max(steps, 1) + _STEP_SLACK


def _with_deadline(fn: Callable[[], _RESULT], limit: float) -> _RESULT:
    """Run ``fn`` in a helper thread; a case still running after ``limit`` seconds is a failure.

    rlm_compat enforces its own timeouts, so this only fires on a bug; the thread is then left
    behind (a daemon) and the case reported as errored rather than wedging the whole run.
    """
    box: list[_RESULT] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            box.append(fn())
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=target, name="conformance-case", daemon=True)
    worker.start()
    worker.join(limit)
    if worker.is_alive():
        return {"failure": f"did not finish within {limit:.0f}s (timeout not enforced?)"}
    if errors:
        exc = errors[0]
        return {"failure": f"adapter raised {type(exc).__name__}: {exc}"}
    return box[0]


@dataclass
class DriverAdapter:
    """Another implementation, run by ``driver.py`` under its own Python.

    ``workers`` drivers run side by side (each case still in its own forked child), so a peer
    whose executor starts a process per case (recursive-llm 0.5.0) does not dominate a run.
    """

    name: str
    backend: str
    python: str
    paths: list[str] = field(default_factory=list)
    label: str = ""
    mode: str = "exact"
    sandboxed: bool = True
    kinds: frozenset[str] = frozenset({"repl", "parser", "loop"})
    skip_reasons: dict[str, str] = field(default_factory=dict)
    step_limit: float = 3.0
    gated: bool = False
    profile: str | None = None
    workers: int = 2
    prompt_version: str | None = None
    _drivers: list[DriverProcess] = field(default_factory=list)

    def start(self) -> dict[str, Any]:
        self._drivers = [
            DriverProcess(
                self.python, self.backend, paths=self.paths, label=self.label, step_limit=self.step_limit
            )
            for _ in range(max(self.workers, 1))
        ]
        with concurrent.futures.ThreadPoolExecutor(len(self._drivers)) as pool:
            infos = list(pool.map(DriverProcess.start, self._drivers))
        return infos[0]

    def stop(self) -> None:
        for driver in self._drivers:
            driver.stop()
        self._drivers = []

    def _skip(self, kind: str, case: dict[str, Any]) -> str | None:
        if kind not in self.kinds:
            return self.skip_reasons.get(kind, f"{self.name} has no {kind} entry point")
        wanted = case.get("options", {}).get("prompt_version")
        if kind == "loop" and self.prompt_version and wanted != self.prompt_version:
            return f"recorded from the {wanted} checkout; {self.name} is {self.prompt_version}"
        if kind == "repl" and not self.sandboxed:
            unsafe = _unsafe_step(case)
            if unsafe:
                return f"no sandbox in {self.name}; not run: {unsafe}"
        return None

    def run(self, kind: str, case: dict[str, Any]) -> _RESULT:
        return self.run_many(kind, [case])[0]

    def run_many(self, kind: str, cases: list[dict[str, Any]]) -> list[_RESULT]:
        """Results for ``cases`` in order, spread over the drivers."""
        if not self._drivers:
            raise RuntimeError(f"{self.name}: start() first")
        out: list[_RESULT] = [{} for _ in cases]
        todo: list[int] = []
        for index, case in enumerate(cases):
            reason = self._skip(kind, case)
            if reason is None:
                todo.append(index)
            else:
                out[index] = {"skip": reason}
        shares = [todo[n :: len(self._drivers)] for n in range(len(self._drivers))]

        def work(driver: DriverProcess, share: list[int]) -> None:
            batch = [cases[i] for i in share]
            replies = (
                driver.run(kind, batch)
                if kind == "parser"
                else [driver.run(kind, [case])[0] for case in batch]
            )
            for index, reply in zip(share, replies, strict=True):
                out[index] = (
                    {"failure": str(reply["failure"])} if "failure" in reply else {"result": reply["result"]}
                )

        with concurrent.futures.ThreadPoolExecutor(len(self._drivers)) as pool:
            list(pool.map(work, self._drivers, shares))
        return out


def _unsafe_step(case: dict[str, Any]) -> str | None:
    tags = set(case.get("tags", []))
    if tags & _UNSAFE_TAGS:
        return f"tagged {sorted(tags & _UNSAFE_TAGS)}"
    for number, step in enumerate(case["steps"], 1):
        found = _HOST_ACCESS.search(step)
        if found:
            return f"step {number} uses {found.group(0).strip()!r}"
    return None


@dataclass(frozen=True)
class ImplementationSpec:
    """A named implementation the CLI knows how to build an adapter for."""

    name: str
    description: str
    needs: str  # "" (in process), "python" or "checkout"


IMPLEMENTATIONS: dict[str, ImplementationSpec] = {
    spec.name: spec
    for spec in (
        ImplementationSpec("rlm_compat-upstream", "rlm_compat, profile upstream (in process)", ""),
        ImplementationSpec("rlm_compat-fixed", "rlm_compat, profile fixed (in process)", ""),
        ImplementationSpec("ysz-2fb46cc", "the ysz/recursive-llm checkout itself (driver)", "checkout"),
        ImplementationSpec("recursive-llm-0.5.0", "recursive-llm 0.5.0 from PyPI (driver)", "python"),
        ImplementationSpec("rlms-0.1.1", "rlms 0.1.1 from PyPI, alexzhang13/rlm (driver)", "python"),
    )
}
_ALIASES = {"upstream": "rlm_compat-upstream", "fixed": "rlm_compat-fixed"}
_LOOP_SKIP = (
    "its loop has another prompt, message layout and ending protocol: comparing model calls "
    "message by message says nothing (see docs/parser.md for the ending rules)"
)


def make_adapter(
    name: str,
    *,
    python: str | None = None,
    checkout: Path | None = None,
    step_limit: float = 3.0,
    isolation: str | None = None,
) -> Adapter:
    """The adapter for ``name`` (``rlm_compat-upstream``, ``ysz-2fb46cc``, ``rlms-0.1.1``...).

    ``isolation`` applies to rlm_compat's own profiles (None: each profile's default).
    """
    name = _ALIASES.get(name, name)
    if name not in IMPLEMENTATIONS:
        raise ConfigurationError(f"unknown implementation {name!r}; known: {sorted(IMPLEMENTATIONS)}")
    if name.startswith("rlm_compat-"):
        return ProfileAdapter(name.removeprefix("rlm_compat-"), isolation=isolation)
    if python is None:
        raise ConfigurationError(f"{name} runs in its own venv: give it as {name}=/path/to/python")
    if name == "ysz-2fb46cc":
        if checkout is None:
            raise ConfigurationError(
                "ysz-2fb46cc needs the checkout: pass --upstream PATH or set RLM_COMPAT_UPSTREAM"
            )
        return DriverAdapter(
            name,
            "ysz",
            python,
            paths=[str(checkout / "src")],
            label="2fb46cc",
            kinds=frozenset({"repl", "parser", "loop"}),
            step_limit=step_limit,
            gated=True,
            prompt_version="2fb46cc",
        )
    if name == "recursive-llm-0.5.0":
        return DriverAdapter(
            name,
            "recursive-llm-0.5",
            python,
            mode="semantic",
            sandboxed=True,
            kinds=frozenset({"repl", "parser"}),
            skip_reasons={"loop": _LOOP_SKIP},
            step_limit=step_limit,
        )
    return DriverAdapter(
        name,
        "rlms",
        python,
        mode="semantic",
        sandboxed=False,
        kinds=frozenset({"repl", "parser"}),
        skip_reasons={"loop": _LOOP_SKIP},
        step_limit=step_limit,
    )
