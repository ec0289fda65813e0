"""How the suite is split over pytest-xdist workers (``-n 2 --dist loadgroup``, pyproject.toml).

Tests are handed out one at a time, so a file of a few long tests (the drop-in suites) is shared
by both workers instead of ending the run on one. Two exceptions:

* a test that uses a module- or session-scoped fixture of this suite (a conformance run, a live
  upstream driver, a worker-process fixture) stays in one group with the others that use it, so
  the fixture is built once, not once per worker;
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


def _shared_fixtures(item: pytest.Item) -> list[str]:
    """Names of the suite's own non-function-scoped fixtures that ``item`` uses."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    names = []
    for name, defs in info.name2fixturedefs.items():
        for fixturedef in defs:
            own = fixturedef.baseid.startswith("tests")  # not pytest's or a plugin's own
            if own and fixturedef.scope != "function":
                names.append(name)
    return sorted(set(names))


def _rank(item: pytest.Item) -> int:
    path = item.nodeid.split("::", 1)[0]
    return SLOW_FIRST.index(path) if path in SLOW_FIRST else len(SLOW_FIRST)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        shared = _shared_fixtures(item)
        if shared:
            module = item.nodeid.split("::", 1)[0]
            item.add_marker(pytest.mark.xdist_group(f"{module}:{'+'.join(shared)}"))
    items.sort(key=_rank)
