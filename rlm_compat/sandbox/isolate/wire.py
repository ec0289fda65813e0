"""What a worker sends its parent: bounded trees of plain values, as MessagePack with limits.

A worker runs model code, and model code may have escaped every layer above the OS (see
docs/security.md, "The channel"). So the parent decodes what a worker sends as hostile data, and
the format is chosen so that decoding cannot be a weapon *by construction*, not by an allowlist
of constructors:

- **No references.** MessagePack has none: a value shared a million times costs its bytes a
  million times in the message, so a few hundred bytes can never become gigabytes (or an
  exponential hash) on the parent's side.
- **No constructor calls with arbitrary arguments.** Containers other than ``list`` and ``dict``
  (``tuple``, ``set``, ``deque``, ``Counter``...) are an array led by a one-byte marker; the
  parent builds each from an already decoded, already counted list, after checking the
  arguments' types (a ``deque`` gets a materialised list and a bounded ``maxlen``, never an
  iterator). Leaves outside MessagePack (``complex``, big ``int``, ``bytearray``, a class, a
  stand-in for a value that stays in the worker) have fixed, length-checked layouts.
- **Limits checked while decoding.** :class:`WireLimits`: the message's bytes (announced
  lengths never exceed them), the number of items across the whole message (counted as each
  container closes, so decoding stops at the first container over it), the depth (MessagePack
  itself stops at 1,024 levels, so nothing hashed while decoding is deeper than that; the tree is
  then held to :data:`MAX_DEPTH`), and the size of a big ``int``. Every failure is a
  :class:`WireError` naming the limit or the malformation, never another exception.

The worker encodes with the same limits (:mod:`.wire_encode`): what the parent would refuse, a
legitimate worker keeps (the parent gets a stand-in naming its type). The names without an
underscore here are the format's definition, shared by both sides.
"""

from __future__ import annotations

import builtins
import collections
import dataclasses
import datetime
import decimal
import fractions
import struct
import types
from collections.abc import Callable
from typing import Any, NoReturn

import msgpack

__all__ = [
    "MAX_DEPTH",
    "MAX_INT_BYTES",
    "MAX_ITEMS",
    "NAME_CHARS",
    "PLAIN_CLASSES",
    "Decoder",
    "Unplain",
    "WireError",
    "WireLimits",
    "decode",
]

MAX_DEPTH = 100
"""Nesting of containers in one value (a list in a list... counts one per level)."""
MAX_ITEMS = 1 << 22
"""Elements (a dict entry counts two) across one decoded message or value."""
MAX_INT_BYTES = 1 << 12
"""The longest ``int`` that crosses, in bytes (about 9,860 decimal digits)."""
NAME_CHARS = 200
"""Type names and the reprs carried by stand-ins are cut to this many characters."""

EXT_MARK, EXT_BIGINT, EXT_COMPLEX, EXT_BYTEARRAY, EXT_STANDIN, EXT_CLASS = 1, 2, 3, 4, 5, 6
COMPLEX_LAYOUT = struct.Struct("!dd")
NAME_LENGTH = struct.Struct("!H")


# container kinds: the byte after a marker (an array led by a marker is that container)
TUPLE, SET, FROZENSET, COUNTER, ORDERED, DEFAULT, DEQUE, NAMESPACE = range(1, 9)
SLICE, RANGE, EXCEPTION, DATE, DATETIME, TIME, TIMEDELTA, TIMEZONE = range(9, 17)
DECIMAL, FRACTION = 17, 18
SEQUENCES = frozenset({list, tuple, set, frozenset, collections.deque})
MAPPINGS = frozenset({dict, collections.Counter, collections.OrderedDict, collections.defaultdict})


class WireError(ValueError):
    """What a worker sent is not a well-formed, within-limits message.

    ``limit`` names the limit that was passed (``"bytes"``, ``"items"``, ``"depth"``,
    ``"int_bytes"``), or is None for a malformation (``what`` says which).
    """

    def __init__(self, what: str, limit: str | None = None) -> None:
        super().__init__(what)
        self.what = what
        self.limit = limit


class Unplain(TypeError):
    """A value (or something inside it) is not plain data, and no stand-in was allowed."""


@dataclasses.dataclass(frozen=True)
class WireLimits:
    """The parent's limits for one message (``max_bytes`` None: no byte limit)."""

    max_bytes: int | None = None
    max_items: int = MAX_ITEMS
    max_depth: int = MAX_DEPTH
    max_int_bytes: int = MAX_INT_BYTES


