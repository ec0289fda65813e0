"""The iteration guard: ``iter(fn, sentinel)`` stepping in Python, so a timeout can stop an endless one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .registry import register_opaque

__all__ = ["callable_iterator", "safe_iter"]

try:
    iter(1, 2)  # type: ignore[call-overload]
except TypeError as _exc:  # this Python's own wording
    _ITER_NOT_CALLABLE = str(_exc)


class callable_iterator:
    """``iter(fn, sentinel)`` stepping in Python, so a timeout can stop an endless one."""

    __slots__ = ("_done", "_fn", "_sentinel")
    __module__ = "builtins"  # shown as <class 'callable_iterator'>, like CPython's

    def __init__(self, fn: Any, sentinel: Any) -> None:
        self._fn = fn
        self._sentinel = sentinel
        self._done = False

    def __iter__(self) -> callable_iterator:
        return self

    def __next__(self) -> Any:
        if self._done:
            raise StopIteration
        value = self._fn()
        if value == self._sentinel:
            self._done = True
            raise StopIteration
        return value


def safe_iter(obj: Any, *sentinel: Any) -> Iterator[Any]:
    """``iter``; the two-argument form runs in Python so a timeout can stop an endless one."""
    if sentinel:
        if len(sentinel) > 1:
            raise TypeError(f"iter expected at most 2 arguments, got {1 + len(sentinel)}")
        if not callable(obj):
            raise TypeError(_ITER_NOT_CALLABLE)
        return callable_iterator(obj, sentinel[0])
    return iter(obj)


register_opaque(callable_iterator)
