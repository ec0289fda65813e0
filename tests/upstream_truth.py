"""What upstream did, for tests that check profile ``upstream`` case by case.

Tests keep no copies of upstream's behaviour: the cases are conformance inputs
(``rlm_compat/tools/conformance/inputs/repl/*.toml``), and what 2fb46cc did with them is recorded in
``upstream_fixtures/`` by ``rlm-compat record`` from the real checkout, on each supported Python.
This module reads those recordings for the running Python and replays a case's input through any
upstream-shaped executor the way the recorder's driver ran it, so a test compares like with like.
Expectations that are rlm_compat's own (profile ``fixed``) stay in the tests.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any

import pytest

from rlm_compat.errors import REPLError
from rlm_compat.repl import REPLExecutor
from rlm_compat.tools.conformance import values
from rlm_compat.tools.conformance.deviations import Deviation, Registry
from rlm_compat.tools.conformance.fixtures import DEVIATIONS, FixtureSet, read_jsonl

PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"


@functools.cache
def _lines(kind: str) -> dict[str, dict[str, Any]]:
    path, _version, _note = FixtureSet.open().select(kind, PYTHON)
    if path is None:
        raise LookupError(f"no recorded {kind} fixtures for Python {PYTHON}; run `rlm-compat record`")
    return {line["id"]: line for line in read_jsonl(path)}


def _repl_lines() -> dict[str, dict[str, Any]]:
    return _lines("repl")


def parser_line(case_id: str) -> dict[str, Any]:
    """One recorded parser fixture line by its full id (``parser.edge.greedy_triple``)."""
    return _lines("parser")[case_id]


@functools.cache
def _registry() -> Registry:
    return Registry.load(FixtureSet.open().root / DEVIATIONS)


def recorded(topic: str) -> list[dict[str, Any]]:
    """The recorded REPL fixture lines of one input file (``guards`` for ``inputs/repl/guards.toml``)."""
    lines = [line for line in _repl_lines().values() if line["input"]["topic"] == topic]
    if not lines:
        raise LookupError(f"no recorded REPL cases from inputs/repl/{topic}.toml; re-record the fixtures")
    return sorted(lines, key=lambda line: str(line["id"]))


def line(case_id: str) -> dict[str, Any]:
    """One recorded REPL fixture line by its full id (``repl.guards.unpack``)."""
    return _repl_lines()[case_id]


def name(line: dict[str, Any]) -> str:
    """A case's id without ``repl.`` and its topic, for pytest ids."""
    return str(line["id"]).split(".", 2)[-1]


def deviation(line: dict[str, Any], profile: str) -> Deviation | None:
    """The deviations.toml entry that says ``profile`` differs from upstream on this case, if any."""
    return _registry().lookup(str(line["id"]), profile, PYTHON)


def skip_unless_comparable(line: dict[str, Any], profile: str = "upstream") -> None:
    """Skip a case the default conformance run compares differently: a registered deviation, or
    output in str-hash order under a random ``PYTHONHASHSEED``."""
    entry = deviation(line, profile)
    if entry is not None:
        pytest.skip(f"deviations.toml #{entry.number} ({entry.kind}): profile {profile} differs on purpose")
    if line.get("hash_sensitive") and os.environ.get("PYTHONHASHSEED") != "0":
        pytest.skip("recorded output shows str-hash order; compare with PYTHONHASHSEED=0")


def shown(step: dict[str, Any]) -> str:
    """What a recorded step showed: ``execute``'s return value, or the text of the error it raised."""
    if step.get("hang"):
        return "<hang>"
    if "error" in step:
        return str(step["error"]["message"])
    return str(step["output"])


def recorded_steps(line: dict[str, Any]) -> list[dict[str, Any]]:
    """The recorded steps of a fixture line."""
    steps: list[dict[str, Any]] = line["expected"]["steps"]
    return steps


def replay(
    line: dict[str, Any],
    factory: Callable[..., Any] | None = None,
    error: type[BaseException] = REPLError,
) -> list[dict[str, Any]]:
    """Run a fixture line's input as the recorder ran it upstream: one executor built from the
    case's options, one env decoded from its input, every step's output or error and env after it.

    ``factory`` defaults to profile ``upstream``; ``error`` is the class the executor raises
    (another exception escapes and fails the test). An error whose class derives from the recorded
    one is reported under the recorded name (code catching upstream's class still catches it).
    """
    make = factory or functools.partial(REPLExecutor, profile="upstream")
    case = line["input"]
    expected = recorded_steps(line)
    env = values.decode(case.get("env", {}))
    executor = make(**case.get("options", {}))
    steps: list[dict[str, Any]] = []
    for index, code in enumerate(case["steps"]):
        step: dict[str, Any]
        try:
            step = {"output": values.normalize_text(executor.execute(code, env))}
        except error as exc:
            wanted = expected[index].get("error", {}).get("type") if index < len(expected) else None
            names = [cls.__name__ for cls in type(exc).__mro__]
            kind = wanted if wanted in names else type(exc).__name__
            step = {"error": {"type": kind, "message": values.normalize_text(str(exc))}}
        step["env"] = {str(k): values.encode(v) for k, v in env.items() if k != "__builtins__"}
        steps.append(step)
    return steps