EXCEPTIONS: dict[str, type[BaseException]] = {
    name: value
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
}
CLASS_NAMES: dict[type, str] = {
    cls: f"{cls.__module__}.{cls.__qualname__}"
    for cls in (
        bool, bytearray, bytes, complex, dict, float, frozenset, int, list, range, set, slice, str,
        tuple, collections.Counter, collections.OrderedDict, collections.defaultdict,
        collections.deque, datetime.date, datetime.datetime, datetime.time, datetime.timedelta,
        datetime.timezone, decimal.Decimal, fractions.Fraction, types.SimpleNamespace,
        *EXCEPTIONS.values(),
    )
}  # fmt: skip
_CLASSES_BY_NAME = {name: cls for cls, name in CLASS_NAMES.items()}
PLAIN_CLASSES = frozenset(CLASS_NAMES)
"""The classes whose instances cross as plain data (and which cross as values themselves)."""


# --- the parent's side ------------------------------------------------------------------------


class _Marker:
    """A decoded container marker: only ever the first element of the array it leads."""

    __slots__ = ("kind",)
    __hash__ = None  # type: ignore[assignment]  # so a stray marker can never be a dict key

    def __init__(self, kind: int) -> None:
        self.kind = kind


_MARKERS = {bytes([kind]): _Marker(kind) for kind in range(1, 19)}


def _bad(what: str, limit: str | None = None) -> NoReturn:
    raise WireError(what, limit)


def _mapping(parts: list[Any], at: int) -> dict[Any, Any]:
    if len(parts) != at + 1 or type(parts[at]) is not dict:
        _bad("a mapping's entries are not a map")
    return parts[at]  # type: ignore[no-any-return]


def _int_or_none(value: Any) -> bool:
    return value is None or type(value) is int


def _build(kind: int, parts: list[Any]) -> Any:
    """The container a marked array stands for, from its decoded parts (types checked first)."""
    if kind == TUPLE:
        return tuple(parts)
    if kind == SET:
        return set(parts)
    if kind == FROZENSET:
        return frozenset(parts)
    if kind == COUNTER:
        return collections.Counter(_mapping(parts, 0))
    if kind == ORDERED:
        return collections.OrderedDict(_mapping(parts, 0))
    if kind == DEFAULT:
        factory = parts[0] if parts else None
        if not (factory is None or factory in CLASS_NAMES or getattr(factory, "__rlm_stand_in__", None)):
            _bad("a defaultdict's factory is not a plain class")
        return collections.defaultdict(factory, _mapping(parts, 1))
    if kind == DEQUE:
        if len(parts) != 2 or type(parts[1]) is not list or not _int_or_none(parts[0]):
            _bad("a deque is not (maxlen, items)")
        if parts[0] is not None and not 0 <= parts[0] < 1 << 62:
            _bad("a deque's maxlen is out of range")
        return collections.deque(parts[1], parts[0])
    if kind == NAMESPACE:
        attributes = _mapping(parts, 0)
        if not all(type(key) is str for key in attributes):
            _bad("a namespace has a key that is not a str")
        return types.SimpleNamespace(**attributes)
    if kind in (SLICE, RANGE):
        if len(parts) != 3:
            _bad("a slice or range is not (start, stop, step)")
        if kind == SLICE:
            return slice(*parts)
        if not all(type(p) is int for p in parts) or parts[2] == 0:
            _bad("a range is not three ints with a non-zero step")
        return range(*parts)
    if kind == EXCEPTION:
        if len(parts) != 2 or type(parts[0]) is not str or type(parts[1]) is not list:
            _bad("an exception is not (name, args)")
        cls = EXCEPTIONS.get(parts[0])
        if cls is None:
            _bad("an exception that is not a builtin one")
        return cls(*parts[1])
    if kind in (DATE, DATETIME, TIME, TIMEDELTA, TIMEZONE):
        return _moment(kind, parts)
    if kind == DECIMAL:
        if len(parts) != 1 or type(parts[0]) is not str or len(parts[0]) > 4 * MAX_INT_BYTES:
            _bad("a Decimal is not a short str")
        return decimal.Decimal(parts[0])
    if len(parts) != 2 or not all(type(p) is int for p in parts) or parts[1] <= 0:
        _bad("a Fraction is not (int, positive int)")
    return fractions.Fraction(parts[0], parts[1])


