"""Host functions placed in the REPL namespace (recursive_llm, llm_query, FINAL, FINAL_VAR).

A host function has a *kind*: ``"call"`` (arguments passed as they are), ``"answer"`` (``FINAL``:
the argument becomes its final-answer text *before* the host is entered, so a model-defined
``__str__`` runs under the step's deadline and limits, in the worker when there is one, and the
host only ever receives a bounded ``str``) or ``"answer_var"`` (``FINAL_VAR``: the variable is
looked up in the running step's namespace and rendered the same way; the host receives
``(name, text)``, or ``(name, None)`` when no such variable exists) or ``"namespace"``
(``SHOW_VARS``: no arguments; the host receives the running step's variables as they are at the
call, ``{name: type name}``, listed on the sandbox's side — in the worker when there is one).

Sandboxed code calls them like any function. While one runs, the execution's timeout is paused
(a ``recursive_llm`` call may spend minutes waiting for a model) and no timeout is injected into
host code. What it raises reaches the sandboxed code as the same exception class with the same
message, but rebuilt from plain data: ``AttributeError.obj``, ``KeyError`` arguments and the like
must not hand host objects to sandboxed code. Exception classes outside the builtins and
rlm_compat's own errors become ``RuntimeError("<Class>: <message>")``.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from ...errors import REPLError, RLMError
from ..restrict.context import LOCAL
from ..restrict.modules import ModuleProxy
from ..restrict.registry import register_opaque, sandbox_classes
from ..restrict.violations import TimeoutSignal
from ..restrict.warnguard import register_host_boundary
from .texts import Texts

__all__ = ["HOST_KINDS", "HostCall", "bounded_str", "host_call", "sanitized"]

HOST_KINDS = ("call", "answer", "answer_var", "namespace")

_TOKEN = object()


class HostCall:
    """A host-provided callable; sandboxed code can call it but not build or subclass one."""

    __slots__ = ("_fn", "_kind", "_name")

    _fn: Callable[..., Any]
    _kind: str
    _name: str

    def __new__(cls, fn: Callable[..., Any], token: object = None, kind: str = "call") -> HostCall:
        if token is not _TOKEN:
            raise TypeError("host functions can only be made by host code (rlm_compat.sandbox.host_call)")
        self = object.__new__(cls)
        object.__setattr__(self, "_fn", fn)
        object.__setattr__(self, "_kind", kind)
        object.__setattr__(self, "_name", getattr(fn, "__name__", type(fn).__name__))
        return self

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        state = LOCAL.state
        if self._kind != "call":
            args = self._answer_args(state, args, kwargs)
            kwargs = {}
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

    def _answer_args(self, state: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        """FINAL / FINAL_VAR: the text of the answer, made on the sandbox's side of the call;
        SHOW_VARS: the namespace's listing, made there too (None outside any execution)."""
        if self._kind == "namespace":
            if args or kwargs:
                raise TypeError(f"{self._name}() takes no arguments ({len(args) + len(kwargs)} given)")
            return (None if state is None else namespace_listing(state.env),)
        if kwargs or len(args) != 1:
            raise TypeError(f"{self._name}() takes exactly one argument ({len(args) + len(kwargs)} given)")
        limit = None if state is None else state.answer_chars
        if self._kind == "answer":
            return (bounded_str(args[0], limit),)
        name = args[0]
        namespace = None if state is None else state.env
        if isinstance(name, str) and namespace is not None and name in namespace:
            return (name, bounded_str(namespace[name], limit))
        return (_name_text(name), None)

    def prepared(self, *args: Any) -> Any:
        """Call with arguments a worker already prepared (see :meth:`_answer_args`).

        A worker runs FINAL / FINAL_VAR's preparation on its side of the boundary and sends the
        result; preparing it again here would see two arguments. Only the prepared shapes are
        accepted: ``(text,)`` for FINAL, ``(name, text or None)`` for FINAL_VAR, texts as ``str``.
        """
        shape = {"answer": 1, "answer_var": 2, "namespace": 1}.get(self._kind)
        if shape is None:
            return self(*args)
        if self._kind == "namespace":
            well_formed = len(args) == 1 and _is_listing(args[0])
        else:
            texts = args[:1] if self._kind == "answer" else args[1:]
            well_formed = len(args) == shape and all(t is None or isinstance(t, str) for t in texts)
        if not well_formed:
            raise TypeError(f"{self._name}(): malformed prepared arguments from the REPL worker")
        return self._fn(*args)

    @property
    def kind(self) -> str:
        """``"call"``, ``"answer"``, ``"answer_var"`` or ``"namespace"`` (see the module docstring)."""
        return self._kind

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
register_host_boundary(HostCall.__call__.__code__)


