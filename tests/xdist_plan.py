"""How the suite is split over pytest-xdist workers (``-n 2 --dist loadgroup``, pyproject.toml).

Tests are handed out one at a time, so a file of a few long tests (the drop-in suites) is shared
by both workers instead of ending the run on one. Two exceptions:

* the tests of a file that defines a module- or session-scoped fixture (a conformance run, a
  live upstream driver, a worker-process fixture) stay together on one worker, so the fixture is
  built once, not once per worker;
* the slowest files start first (measured with ``--durations``; with ``--no-loadscope-reorder``
  xdist keeps this order), so no worker is left with a long test while the other idles.

The grouping is this plugin's own scheduler (xdist's ``pytest_xdist_make_scheduler`` hook), not
``xdist_group`` markers: xdist 3.8 groups marked tests by rewriting ``item._nodeid``, which
pytest 9.2 no longer reads (its node ids are structured), so the markers silently stopped
grouping anything. Which files to group is read from their source (``ast``), because the
controller process that schedules never collects the tests itself.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path
from typing import Any

import pytest

#: Files whose tests take longest, slowest first (``python -m pytest --durations=40``).
SLOW_FIRST = (
    "tests/tools/conformance/test_conformance.py",
    "tests/test_dropin.py",
    "tests/sandbox/isolate/test_soak.py",
    "tests/sandbox/test_sandbox_escapes.py",
    "tests/sandbox/isolate/test_isolation_default.py",
    "tests/tools/conformance/test_conformance_dspy.py",
    "tests/tools/research/test_compare_impls.py",
)

_SHARED_SCOPES = frozenset({"module", "package", "session"})


@functools.cache
def defines_shared_fixture(path: Path) -> bool:
    """Whether the test file at ``path`` defines a fixture that outlives a test."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return False
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for decorator in node.decorator_list:
                if isinstance(decorator, ast.Call) and any(
                    keyword.arg == "scope"
                    and isinstance(keyword.value, ast.Constant)
                    and keyword.value.value in _SHARED_SCOPES
                    for keyword in decorator.keywords
                ):
                    return True
    return False


def _rank(item: pytest.Item) -> int:
    path = item.nodeid.split("::", 1)[0]
    return SLOW_FIRST.index(path) if path in SLOW_FIRST else len(SLOW_FIRST)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=_rank)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup``: one work unit per test, except one per file for the files that
    define a shared fixture (:func:`defines_shared_fixture`)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    root = config.rootpath

    class PlanScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return path if defines_shared_fixture(root / path) else nodeid

    return PlanScheduling(config, log)