def _moment(kind: int, parts: list[Any]) -> Any:
    """``date`` / ``datetime`` / ``time`` from their fixed-size state bytes (and a ``timezone``),
    ``timedelta`` from three ints, ``timezone`` from a ``timedelta`` and a short name."""
    if kind == TIMEDELTA:
        if len(parts) != 3 or not all(type(p) is int for p in parts):
            _bad("a timedelta is not three ints")
        return datetime.timedelta(*parts)
    if kind == TIMEZONE:
        if not 1 <= len(parts) <= 2 or type(parts[0]) is not datetime.timedelta:
            _bad("a timezone is not (offset, [name])")
        if len(parts) == 2 and (type(parts[1]) is not str or len(parts[1]) > NAME_CHARS):
            _bad("a timezone's name is not a short str")
        return datetime.timezone(*parts)
    if not 1 <= len(parts) <= 2 or type(parts[0]) is not bytes or len(parts[0]) > 10:
        _bad("a date or time is not its state bytes")
    if len(parts) == 2 and (kind == DATE or type(parts[1]) is not datetime.timezone):
        _bad("a date or time's zone is not a timezone")
    cls = {DATE: datetime.date, DATETIME: datetime.datetime, TIME: datetime.time}[kind]
    return cls(*parts)


class _Decoding:
    """One message's decoding: the hooks msgpack calls, sharing one item count.

    Every item costs at least one byte, so while the bytes decoded stay within ``max_items``
    nothing needs counting (the common case: a step's reply is a few hundred bytes); from the
    first decode that passes it, every container is counted, starting from the bytes before it
    (an upper bound of the items they held).
    """

    def __init__(self, limits: WireLimits, stand_in: Callable[[str, str], Any] | None) -> None:
        self.limits = limits
        self.stand_in = stand_in
        self.items = 0
        self.bytes = 0

    def counting(self, size: int) -> bool:
        """Whether a decode of ``size`` more bytes must count its items (see the class)."""
        seen = self.bytes
        self.bytes += size
        if self.bytes <= self.limits.max_items:
            return False
        self.items = max(self.items, seen)
        return True

    def count(self, n: int) -> None:
        self.items += n
        if self.items > self.limits.max_items:
            _bad(f"more than {self.limits.max_items} items", "items")

    def on_list(self, items: list[Any]) -> Any:
        self.count(len(items))
        if items and type(items[0]) is _Marker:
            return _build(items[0].kind, items[1:])
        return items

    def on_map(self, entries: dict[Any, Any]) -> Any:
        self.count(2 * len(entries))
        return entries

    @staticmethod
    def on_marked(items: list[Any]) -> Any:
        """:meth:`on_list` for a decode that counts nothing."""
        if items and type(items[0]) is _Marker:
            return _build(items[0].kind, items[1:])
        return items

    def on_ext(self, code: int, data: bytes) -> Any:
        if code == EXT_MARK:
            marker = _MARKERS.get(data)
            if marker is None:
                _bad("an unknown container marker")
            return marker
        if code == EXT_BIGINT:
            if len(data) > self.limits.max_int_bytes:
                _bad(f"an int of more than {self.limits.max_int_bytes} bytes", "int_bytes")
            return int.from_bytes(data, "big", signed=True)
        if code == EXT_COMPLEX:
            if len(data) != COMPLEX_LAYOUT.size:
                _bad("a complex of the wrong size")
            return complex(*COMPLEX_LAYOUT.unpack(data))
        if code == EXT_BYTEARRAY:
            return bytearray(data)
        if code == EXT_CLASS:
            cls = _CLASSES_BY_NAME.get(data.decode("ascii", "replace"))
            if cls is None:
                _bad("a class that is not plain data")
            return cls
        if code == EXT_STANDIN:
            return self._standin(data)
        _bad(f"an unknown extension type {code}")

    def _standin(self, data: bytes) -> Any:
        if self.stand_in is None:
            _bad("a value that is not plain data")
        if len(data) < NAME_LENGTH.size:
            _bad("a short stand-in")
        (size,) = NAME_LENGTH.unpack_from(data)
        name = data[NAME_LENGTH.size : NAME_LENGTH.size + size].decode("utf-8", "replace")
        shown = data[NAME_LENGTH.size + size :].decode("utf-8", "replace")
        return self.stand_in(name[:NAME_CHARS], shown[: NAME_CHARS + 3])


