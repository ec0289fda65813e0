"""Host functions placed in the REPL namespace (recursive_llm, llm_query, FINAL, FINAL_VAR)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["HostCall", "host_call"]


class HostCall:
    """A host-provided callable that sandboxed code may call."""

    __slots__ = ("__wrapped__", "_fn", "_name")

    def __init__(self, fn: Callable[..., Any]) -> None:
        self._fn = fn
        self.__wrapped__ = fn
        self._name = getattr(fn, "__name__", type(fn).__name__)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<host function {self._name}>"


def host_call(fn: Callable[..., Any]) -> HostCall:
    """Mark ``fn`` as a host function callable from sandboxed code."""
    if isinstance(fn, HostCall):
        return fn
    return HostCall(fn)
