"""Host functions placed in the REPL namespace (recursive_llm, llm_query, FINAL, FINAL_VAR).

Sandboxed code calls them like any function. While one runs, the execution's timeout is paused
(a ``recursive_llm`` call may spend minutes waiting for a model) and no timeout is injected into
host code. What it raises reaches the sandboxed code as the same exception class with the same
message, but rebuilt from plain data: ``AttributeError.obj``, ``KeyError`` arguments and the like
must not hand host objects to sandboxed code. Exception classes outside the builtins and
rlm_compat's own errors become ``RuntimeError("<Class>: <message>")``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import REPLError, RLMError
from .context import LOCAL
from .policy import register_opaque, sandbox_classes
from .violations import TimeoutSignal

__all__ = ["HostCall", "host_call", "sanitized"]

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
        if state is None:  # called by host code, outside any execution
            return self._fn(*args, **kwargs)
        deadline = state.deadline
        if deadline is not None:
            deadline.enter_host()
        try:
            return self._fn(*args, **kwargs)
        except (TimeoutSignal, KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:
            raise sanitized(exc) from None
        finally:
            if deadline is not None:
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


_PLAIN = (str, int, float, bool, type(None), bytes)


def _plain(value: Any, depth: int = 0) -> bool:
    if type(value) in _PLAIN:
        return True
    if type(value) in (tuple, list, frozenset, set) and depth < 3:
        return all(_plain(v, depth + 1) for v in value)
    return False


def sanitized(exc: BaseException) -> BaseException:
    """The exception sandboxed code may see: same class and message, no host objects."""
    cls = type(exc)
    if cls in sandbox_classes():
        return exc  # raised by sandboxed code the host called back into: its own object
    args = tuple(a if _plain(a) else str(a) for a in exc.args)
    ours = cls.__module__ == "builtins" or (
        issubclass(cls, (REPLError, RLMError)) and cls.__module__.startswith("rlm_compat.")
    )
    if ours:
        try:
            return cls(*args)
        except Exception:
            pass
    return RuntimeError(f"{cls.__name__}: {exc}")


def host_call(fn: Callable[..., Any]) -> HostCall:
    """Mark ``fn`` as a host function for the REPL namespace (idempotent)."""
    if isinstance(fn, HostCall):
        return fn
    if not callable(fn):
        raise TypeError(f"host_call needs a callable, not {type(fn).__name__}")
    return HostCall(fn, _TOKEN)