class Decoder:
    """The parent's side of one message: everything decoded through one decoder (the envelope,
    then each value in it) shares one item count, so a message of many values is held to the
    same limits as a message of one."""

    def __init__(
        self, limits: WireLimits = WireLimits(), stand_in: Callable[[str, str], Any] | None = None
    ) -> None:
        self._decoding = _Decoding(limits, stand_in)

    def decode(
        self, data: bytes, stand_in: Callable[[str, str], Any] | None = None, *, envelope: bool = False
    ) -> Any:
        """One message or value from a worker, checked against the limits; :class:`WireError`
        else. A stand-in is made with ``stand_in(type_name, repr)`` (this call's, else the
        decoder's; refused without one). ``envelope``: a message's envelope, whose every field
        the reader checks by exact type (:mod:`.replies`): its items and bytes are counted, it
        holds no extension type, and its tree is not walked again (MessagePack's own stack
        bounds its depth)."""
        decoding = self._decoding
        if stand_in is not None:
            decoding.stand_in = stand_in
        limits = decoding.limits
        if limits.max_bytes is not None and len(data) > limits.max_bytes:
            _bad(f"a message of {len(data)} bytes, over {limits.max_bytes}", "bytes")
        hooks: dict[str, Any] = {"ext_hook": _no_extension if envelope else decoding.on_ext}
        if decoding.counting(len(data)):
            hooks.update(list_hook=decoding.on_list, object_hook=decoding.on_map)
        elif not envelope:
            hooks.update(list_hook=decoding.on_marked)
        left = max(0, limits.max_items - decoding.items)
        try:
            value = msgpack.unpackb(
                data,
                use_list=True,
                raw=False,
                strict_map_key=False,
                unicode_errors="surrogatepass",
                max_array_len=min(len(data), left),
                max_map_len=min(len(data) // 2, left // 2),
                **hooks,
            )
        except WireError:
            raise
        except msgpack.StackError:
            _bad("nested deeper than the decoder's stack", "depth")
        except Exception as exc:  # msgpack's own errors, a constructor refusing its arguments
            # (ValueError, TypeError, decimal's InvalidOperation...): hostile data, never a crash
            _bad(f"malformed ({type(exc).__name__}: {str(exc)[:NAME_CHARS]})")
        if not envelope:
            _check_tree(value, limits, decoding.stand_in)
        return value


def _no_extension(code: int, data: bytes) -> NoReturn:
    """An envelope holds only strings, numbers, bytes, lists and maps: no extension type."""
    _bad(f"an extension type ({code}) in a message's envelope")


def decode(
    data: bytes,
    limits: WireLimits = WireLimits(),
    stand_in: Callable[[str, str], Any] | None = None,
    *,
    envelope: bool = False,
) -> Any:
    """One message or value on its own (see :meth:`Decoder.decode`)."""
    return Decoder(limits, stand_in).decode(data, envelope=envelope)


_PLAIN_LEAVES = frozenset(
    {
        str, bytes, int, float, bool, type(None), complex, bytearray, range, datetime.date,
        datetime.datetime, datetime.time, datetime.timedelta, datetime.timezone, decimal.Decimal,
        fractions.Fraction, type,
    }
)  # fmt: skip


def _check_tree(value: Any, limits: WireLimits, stand_in: Callable[[str, str], Any] | None) -> None:
    """Hold the decoded tree to ``max_depth`` and to plain types (a stray marker, say)."""
    standin_type = None
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        kind = type(item)
        if kind in _PLAIN_LEAVES or (isinstance(item, type) and item in CLASS_NAMES):
            continue
        if depth >= limits.max_depth:
            _bad(f"nested deeper than {limits.max_depth}", "depth")
        if kind in SEQUENCES:
            children: Any = item
        elif kind in MAPPINGS:
            children = [*item, *item.values()]
            if kind is collections.defaultdict:
                children.append(item.default_factory)
        elif kind is types.SimpleNamespace:
            children = list(vars(item).values())
        elif kind is slice:
            children = (item.start, item.stop, item.step)
        elif EXCEPTIONS.get(kind.__name__) is kind:
            children = item.args
        elif stand_in is not None and getattr(kind, "__rlm_stand_in__", None) is not None:
            standin_type = standin_type or kind
            if kind is not standin_type:
                _bad("a stand-in of another type")
            continue
        else:
            _bad(f"a {kind.__name__} where plain data belongs")
        if not _PLAIN_LEAVES.issuperset(map(type, children)):  # a flat container: nothing to push
            pending.extend((child, depth + 1) for child in children if type(child) not in _PLAIN_LEAVES)
