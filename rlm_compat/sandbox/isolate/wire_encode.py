"""The worker's side of :mod:`.wire`: plain values encoded for the parent, within its limits.

The worker encodes with the limits the parent decodes with, counted the way the parent counts
them (no sharing: a list holding one list twice counts it twice), so a legitimate worker never
sends what its parent would refuse: a value over them crosses as a stand-in naming its type. A
value that is not plain data (a function, an instance of a model's class, a module proxy) becomes
a stand-in carrying its type name and a short repr, wherever it sits.
"""

from __future__ import annotations

import collections
import datetime
import decimal
import fractions
import types
from typing import Any

import msgpack

from .wire import (
    CLASS_NAMES,
    COMPLEX_LAYOUT,
    COUNTER,
    DATE,
    DATETIME,
    DECIMAL,
    DEFAULT,
    DEQUE,
    EXCEPTION,
    EXCEPTIONS,
    EXT_BIGINT,
    EXT_BYTEARRAY,
    EXT_CLASS,
    EXT_COMPLEX,
    EXT_MARK,
    EXT_STANDIN,
    FRACTION,
    FROZENSET,
    MAPPINGS,
    MAX_DEPTH,
    MAX_INT_BYTES,
    MAX_ITEMS,
    NAME_CHARS,
    NAME_LENGTH,
    NAMESPACE,
    ORDERED,
    RANGE,
    SEQUENCES,
    SET,
    SLICE,
    TIME,
    TIMEDELTA,
    TIMEZONE,
    TUPLE,
    Unplain,
)

__all__ = ["Encoder", "encode", "encode_value", "pack_message", "short_repr"]


def short_repr(value: Any, limit: int = NAME_CHARS) -> str:
    """``repr(value)``, at most ``limit`` characters, never raising."""
    try:
        text = repr(value)
    except BaseException:
        return f"<{type(value).__name__}>"
    if type(text) is not str:
        return f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _standin(value: Any) -> msgpack.ExtType:
    name = type(value).__qualname__[:NAME_CHARS].encode("utf-8", "replace")
    shown = short_repr(value).encode("utf-8", "replace")
    return msgpack.ExtType(EXT_STANDIN, NAME_LENGTH.pack(len(name)) + name + shown)


def _marked(kind: int, *parts: Any) -> list[Any]:
    return [_MARKS[kind], *parts]


_MARKS = {kind: msgpack.ExtType(EXT_MARK, bytes([kind])) for kind in range(1, 19)}
_REDUCED = {
    datetime.date: DATE,
    datetime.datetime: DATETIME,
    datetime.time: TIME,
    datetime.timedelta: TIMEDELTA,
    datetime.timezone: TIMEZONE,
}


def _to_wire(value: Any, stand_ins: bool) -> Any:
    """``msgpack``'s ``default``: what a value that is not native MessagePack becomes."""
    kind = type(value)
    if kind is tuple:
        return _marked(TUPLE, *value)
    if kind is set or kind is frozenset:
        return _marked(SET if kind is set else FROZENSET, *value)
    if kind is int:  # past 64 bits
        size = value.bit_length() // 8 + 1
        if size > MAX_INT_BYTES:
            return _refuse(value, stand_ins)
        return msgpack.ExtType(EXT_BIGINT, value.to_bytes(size, "big", signed=True))
    if kind is complex:
        return msgpack.ExtType(EXT_COMPLEX, COMPLEX_LAYOUT.pack(value.real, value.imag))
    if kind is bytearray:
        return msgpack.ExtType(EXT_BYTEARRAY, bytes(value))
    if kind is collections.Counter or kind is collections.OrderedDict:
        return _marked(COUNTER if kind is collections.Counter else ORDERED, dict(value))
    if kind is collections.defaultdict:
        return _marked(DEFAULT, value.default_factory, dict(value))
    if kind is collections.deque:
        return _marked(DEQUE, value.maxlen, list(value))
    if kind is types.SimpleNamespace:
        return _marked(NAMESPACE, dict(vars(value)))
    if kind is slice or kind is range:
        return _marked(SLICE if kind is slice else RANGE, value.start, value.stop, value.step)
    if kind in _REDUCED:
        return _marked(_REDUCED[kind], *value.__reduce__()[1])
    if kind is decimal.Decimal:
        return _marked(DECIMAL, str(value))
    if kind is fractions.Fraction:
        return _marked(FRACTION, value.numerator, value.denominator)
    if EXCEPTIONS.get(kind.__name__) is kind:
        return _marked(EXCEPTION, kind.__name__, list(value.args))
    if isinstance(value, type) and value in CLASS_NAMES:
        return msgpack.ExtType(EXT_CLASS, CLASS_NAMES[value].encode())
    return _refuse(value, stand_ins)


def _refuse(value: Any, stand_ins: bool) -> Any:
    if stand_ins:
        return _standin(value)
    raise Unplain(f"a {type(value).__name__} is not plain data")