_PLAIN = (str, int, float, bool, type(None), bytes)
NAME_CHARS = 1000
"""FINAL_VAR's argument when no variable has it as its name: a ``str`` cut to this length, or
the repr of any other value (cut to 200 characters), made on the sandbox's side; the host only
ever names it in a message (and looks for a variable holding that text)."""


def _name_text(name: Any) -> str:
    if type(name) is str:
        return name[:NAME_CHARS]
    try:
        text = repr(name)
    except Exception:
        return f"<{type(name).__name__}>"
    text = text if type(text) is str else f"<{type(name).__name__}>"
    return text if len(text) <= 200 else text[:197] + "..."


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


def namespace_listing(namespace: Any) -> dict[str, str]:
    """``{name: type name}`` of a step's variables: no ``_names``, modules or host functions."""
    return {
        name: str(type(value).__name__)
        for name, value in list(namespace.items())
        if isinstance(name, str)
        and not name.startswith("_")
        and not isinstance(value, (types.ModuleType, ModuleProxy, HostCall))
    }


def _is_listing(value: Any) -> bool:
    return type(value) is dict and all(type(k) is str and type(v) is str for k, v in value.items())


def host_call(fn: Callable[..., Any], kind: str = "call") -> HostCall:
    """Mark ``fn`` as a host function of ``kind`` for the REPL namespace (idempotent)."""
    if isinstance(fn, HostCall):
        return fn
    if not callable(fn):
        raise TypeError(f"host_call needs a callable, not {type(fn).__name__}")
    if kind not in HOST_KINDS:
        raise ValueError(f"host function kind must be one of {HOST_KINDS}, not {kind!r}")
    return HostCall(fn, _TOKEN, kind)


def bounded_str(value: Any, limit: int | None) -> str:
    """``str(value)`` as a final answer: a real ``str``, at most ``limit`` characters.

    A plain container whose text would be longer is refused before it is made: a list of a
    million references to one long string renders to gigabytes, which would cost seconds and
    the memory to build only to be refused.
    """
    if limit is not None:
        floor = rendered_floor(value, limit)
        if floor > limit:
            raise REPLError(Texts.answer_too_long(floor, limit, at_least=True))
    text = str(value)
    if type(text) is not str:  # a str subclass from a model-defined __str__
        text = str.__str__(text)
    if limit is not None and len(text) > limit:
        raise REPLError(Texts.answer_too_long(len(text), limit))
    return text


_PLAIN_SEQUENCES = (list, tuple, set, frozenset)
_MIN_REPR = {int: 1, float: 3, bool: 4, type(None): 4, complex: 2}


def rendered_floor(value: Any, limit: int) -> int:
    """A lower bound of ``len(str(value))`` for plain containers of plain values, counted
    without making any text; it stops as soon as it passes ``limit`` (so it costs at most about
    ``limit`` elements). Anything else counts 0 (its text is made and measured as usual)."""
    kind = type(value)
    if kind is str:
        return len(value)
    if kind not in _PLAIN_SEQUENCES and kind is not dict:
        return 0
    total = 0
    pending = [value]
    while pending and total <= limit:
        item = pending.pop()
        kind = type(item)
        if kind is str:
            total += len(item) + 2  # quotes
        elif kind is bytes:
            total += len(item) + 3
        elif kind in _PLAIN_SEQUENCES or kind is dict:
            n = len(item)
            total += 2 + max(0, 2 * n - 2) + (2 * n if kind is dict else 0)  # brackets, ", ", ": "
            if total > limit:
                break
            pending.extend(item)
            if kind is dict:
                pending.extend(item.values())
        else:
            total += _MIN_REPR.get(kind, 0)
    return total
