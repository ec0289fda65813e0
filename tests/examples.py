"""How much a search costs on this run of the suite: the full one, or the lean one of a second run.

``.ci/run`` runs the whole suite on the default Python at full cost, then again on each other Python
and on the dependency floors. There it sets ``RLM_COMPAT_LEAN=1``:

- a property over our own pure-Python code (the parsers, the wire format, the REPL grammar) does
  not change with the interpreter's version, so a quarter of the examples still runs each one
  through that interpreter (:func:`examples`) while the full search runs once per CI;
- the conformance run executes both profiles inline (:data:`CONFORMANCE_ISOLATION`): every fixture
  still runs through this interpreter's sandbox, while the worker process, whose agreement with
  inline on every fixture is checked on the default Python
  (tests/tools/conformance/test_conformance.py), starts ~7,000 times less;
- each bomb of the escape corpus (tests/sandbox/test_sandbox_escapes.py), a fresh interpreter each,
  runs under one profile, the two profiles taking turns along the corpus (:func:`profile_pairs`):
  every bomb still meets this interpreter, and each profile half of them.
"""

from __future__ import annotations

import os
from typing import TypeVar

_T = TypeVar("_T")

LEAN = os.environ.get("RLM_COMPAT_LEAN", "") not in ("", "0")
CONFORMANCE_ISOLATION = "inline" if LEAN else None
"""The isolation the conformance run gives both profiles (None: each profile's own default)."""
_FLOOR = 10


def profile_pairs(cases: list[_T], profiles: tuple[str, ...]) -> list[tuple[_T, str]]:
    """Every ``(case, profile)``; when lean, each case once, under the profiles in turn."""
    if not LEAN:
        return [(case, profile) for case in cases for profile in profiles]
    return [(case, profiles[i % len(profiles)]) for i, case in enumerate(cases)]


def examples(n: int) -> int:
    """``n``, or a quarter of it (at least 10) when the suite runs lean."""
    return max(n // 4, min(n, _FLOOR)) if LEAN else n