_LEAVES = frozenset({str, bytes, int, float, bool, type(None), complex})
_NATIVE_BYTES = frozenset({bytearray, memoryview})
"""Packed by msgpack as ``bytes`` whatever ``strict_types`` says: swapped before packing."""


def _cost(value: Any, budget: int) -> tuple[int, bool] | None:
    """The items ``value`` costs the parent's count (never less than the parent counts: a
    marked container's marker and wrapper count too), or None when it is over ``budget`` or
    :data:`MAX_DEPTH`. No sharing: a list holding one list twice counts it twice; counting
    stops as soon as it is over, so a value that shares itself exponentially costs at most the
    budget. The flag: whether it holds a ``bytearray`` or ``memoryview`` (see :func:`_swap`)."""
    left = budget
    swap = False
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        kind = type(item)
        if kind in _LEAVES:
            continue
        if depth >= MAX_DEPTH:
            return None
        if kind in SEQUENCES:
            left -= 3 + len(item)
            children: Any = item
        elif kind in MAPPINGS:
            left -= 3 + 2 * len(item)
            children = [*item, *item.values()]
        elif kind is types.SimpleNamespace:
            left -= 3 + 2 * len(vars(item))
            children = list(vars(item).values())
        elif EXCEPTIONS.get(kind.__name__) is kind:
            left -= 3 + len(item.args)
            children = item.args
        elif kind is slice:
            left -= 4
            children = (item.start, item.stop, item.step)
        else:
            swap = swap or kind in _NATIVE_BYTES
            left -= 4
            continue
        if left < 0:
            return None
        if not _LEAVES.issuperset(map(type, children)):  # a flat container: nothing to push
            pending.extend((child, depth + 1) for child in children if type(child) not in _LEAVES)
    return budget - left, swap


def _swap(item: Any, stand_ins: bool, kept: list[bool]) -> Any:
    """``item`` with each ``bytearray`` as its own extension type and each ``memoryview``
    refused (msgpack would pack both as ``bytes``); lists and dicts rebuilt, the marked
    containers are rebuilt by ``default`` (only for values that hold one: rare)."""
    kind = type(item)
    if kind is bytearray:
        return msgpack.ExtType(EXT_BYTEARRAY, bytes(item))
    if kind is memoryview:
        kept.append(True)
        return _refuse(item, stand_ins)
    if kind is list:
        return [_swap(child, stand_ins, kept) for child in item]
    if kind is dict:
        return {_swap(key, stand_ins, kept): _swap(child, stand_ins, kept) for key, child in item.items()}
    return item


class Encoder:
    """The worker's side of one message: values encoded against one shared item budget, so
    that what it sends in one message is never over what the parent counts for one message."""

    def __init__(self, budget: int = MAX_ITEMS) -> None:
        self.left = budget

    def value(self, value: Any, *, stand_ins: bool = True) -> tuple[bytes, bool]:
        """``value`` for the parent, and whether anything in it had to stay behind.

        With ``stand_ins``, a value that is not plain data (a function, an instance of a
        model's class, a module proxy) becomes a stand-in carrying its type name and a short
        repr, wherever it sits; a value over the limits crosses as ``(b"", True)`` (the parent
        names it by type). Without, either raises :class:`Unplain`.
        """
        counted = _cost(value, self.left)
        if counted is None:
            if stand_ins:
                return b"", True
            raise Unplain(f"a {type(value).__name__} over the limits of what leaves the worker")
        cost, swap = counted
        kept: list[bool] = []

        def default(item: Any) -> Any:
            wired = _to_wire(item, stand_ins)
            if type(wired) is msgpack.ExtType and wired.code == EXT_STANDIN:
                kept.append(True)
            elif swap and type(wired) is list:
                wired = [wired[0], *(_swap(child, stand_ins, kept) for child in wired[1:])]
            return wired

        if swap:
            value = _swap(value, stand_ins, kept)

        try:
            data = msgpack.packb(
                value, default=default, strict_types=True, use_bin_type=True, unicode_errors="surrogatepass"
            )
        except (ValueError, OverflowError, MemoryError) as exc:  # msgpack's nesting limit, memory
            if stand_ins:
                return b"", True
            raise Unplain(f"{type(exc).__name__}: {exc}") from None
        self.left -= cost
        return data, bool(kept)


def encode_value(value: Any, *, stand_ins: bool = True) -> tuple[bytes, bool]:
    """One value on its own (see :meth:`Encoder.value`)."""
    return Encoder().value(value, stand_ins=stand_ins)


def encode(value: Any) -> bytes:
    """Plain data only (host-call arguments): :class:`Unplain` for anything else."""
    return encode_value(value, stand_ins=False)[0]


def pack_message(message: dict[str, Any]) -> bytes:
    """A message's envelope (strings, numbers, bytes, lists and string-keyed dicts)."""
    return bytes(msgpack.packb(message, use_bin_type=True, unicode_errors="surrogatepass"))
