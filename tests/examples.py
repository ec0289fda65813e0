"""How much a search costs on this run of the suite: the full one, or the lean one of a second run.

``.ci/run`` runs the whole suite on the default Python at full cost, then again on each other Python
and on the dependency floors. There it sets ``RLM_COMPAT_LEAN=1``:

- a property over our own pure-Python code (the parsers, the wire format, the REPL grammar) does
  not change with the interpreter's version, so a quarter of the examples still runs each one
  through that interpreter (:func:`examples`) while the full search runs once per CI;
- the conformance run executes both profiles inline (:data:`CONFORMANCE_ISOLATION`): every fixture
  still runs through this interpreter's sandbox, while the worker process, whose agreement with
  inline on every fixture is checked on the default Python
  (tests/tools/conformance/test_conformance.py), starts ~7,000 times less.

The escape corpus's bombs (tests/sandbox/test_sandbox_escapes.py: a fresh interpreter each, the
slowest tests per Python) run under one profile each, the two profiles taking turns along the corpus
(:func:`profile_pairs`), the full run and the lean ones starting on different profiles: every bomb
meets every Python, and every (bomb, profile) pair runs in each CI run. The escape cases run in a
worker process likewise take turns between the profiles when lean (:func:`lean_pairs`; the full run
has every pair, and the inline escape cases keep both profiles on every Python).
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
    """Each case once, under the profiles in turn (lean runs shifted by one: together with a full
    run, every ``(case, profile)`` pair)."""
    shift = 1 if LEAN else 0
    return [(case, profiles[(i + shift) % len(profiles)]) for i, case in enumerate(cases)]


def lean_pairs(cases: list[_T], profiles: tuple[str, ...]) -> list[tuple[_T, str]]:
    """Every ``(case, profile)``; when lean, each case once, under the profiles in turn."""
    if not LEAN:
        return [(case, profile) for case in cases for profile in profiles]
    return [(case, profiles[i % len(profiles)]) for i, case in enumerate(cases)]


def examples(n: int) -> int:
    """``n``, or a quarter of it (at least 10) when the suite runs lean."""
    return max(n // 4, min(n, _FLOOR)) if LEAN else n
