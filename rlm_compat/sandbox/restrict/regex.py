"""``re`` for sandboxed code: the stdlib's own functions with a compile cache of their own.

``re.match(p, s)`` and friends compile through ``re._compile``, whose cache (``re._cache``, and
``re._cache2`` from 3.12) is shared with the host: a model compiling a thousand patterns would
evict every pattern the host relies on. Rewriting the functions would drift from the running
Python's exact behaviour (argument handling, deprecations, messages differ across 3.10-3.13), so
each one is the stdlib function itself, re-created over a copy of the ``re`` module's globals
in which ``_compile``, ``_cache`` and ``_cache2`` are the sandbox's. Compiling goes straight to
``sre_compile`` / ``re._compiler``, which cache nothing.

``re.DEBUG`` is refused: the stdlib prints the parse tree to the process's stdout.
"""

from __future__ import annotations

import re
import types
from collections.abc import Callable
from typing import Any

__all__ = ["SANDBOX_RE", "sandbox_re_functions"]

_FUNCTIONS = ("compile", "search", "match", "fullmatch", "split", "findall", "finditer", "sub", "subn")


def _rebound(fn: Any, namespace: dict[str, Any]) -> Any:
    """``fn`` with ``namespace`` as its globals (same code, defaults and name)."""
    new = types.FunctionType(fn.__code__, namespace, fn.__name__, fn.__defaults__, fn.__closure__)
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__qualname__ = fn.__qualname__
    new.__doc__ = fn.__doc__
    new.__module__ = fn.__module__
    return new


def _build() -> dict[str, Any]:
    namespace = dict(vars(re))
    namespace["_cache"] = {}
    namespace["_cache2"] = {}
    stdlib_compile = _rebound(re._compile, namespace)  # type: ignore[attr-defined]
    debug = int(re.DEBUG)

    def _compile(pattern: Any, flags: Any) -> Any:
        if isinstance(flags, int) and flags & debug:
            raise ValueError("re.DEBUG is not available in the sandbox")
        return stdlib_compile(pattern, flags)

    namespace["_compile"] = _compile
    return namespace


SANDBOX_RE: dict[str, Any] = _build()
"""The globals the sandbox's ``re`` functions run with (``_cache`` / ``_cache2`` are its caches)."""


def sandbox_re_functions() -> dict[str, Callable[..., Any]]:
    """The module-level functions of ``re`` that compile, bound to the sandbox's cache."""
    return {name: _rebound(getattr(re, name), SANDBOX_RE) for name in _FUNCTIONS}
