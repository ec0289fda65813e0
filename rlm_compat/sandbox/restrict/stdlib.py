"""Stand-ins for the few standard-library functions that would reach past the guards.

Most allowlisted functions (see :mod:`.modules`) are handed out as they are. The ones here take
attribute names at run time (``operator.attrgetter``), build numbers the size guards bound
(``operator.mul``), write into objects (``operator.setitem``), act on a class in place
(``dataclasses.dataclass``, ``functools.total_ordering``), write to ``sys.stdout`` (``pprint``)
or block in one C call (``time.sleep``): each is wrapped so sandboxed code gets Python's
behaviour on its own objects and the sandbox's refusal elsewhere.
"""

from __future__ import annotations

import dataclasses
import decimal
import functools
import hashlib
import pprint
import time
from collections.abc import Callable
from typing import Any

from .attributes import checked_getattr
from .classes import check_bases
from .context import LOCAL
from .registry import sandbox_classes
from .sizes import guarded_lshift, guarded_mul, guarded_pow
from .violations import ForbiddenAttributeError, ForbiddenWriteError
from .writes import register_writable, write_guard

__all__ = ["overrides"]

_SLEEP_SLICE = 0.05
"""Longest single C-level sleep: between slices the step's deadline can land."""


def sleep(secs: Any) -> None:
    """``time.sleep`` that the step's deadline interrupts (a long sleep is slices of one)."""
    if not isinstance(secs, (int, float)) or secs <= 0:
        time.sleep(secs)  # Python's own errors for a bad argument; returns at once for 0
        return
    end = time.monotonic() + secs
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(left, _SLEEP_SLICE))


def _dotted(name: Any) -> Callable[[Any], Any]:
    if not isinstance(name, str):
        raise TypeError("attribute name must be a string")
    parts = name.split(".")

    def get(obj: Any) -> Any:
        for part in parts:
            obj = checked_getattr(obj, part)
        return obj

    return get


class attrgetter:
    """``operator.attrgetter`` whose every attribute read passes the sandbox's guards."""

    __slots__ = ("_getters", "_names")

    def __init__(self, attr: Any, *attrs: Any) -> None:
        self._names = (attr, *attrs)
        self._getters = tuple(_dotted(a) for a in self._names)

    def __call__(self, obj: Any) -> Any:
        if len(self._getters) == 1:
            return self._getters[0](obj)
        return tuple(get(obj) for get in self._getters)

    def __repr__(self) -> str:
        return f"operator.attrgetter({', '.join(map(repr, self._names))})"


class methodcaller:
    """``operator.methodcaller`` whose method lookup passes the sandbox's guards."""

    __slots__ = ("_args", "_kwargs", "_name")

    def __init__(self, name: Any, /, *args: Any, **kwargs: Any) -> None:
        if not isinstance(name, str):
            raise TypeError("method name must be a string")
        self._name = name
        self._args = args
        self._kwargs = kwargs

    def __call__(self, obj: Any) -> Any:
        return checked_getattr(obj, self._name)(*self._args, **self._kwargs)

    def __repr__(self) -> str:
        args = [repr(self._name), *map(repr, self._args)]
        args += [f"{k}={v!r}" for k, v in self._kwargs.items()]
        return f"operator.methodcaller({', '.join(args)})"


def setitem(a: Any, b: Any, c: Any) -> None:
    """``operator.setitem`` through the write guard, as ``a[b] = c`` in sandboxed code."""
    write_guard(a)[b] = c


def delitem(a: Any, b: Any) -> None:
    """``operator.delitem`` through the write guard, as ``del a[b]`` in sandboxed code."""
    del write_guard(a)[b]


def _own_class(fn: Callable[..., Any], what: str) -> Callable[..., Any]:
    """A class decorator that may only modify classes sandboxed code created."""

    @functools.wraps(fn)
    def decorate(cls: Any = None, /, **kwargs: Any) -> Any:
        def apply(target: Any) -> Any:
            if not isinstance(target, type) or target not in sandbox_classes():
                raise ForbiddenWriteError(f"{what} applies only to classes defined in the sandbox")
            return fn(target, **kwargs)

        return apply if cls is None else apply(cls)

    return decorate


def make_dataclass(
    cls_name: Any, fields: Any, *, bases: Any = (), namespace: Any = None, **kwargs: Any
) -> Any:
    """``dataclasses.make_dataclass`` held to the rules of a sandboxed ``class`` statement.

    Its namespace may hold no ``_`` names (as ``type(name, bases, dict)`` in the sandbox) and
    its bases pass the same checks, so it cannot install a finalizer or subclass a guard; the
    class it makes is the sandbox's own (its objects are writable).
    """
    ns = dict(namespace or {})
    private = sorted(repr(k) for k in ns if not isinstance(k, str) or k.startswith("_"))
    if private:
        raise ForbiddenAttributeError(
            f"make_dataclass(): namespace names may not start with '_' in the sandbox: {', '.join(private)}"
        )
    if not isinstance(bases, tuple):
        raise TypeError("make_dataclass(): bases must be a tuple")
    check_bases(bases)
    cls = dataclasses.make_dataclass(cls_name, fields, bases=bases, namespace=ns, **kwargs)
    sandbox_classes().add(cls)
    return cls


class _StepOutput:
    """A text stream writing into the running step's output (for pprint's default stream)."""

    def write(self, text: str) -> int:
        state = LOCAL.state
        if state is not None:
            state.sink.write(text)
        return len(text)


def _stream(stream: Any) -> Any:
    return _StepOutput() if stream is None else stream


class PrettyPrinter(pprint.PrettyPrinter):
    """``pprint.PrettyPrinter`` printing into the step's output by default (not sys.stdout)."""

    def __init__(self, *args: Any, stream: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, stream=_stream(stream), **kwargs)  # type: ignore[misc]


def pprint_(obj: Any, stream: Any = None, *args: Any, **kwargs: Any) -> None:
    """``pprint.pprint`` into the step's output."""
    pprint.pprint(obj, _stream(stream), *args, **kwargs)


def pp(obj: Any, *args: Any, sort_dicts: bool = False, **kwargs: Any) -> None:
    """``pprint.pp`` into the step's output."""
    stream = kwargs.pop("stream", None)
    pprint.pprint(obj, _stream(stream), *args, sort_dicts=sort_dicts, **kwargs)


pprint_.__name__ = pprint_.__qualname__ = "pprint"


_DECIMAL_TEMPLATES = (decimal.DefaultContext, decimal.BasicContext, decimal.ExtendedContext)
register_writable(decimal.Context, lambda ctx: all(ctx is not t for t in _DECIMAL_TEMPLATES))


def overrides() -> dict[str, dict[str, Any]]:
    """Per module: the names whose sandboxed version differs from the standard library's."""
    return {
        "time": {"sleep": sleep},
        "hashlib": {
            "algorithms_available": frozenset(hashlib.algorithms_available),
            "algorithms_guaranteed": frozenset(hashlib.algorithms_guaranteed),
        },
        "operator": {
            "attrgetter": attrgetter,
            "methodcaller": methodcaller,
            "setitem": setitem,
            "delitem": delitem,
            "mul": guarded_mul,
            "pow": guarded_pow,
            "lshift": guarded_lshift,
        },
        "dataclasses": {
            "dataclass": _own_class(dataclasses.dataclass, "dataclass()"),
            "make_dataclass": make_dataclass,
        },
        "functools": {"total_ordering": _own_class(functools.total_ordering, "total_ordering()")},
        "pprint": {"pprint": pprint_, "pp": pp, "PrettyPrinter": PrettyPrinter},
    }
