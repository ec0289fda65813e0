"""The one registry of implementations the conformance suite knows by name.

Each :class:`Implementation` entry says everything the suite needs about it: how to start it (in
process, ``driver.py`` under a given interpreter, or ``driver.py`` in a checkout), which fixture
kinds it runs and why it skips the others, how its results are compared, whether it gates a run,
which deviations apply, and the set-up lines a report prints so a reader can reproduce the run.
An implementation that is not built in is given as ``NAME=COMMAND`` (see docs/protocol.md): its
own handshake then says which kinds it runs and how it wants to be compared.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..shared.tooling_errors import ToolUsageError
from .adapters import Adapter, ProfileAdapter
from .protocol import KINDS, DriverProcess, PipeConnection, Session

__all__ = [
    "ALIASES",
    "DSPY_RUNTIME_ENV",
    "REGISTRY",
    "Implementation",
    "find_dspy_runtime",
    "make_adapter",
    "parse_impl",
]

DSPY_RUNTIME_ENV = "RLM_COMPAT_DSPY_RUNTIME"
"""Where dspy-rlm's offline Deno + Pyodide runtime is, if not beside its venv."""

_DSPY_PARSER_SKIP = (
    "n/a: dspy.RLM parses no response text; the model fills typed fields (reasoning, code) and "
    "ends by calling SUBMIT(...) in its code, so FINAL(...) / FINAL_VAR(...) parser cases have "
    "no counterpart (and no fixtures record SUBMIT)"
)
_DSPY_LOOP_SKIP = (
    "n/a: its loop has another prompt (adapter fields), message layout and SUBMIT ending: "
    "comparing model calls message by message says nothing; its whole loop runs in "
    "`rlm-compat compare --impl dspy-rlm`"
)
_LOOP_SKIP = (
    "its loop has another prompt, message layout and ending protocol: comparing model calls "
    "message by message says nothing (see docs/parser.md for the ending rules)"
)


