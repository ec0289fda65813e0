"""CPython releases with interpreter bugs that sandboxed code could exploit, and the releases that
fixed them (the sandbox refuses the construct that reaches a bug on an unfixed interpreter).

``except*`` (CVE-2025-22153, RestrictedPython's advisory GHSA-gmj9-h825-chq2): before the fix of
CPython gh-128049 the interpreter trusted, outside debug builds, that an exception group's
``split()`` returned a 2-tuple; a subclass returning anything else is read as a tuple — a type
confusion that crashes the interpreter or worse. The fix (PR gh-128079, backports gh-128139 and
gh-128140) is in CPython 3.12.9 and 3.13.2 (both February 2025) and every 3.14; the 3.11 line,
security fixes only by then, never got it; 3.10 has no ``except*``.
"""

from __future__ import annotations

import sys

__all__ = ["EXCEPT_STAR_FIXED_IN", "except_star_is_safe"]

EXCEPT_STAR_FIXED_IN: dict[tuple[int, int], tuple[int, int, int]] = {(3, 12): (3, 12, 9), (3, 13): (3, 13, 2)}
"""The first release of each line with the gh-128049 fix (lines after 3.13 have it from .0)."""


def except_star_is_safe(version: tuple[int, ...] | None = None) -> bool:
    """Whether ``except*`` can run on this CPython (``version``: a ``sys.version_info``)."""
    major, minor, micro = tuple((version or sys.version_info)[:3])
    if (major, minor) <= (3, 10):
        return True  # no except* syntax at all: nothing to refuse
    fixed = EXCEPT_STAR_FIXED_IN.get((major, minor))
    if fixed is not None:
        return (major, minor, micro) >= fixed
    return (major, minor) > (3, 13)
