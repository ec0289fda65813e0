"""Host functions placed in the REPL namespace (recursive_llm, llm_query, FINAL, FINAL_VAR).

Sandboxed code calls them like any function. While one runs, the execution's timeout is paused
(a ``recursive_llm`` call may spend minutes waiting for a model) and no timeout is injected into
it; whatever it raises propagates into the sandboxed code unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .context import LOCAL
from .policy import register_opaque

__all__ = ["HostCall", "host_call"]

_TOKEN = object()


class HostCall:
    """A host-provided callable; sandboxed code can call it but not build or subclass one."""

    __slots__ = ("_fn", "_name")

    _fn: Callable[..., Any]
    _name: str

    def __new__(cls, fn: Callable[..., Any], token: object = None) -> HostCall:
        if token is not _TOKEN:
            raise TypeError(
                "host functions can only be made by host code (rlm_compat.sandbox.host_call)"
            )
        self = object.__new__(cls)
        object.__setattr__(self, "_fn", fn)
        object.__setattr__(self, "_name", getattr(fn, "__name__", type(fn).__name__))
        return self

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        state = LOCAL.state
        deadline = state.deadline if state is not None else None
        if deadline is None:
            return self._fn(*args, **kwargs)
        deadline.enter_host()
        try:
            return self._fn(*args, **kwargs)
        finally:
            deadline.leave_host()

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("host functions are read-only")

    @property
    def __wrapped__(self) -> Callable[..., Any]:
        return self._fn

    @property
    def __name__(self) -> str:
        return self._name

    @property
    def __doc__(self) -> str | None:  # type: ignore[override]
        return getattr(self._fn, "__doc__", None)

    def __repr__(self) -> str:
        return f"<host function {self._name}>"

    def __reduce__(self) -> Any:
        raise TypeError("host functions cannot be pickled")


register_opaque(HostCall)


def host_call(fn: Callable[..., Any]) -> HostCall:
    """Mark ``fn`` as a host function for the REPL namespace (idempotent)."""
    if isinstance(fn, HostCall):
        return fn
    if not callable(fn):
        raise TypeError(f"host_call needs a callable, not {type(fn).__name__}")
    return HostCall(fn, _TOKEN)
