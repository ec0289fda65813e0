"""How the suite is split over pytest-xdist workers (``-n 2 --dist loadgroup``, pyproject.toml).

Tests are handed out one at a time, so a file of a few long tests (the drop-in suites) is shared
by both workers instead of ending the run on one. Two exceptions:

* the tests of a file that uses a module- or session-scoped fixture of this suite (a conformance
  run, a live upstream driver, a worker-process fixture) stay together on one worker, so the
  fixture is built once, not once per worker;
* the slowest files start first (measured with ``--durations``; with ``--no-loadscope-reorder``
  xdist keeps this order), so no worker is left with a long test while the other idles.
"""

from __future__ import annotations

import pytest

#: Files whose tests take longest, slowest first (``python -m pytest --durations=40``).
SLOW_FIRST = (
    "tests/test_conformance.py",
    "tests/test_dropin.py",
    "tests/test_isolation_parity.py",
    "tests/test_soak.py",
    "tests/test_sandbox_escapes.py",
    "tests/test_isolation_default.py",
)


def _uses_shared_fixture(item: pytest.Item) -> bool:
    """Whether ``item`` uses one of the suite's own fixtures that outlive a test."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(
        fixturedef.baseid.startswith("tests") and fixturedef.scope != "function"  # not a plugin's
        for defs in info.name2fixturedefs.values()
        for fixturedef in defs
    )


def _rank(item: pytest.Item) -> int:
    path = item.nodeid.split("::", 1)[0]
    return SLOW_FIRST.index(path) if path in SLOW_FIRST else len(SLOW_FIRST)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=_rank)
    if not config.pluginmanager.hasplugin("xdist"):  # its marker is unknown without it
        return
    grouped = {item.nodeid.split("::", 1)[0] for item in items if _uses_shared_fixture(item)}
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        if module in grouped:
            item.add_marker(pytest.mark.xdist_group(module))