@dataclass(frozen=True)
class Implementation:
    """One implementation: how to start it and the policy its results are judged by.

    ``start`` is ``in-process`` (rlm_compat, ``profile``), ``python`` (``driver.py --backend
    backend`` under the interpreter given as ``NAME=PYTHON``), ``checkout`` (the same, with a
    ysz/recursive-llm checkout's ``src`` first on ``sys.path``) or ``command`` (a third-party
    command speaking the protocol). ``kinds`` None means: what the handshake lists. ``unavailable``
    names why it cannot run on this kind of machine; asking for it is then a clear error.
    ``oracle`` names the fixture set its results are judged against: ``upstream``
    (``upstream_fixtures/``, what ysz/recursive-llm 2fb46cc did) or ``cpython``
    (``reference_fixtures/``, what plain CPython does). ``any_python``: it needs nothing but an
    interpreter, so without ``NAME=PYTHON`` it runs under this one. ``runs_escapes``: it has no
    sandbox, yet runs the escape inputs (they are written to read, never to write or delete:
    see inputs/repl/escapes.toml), because what plain Python does with them is its recording.
    """

    name: str
    description: str
    start: str
    backend: str = ""
    profile: str = ""
    kinds: frozenset[str] | None = frozenset(KINDS)
    skip_reasons: Mapping[str, str] = field(default_factory=dict)
    mode: str | None = "exact"
    gated: bool = False
    prompt_version: str | None = None
    setup: tuple[str, ...] = ()
    unavailable: str = ""
    workers: int = 2
    command: tuple[str, ...] = ()
    oracle: str = "upstream"
    any_python: bool = False
    runs_escapes: bool = False
    script: str = ""
    requirements: tuple[str, ...] = ()
    runtime: bool = False
    runtime_dir: str = ""

    @classmethod
    def external(cls, name: str, command: str) -> Implementation:
        """A third-party implementation: ``command`` (shell words) speaks docs/protocol.md."""
        words = tuple(shlex.split(command))
        if not words:
            raise ToolUsageError(f"{name}: empty command; give it as {name}=COMMAND")
        return cls(name, f"{command} (protocol)", "command", kinds=None, mode=None, workers=1, command=words)

    def adapter(
        self,
        target: str | None = None,
        *,
        checkout: Path | None = None,
        step_limit: float = 3.0,
        case_limit: float = 60.0,
        isolation: str | None = None,
    ) -> Adapter:
        """An adapter running this implementation; ``target`` is the interpreter for ``python``."""
        if self.unavailable:
            raise ToolUsageError(f"{self.name} is not available: {self.unavailable}")
        if self.start == "in-process":
            return ProfileAdapter(self.profile, isolation=isolation)
        sessions = [self._session(target, checkout, step_limit, case_limit) for _ in range(self.workers)]
        return Adapter(
            self.name,
            sessions,
            mode=self.mode,
            gated=self.gated,
            kinds=self.kinds,
            skip_reasons=self.skip_reasons,
            prompt_version=self.prompt_version,
            oracle=self.oracle,
            runs_escapes=self.runs_escapes,
        )

    def _session(
        self, target: str | None, checkout: Path | None, step_limit: float, case_limit: float
    ) -> Session:
        if self.start == "command":
            connection = PipeConnection(self.command)
            return Session(connection, name=self.name, step_limit=step_limit, case_limit=case_limit)
        if target is None and self.any_python:
            target = sys.executable
        if target is None:
            raise ToolUsageError(
                f"{self.name} runs in its own venv: give it as {self.name}=/path/to/python"
                + (", or --setup to create one" if self.requirements else "")
            )
        if self.script:
            return self._script_session(target, step_limit, case_limit)
        paths: list[str] = []
        label = ""
        if self.start == "checkout":
            if checkout is None:
                raise ToolUsageError(
                    f"{self.name} needs the checkout: pass --upstream PATH or set RLM_COMPAT_UPSTREAM"
                )
            paths, label = [str(checkout / "src")], self.prompt_version or ""
        return DriverProcess(
            target, self.backend, paths=paths, label=label, step_limit=step_limit, case_limit=case_limit
        )

    def _script_session(self, target: str, step_limit: float, case_limit: float) -> Session:
        """``python SCRIPT [--path RUNTIME]``: a driver of its own (dspy's long-lived interpreter)."""
        interpreter = os.path.abspath(target) if os.sep in target else target
        command = [interpreter, str(Path(__file__).with_name(self.script)), "--label", self.name]
        if self.runtime:
            command += [
                "--path",
                str(Path(self.runtime_dir) if self.runtime_dir else find_dspy_runtime(target)),
            ]
        return Session(
            PipeConnection(command),
            name=self.name,
            step_limit=step_limit,
            case_limit=case_limit,
            startup_limit=300.0,
        )


def find_dspy_runtime(python: str) -> Path:
    """dspy's offline Deno + Pyodide directory for the venv of ``python``: $RLM_COMPAT_DSPY_RUNTIME,
    else ``dspy-runtime`` beside the venv (where ``--setup`` puts it) or inside it."""
    venv = Path(os.path.abspath(python)).parent.parent
    candidates = [Path(os.environ[DSPY_RUNTIME_ENV])] if os.environ.get(DSPY_RUNTIME_ENV) else []
    candidates += [venv.parent / "dspy-runtime", venv / "dspy-runtime"]
    for candidate in candidates:
        if (candidate / "deno").is_file() and (candidate / "import_map.json").is_file():
            return candidate.resolve()
    raise ToolUsageError(
        f"dspy-rlm needs its offline Deno + Pyodide runtime; none at {', '.join(map(str, candidates))}: "
        f"run with --setup (npm fetches Deno and Pyodide), or set {DSPY_RUNTIME_ENV}"
    )


def _pypi_peer(name: str, what: str, backend: str, venv: str, requirement: str) -> Implementation:
    """A peer installed from PyPI in its own venv: REPL and parser cases, compared semantically."""
    return Implementation(
        name,
        f"{what} from PyPI (driver)",
        "python",
        backend=backend,
        kinds=frozenset({"repl", "parser"}),
        skip_reasons={"loop": _LOOP_SKIP},
        mode="semantic",
        setup=(f"python3.11 -m venv ../venvs/{venv} && ../venvs/{venv}/bin/pip install {requirement}",),
        requirements=(requirement,),
    )


