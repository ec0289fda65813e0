"""How many examples a property test draws on this run of the suite.

``.ci/run`` runs the whole suite on the default Python with every property test at its full count,
then again on each other Python and on the dependency floors. There it sets
``RLM_COMPAT_LEAN_EXAMPLES=1``: a property over our own pure-Python code (the parsers, the wire
format, the REPL grammar) does not change with the interpreter's version, so a quarter of the
examples still runs each one through that interpreter while the full search runs once per CI.
"""

from __future__ import annotations

import os

LEAN = os.environ.get("RLM_COMPAT_LEAN_EXAMPLES", "") not in ("", "0")
_FLOOR = 10


def examples(n: int) -> int:
    """``n``, or a quarter of it (at least 10) when the suite runs lean."""
    return max(n // 4, min(n, _FLOOR)) if LEAN else n
