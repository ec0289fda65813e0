"""dspy.RLM's conformance row: the namespace observer, the registry entry, its comparison, and the
real thing (dspy 3.4.1 in Deno + Pyodide) on a few dozen REPL cases.

The last test needs dspy and its offline runtime (pip and npm, ~25 s with warm caches), so it runs
when ``RLM_COMPAT_DSPY_TESTS=1`` (``.ci/run`` sets it for the default Python only); under
``RLM_COMPAT_CI=1`` a setup that fails is a failure, not a skip.
"""

from __future__ import annotations

import builtins
import dataclasses
import json
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dspy_venv
import pytest

from rlm_compat.tools import ToolUsageError
from rlm_compat.tools.conformance import dspy_cases, values
from rlm_compat.tools.conformance.adapters import Adapter
from rlm_compat.tools.conformance.case_isolation import Emit
from rlm_compat.tools.conformance.case_runs import Backend
from rlm_compat.tools.conformance.deviations import Registry
from rlm_compat.tools.conformance.driver import Driver
from rlm_compat.tools.conformance.dspy_observer import RUNNER_NAMES, Observer
from rlm_compat.tools.conformance.fixtures import DEVIATIONS, FixtureSet, read_jsonl, write_jsonl
from rlm_compat.tools.conformance.implementations import DSPY_RUNTIME_ENV, REGISTRY, find_dspy_runtime
from rlm_compat.tools.conformance.oracle import reference_fixture_set
from rlm_compat.tools.conformance.peer_setup import setup_peers
from rlm_compat.tools.conformance.protocol import LocalConnection, Session
from rlm_compat.tools.conformance.suite_runner import classify, run_conformance

# --- the observer, on this CPython ---------------------------------------------------------------


def _start_namespace() -> dict[str, Any]:
    """A namespace as runner.js leaves it after its setup code (the runner's names bound)."""
    namespace: dict[str, Any] = {
        "__name__": "__rlm_test_main__",
        "__annotations__": {},
        "__builtins__": builtins,
    }
    namespace.update({name: object() for name in RUNNER_NAMES})
    namespace["SUBMIT"] = lambda output: output
    namespace["_js_tool_call"] = object()
    return namespace


def test_the_env_is_the_cases_own_names() -> None:
    namespace = _start_namespace()
    observer = Observer(namespace, values.encode)
    assert json.loads(observer.env(namespace)) == {}
    namespace.update(x=(1, 2), __doc__="d", json=json)
    namespace["SUBMIT"] = 3  # the case's own SUBMIT is its state; the runner's is not
    assert json.loads(observer.env(namespace)) == {"x": {"$tuple": [1, 2]}, "SUBMIT": 3}


@pytest.fixture
def module() -> Iterator[types.ModuleType]:
    """A module loaded before the observer starts (as Pyodide's standard library is)."""
    made = types.ModuleType("rlm_test_loaded_before")
    made.value = 1  # type: ignore[attr-defined]
    sys.modules[made.__name__] = made
    yield made
    sys.modules.pop(made.__name__, None)
    sys.modules.pop("rlm_test_imported_by_case", None)


def test_reset_restores_the_start_namespace_and_names_what_it_cannot(module: types.ModuleType) -> None:
    namespace = _start_namespace()
    start = dict(namespace)
    observer = Observer(namespace, values.encode)
    namespace.update(x=1, SUBMIT=2)
    del namespace["_js_tool_call"]
    namespace["__annotations__"]["x"] = int
    imported = types.ModuleType("rlm_test_imported_by_case")
    imported.__file__ = "/somewhere/rlm_test_imported_by_case.py"
    sys.modules[imported.__name__] = imported
    # this test process's other modules may change meanwhile (hypothesis's timers...): only ours count
    assert _ours(observer.reset(namespace)) == []
    assert namespace == start and namespace["__annotations__"] == {}
    assert imported.__name__ not in sys.modules  # a later import runs it afresh
    module.value = 2  # type: ignore[attr-defined]
    assert _ours(observer.reset(namespace)) == [f"{module.__name__}.value"]
    module.value = 1  # type: ignore[attr-defined]
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(limit + 1)
    try:
        assert _ours(observer.leaks()) == ["sys settings (recursion limit, trace, profile or import paths)"]
    finally:
        sys.setrecursionlimit(limit)
    assert _ours(observer.leaks()) == []