REGISTRY: dict[str, Implementation] = {
    entry.name: entry
    for entry in (
        Implementation(
            "rlm_compat-upstream",
            "rlm_compat, profile upstream (in process)",
            "in-process",
            profile="upstream",
            gated=True,
            workers=1,
        ),
        Implementation(
            "rlm_compat-fixed",
            "rlm_compat, profile fixed (in process)",
            "in-process",
            profile="fixed",
            gated=True,
            workers=1,
        ),
        Implementation(
            "ysz-2fb46cc",
            "the ysz/recursive-llm checkout itself (driver)",
            "checkout",
            backend="ysz",
            gated=True,
            prompt_version="2fb46cc",
            setup=(
                "git clone https://github.com/ysz/recursive-llm ../up/rlm-2fb46cc "
                "&& git -C ../up/rlm-2fb46cc checkout 2fb46cc",
                "python3.11 -m venv ../venvs/up311 && ../venvs/up311/bin/pip install "
                "RestrictedPython==9.0 litellm==1.106.2",
            ),
        ),
        _pypi_peer(
            "recursive-llm-0.5.0", "recursive-llm 0.5.0", "recursive-llm-0.5", "rl050", "recursive-llm==0.5.0"
        ),
        _pypi_peer("rlms-0.1.1", "rlms 0.1.1 (alexzhang13/rlm)", "rlms", "rlms011", "rlms==0.1.1"),
        Implementation(
            "cpython-reference",
            "plain CPython: the reference executor of profile fixed (driver)",
            "python",
            backend="cpython-reference",
            kinds=frozenset({"repl"}),
            skip_reasons={
                "parser": "plain Python has no parser: the CPython oracle covers REPL inputs only",
                "loop": "plain Python has no model loop: the CPython oracle covers REPL inputs only",
            },
            gated=True,
            oracle="cpython",
            any_python=True,
            runs_escapes=True,
            setup=(
                "# reference fixtures (maintainers; interpreter paths, not pyenv shims): "
                "rlm-compat oracle record --python /path/to/python3.10 "
                "--python /path/to/python3.11 --python /path/to/python3.12 --python /path/to/python3.13",
            ),
        ),
        Implementation(
            "dspy-rlm",
            "dspy.RLM (dspy 3.4.1), REPL cases in its Deno + Pyodide interpreter (one per worker, "
            "its namespace reset between cases)",
            "python",
            script="dspy_cases.py",
            kinds=frozenset({"repl"}),
            skip_reasons={"parser": _DSPY_PARSER_SKIP, "loop": _DSPY_LOOP_SKIP},
            mode="semantic",
            oracle="cpython",
            requirements=("dspy==3.4.1",),
            runtime=True,
            setup=(
                "# dspy-rlm: --setup --setup-dir ../venvs makes ../venvs/venv-dspy-rlm (pip install "
                "dspy==3.4.1) and ../venvs/dspy-runtime (Deno and Pyodide from npm)",
            ),
        ),
    )
}
ALIASES = {"upstream": "rlm_compat-upstream", "fixed": "rlm_compat-fixed", "cpython": "cpython-reference"}


def parse_impl(spec: str) -> tuple[Implementation, str | None]:
    """``NAME``, ``NAME=PYTHON`` (a registry entry in its own venv) or ``NAME=COMMAND`` (any other)."""
    name, sep, value = spec.partition("=")
    name = ALIASES.get(name.strip(), name.strip())
    if name in REGISTRY:
        return REGISTRY[name], (value or None)
    if not sep or not name:
        raise ToolUsageError(
            f"unknown implementation {name!r}; known: {', '.join(REGISTRY)}; "
            "or give NAME=COMMAND for a command speaking docs/protocol.md"
        )
    return Implementation.external(name, value), None


def make_adapter(spec: str, python: str | None = None, **options: Any) -> Adapter:
    """The adapter for ``spec`` (see :func:`parse_impl`); ``python`` overrides ``NAME=PYTHON``.

    ``options`` are :meth:`Implementation.adapter`'s (checkout, step_limit, case_limit, isolation).
    """
    entry, target = parse_impl(spec)
    return entry.adapter(python or target, **options)