def _ours(found: str | list[str]) -> list[str]:
    """What the observer found about this test's own changes (the process's other modules aside)."""
    entries = json.loads(found) if isinstance(found, str) else found
    return [e for e in entries if e.startswith(("rlm_test", "sys settings"))]


def test_the_install_code_binds_no_name() -> None:
    """What the driver sends into Pyodide, run here in a namespace of its own."""
    namespace = _start_namespace()
    before = set(namespace)
    try:
        exec(dspy_cases.install_code(), namespace)
        exec(dspy_cases.START_OBSERVER, namespace)
        assert set(namespace) == before
        exec("y = [1, {2}]", namespace)
        shown = eval(f"{dspy_cases.OBSERVE}.OBSERVER.env(globals())", namespace)
        assert json.loads(shown) == {"y": [1, {"$set": [2]}]}
    finally:
        for name in dspy_cases.OWN_MODULES:
            sys.modules.pop(name, None)


# --- the registry entry and the comparison -------------------------------------------------------


def test_the_registry_entry_needs_a_venv_and_a_runtime(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    entry = REGISTRY["dspy-rlm"]
    assert entry.kinds == frozenset({"repl"}) and entry.oracle == "cpython" and entry.mode == "semantic"
    assert (Path(dspy_cases.__file__).parent / entry.script).is_file()
    with pytest.raises(ToolUsageError, match="or --setup to create one"):
        entry.adapter()
    monkeypatch.delenv(DSPY_RUNTIME_ENV, raising=False)
    python = tmp_path / "venv-dspy-rlm" / "bin" / "python"
    with pytest.raises(ToolUsageError, match="offline Deno \\+ Pyodide runtime"):
        entry.adapter(str(python))
    runtime = tmp_path / "dspy-runtime"
    runtime.mkdir()
    (runtime / "deno").write_text("")
    (runtime / "import_map.json").write_text("{}")
    assert find_dspy_runtime(str(python)) == runtime.resolve()
    python.parent.mkdir(parents=True)
    python.write_text("")
    # --setup reuses what exists: no venv made, no npm asked
    (set_up,) = setup_peers([(entry, None)], tmp_path)
    assert set_up[1] == str(python) and set_up[0].runtime_dir == str(runtime.resolve())


class _PlainPython(Backend):
    """A stand-in peer: each step run by exec in one dict, the last expression's value shown."""

    kinds = frozenset({"repl"})
    implementation = "plain"

    def info(self) -> dict[str, Any]:
        return {"implementation": self.implementation, "version": "1", "sandbox": True}

    def repl(self, case: dict[str, Any], emit: Emit) -> None:
        env: dict[str, Any] = {}
        for code in case["steps"]:
            exec(code, env)
            env.pop("__builtins__", None)
            emit({"step": {"output": "", "env": {k: values.encode(v) for k, v in env.items()}}})


def test_a_semantic_peer_is_judged_against_the_cpython_recordings(tmp_path: Path) -> None:
    """Placeholder outputs read as empty, env compared, parser and loop named as not run."""
    reference = tmp_path / "reference"
    reference.mkdir()
    lines = [
        {
            "id": f"repl.t.{name}",
            "input": {"id": f"repl.t.{name}", "topic": "t", "steps": [code]},
            "expected": {"steps": [{"output": "Code executed successfully (no output)", "env": {"x": 1}}]},
        }
        for name, code in (("same", "x = 1"), ("other", "x = 2"))
    ]
    write_jsonl(reference / f"repl.cpython{sys.version_info[0]}.{sys.version_info[1]}.jsonl", lines)
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    (upstream / "deviations.toml").write_text("")
    session = Session(LocalConnection(lambda: Driver(_PlainPython(), fork=False)), name="plain")
    entry = REGISTRY["dspy-rlm"]
    adapter = Adapter(
        "plain",
        [session],
        mode="semantic",
        kinds=entry.kinds,
        skip_reasons=entry.skip_reasons,
        oracle="cpython",
    )
    report = run_conformance(
        [adapter],
        FixtureSet.open(upstream),
        reference=reference_fixture_set(reference),
        progress_enabled=False,
    )
    (run,) = report.implementations
    assert {r.id: r.status for r in run.results} == {"repl.t.same": "pass", "repl.t.other": "unexplained"}
    assert not report.failed  # a peer: reported, never gating
    assert [n.split(":")[0] for n in run.notes] == ["parser cases not run", "loop cases not run"]


# --- the real dspy.RLM (default Python in CI; tests/dspy_venv.py) ---------------------------------

_CASES = (
    "repl.persist.*",
    "repl.assign.augmented_name_*",
    "repl.errors.name_error",
    "repl.printing.then_expression",
    "repl.scoping.comprehension_condition_sees_env",
)


@pytest.mark.once_per_ci  # dspy and Pyodide do not vary with the host Python
@pytest.mark.skipif(not dspy_venv.ENABLED, reason=dspy_venv.SKIP_REASON)
def test_dspy_rlm_runs_repl_cases_in_pyodide(tmp_path: Path) -> None:
    """One interpreter for every case (a hang last: it kills it), judged as a run judges them."""
    from fnmatch import fnmatchcase

    from rlm_compat.tools.conformance.dspy_runtime import prepare_dspy_runtime

    python = dspy_venv.dspy_python(tmp_path)
    try:
        runtime = prepare_dspy_runtime(tmp_path / "dspy-runtime", python)
    except ToolUsageError as exc:
        dspy_venv.need(False, str(exc))
    entry = dataclasses.replace(REGISTRY["dspy-rlm"], workers=1, runtime_dir=str(runtime))
    adapter = entry.adapter(python, step_limit=1.0)
    info = adapter.start()
    assert info["python"].startswith("3.13.") and info["pyodide"] == "0.29.4", info
    recorded = reference_fixture_set().select("repl", "3.13")[0]
    assert recorded is not None
    every = list(read_jsonl(recorded))
    lines = [line for line in every if any(fnmatchcase(line["id"], p) for p in _CASES)]
    hang = next(line for line in every if line["id"] == "repl.limits.hang_after_print")
    own = [{"id": "a", "steps": ["leak = 1\nleak"]}, {"id": "b", "steps": ["leak"]}]
    try:
        outcomes = adapter.run_many("repl", [line["input"] for line in lines] + own + [hang["input"]])
    finally:
        adapter.stop()
    registry = Registry.load(FixtureSet.open().root / DEVIATIONS)
    results = {
        line["id"]: classify(adapter, "repl", line, outcome, registry, "3.13")
        for line, outcome in zip([*lines, hang], [*outcomes[: len(lines)], outcomes[-1]], strict=True)
    }
    statuses = {s: sorted(i for i, r in results.items() if r.status == s) for s in ("errored", "skipped")}
    assert statuses == {"errored": [], "skipped": []}, {
        i: results[i].detail for v in statuses.values() for i in v
    }
    assert len(lines) == 52
    differs = {i: r.detail for i, r in results.items() if r.status == "unexplained"}
    # dspy shows a trailing value instead of what was printed, a list one item a line, has no
    # timeout, and injects its inputs again before every step
    assert differs["repl.printing.then_expression"] == ".steps[0].output: expected 'first\\n2', got '2'"
    assert differs["repl.scoping.comprehension_condition_sees_env"].endswith("got 'cat'")
    assert differs["repl.limits.hang_after_print"] == ".steps[0].kind: expected 'error', got 'hang'"
    assert "repl.persist.overwrite_context" in differs
    assert results["repl.persist.closure_state_across_steps"].status == "pass"  # state kept between steps
    assert sum(r.status == "pass" for r in results.values()) >= 35, differs
    # a fresh namespace between cases, without a restart: a name one case defined is unknown after
    first, second = outcomes[len(lines)], outcomes[len(lines) + 1]
    assert first["result"]["steps"][0] == {"output": "1", "env": {"leak": 1}}
    assert second["result"]["steps"][0]["error"]["type"] == "NameError"
