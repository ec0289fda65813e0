"""Tagged JSON: Python values as deterministic, bounded JSON for fixtures.

Fixtures compare what a REPL leaves in its namespace across implementations and Python versions,
so values must survive a trip through JSON without losing the distinctions that matter (tuple vs
list, NaN, bytes, dict key types) and without dragging in anything that changes between runs
(memory addresses, hash order of sets). Encoding never fails and never recurses without bound:
what cannot be represented becomes a small tagged placeholder.

This module is loaded by file path inside the recorder's driver, which runs under upstream's own
Python with nothing of rlm_compat installed: it must stay standard-library only, with no imports
from its package. The format is documented in docs/conformance.md.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import fractions
import hashlib
import importlib
import json
import math
import re
import types
from collections.abc import Mapping
from typing import Any

__all__ = [
    "MAX_DEPTH",
    "MAX_ITEMS",
    "MAX_STR",
    "DecodeError",
    "canonical",
    "decode",
    "encode",
    "normalize_text",
]

MAX_DEPTH = 12
"""Containers nested deeper than this are summarised as ``{"$deep": type}``."""
MAX_ITEMS = 200
"""Containers with more items than this are summarised as ``{"$digest": ...}``."""
MAX_STR = 4000
"""Strings and bytes longer than this are summarised as ``{"$digest": ...}``."""

_JSON = dict[str, Any] | list[Any] | str | int | float | bool | None

# Types whose repr is a stable, complete description of the value (no addresses, no hash order).
_REPR_TYPES: tuple[type, ...] = (
    complex,
    range,
    slice,
    datetime.date,
    datetime.time,
    datetime.timedelta,
    datetime.timezone,
    decimal.Decimal,
    fractions.Fraction,
    re.Pattern,
    re.Match,
)
_REPR_TYPE_NAMES = frozenset(t.__qualname__ for t in _REPR_TYPES)
_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{4,}\b")


class DecodeError(ValueError):
    """A tagged value that cannot be turned back into a Python object (bad tag or shape)."""


def normalize_text(text: str) -> str:
    """``text`` with memory addresses (``0x7f3a...``) replaced, so reprs compare across runs."""
    return _ADDRESS.sub("0x?", text)


def _type_name(value: object) -> str:
    return type(value).__qualname__


def _digest(kind: str, length: int, blob: bytes, head: str) -> dict[str, Any]:
    return {
        "$digest": {
            "type": kind,
            "len": length,
            "sha256": hashlib.sha256(blob).hexdigest(),
            "head": head,
        }
    }


def _sorted_items(items: list[Any]) -> list[Any]:
    return sorted(items, key=lambda item: json.dumps(item, sort_keys=True, ensure_ascii=True))


def _plain_scalar(value: object) -> int | float | str | bytes | None:
    """The built-in value inside an int / float / str / bytes subclass (its own dunders bypassed)."""
    if isinstance(value, int):
        return int.__index__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, bytes):
        return bytes(memoryview(value))
    return None


class _Encoder:
    """One encoding pass: tracks the containers on the current path to cut cycles."""

    def __init__(self) -> None:
        self._path: set[int] = set()

    def encode(self, value: Any, depth: int) -> Any:
        if value is None or isinstance(value, bool):
            return value
        if type(value) is int:
            return value
        if type(value) is float:
            if math.isnan(value):
                return {"$float": "nan"}
            if math.isinf(value):
                return {"$float": "inf" if value > 0 else "-inf"}
            return value
        if type(value) is str:
            if len(value) > MAX_STR:
                blob = value.encode("utf-8", "surrogatepass")
                return _digest("str", len(value), blob, value[:80])
            return value
        if type(value) in (bytes, bytearray):
            tag = "$bytes" if type(value) is bytes else "$bytearray"
            if len(value) > MAX_STR:
                return _digest(tag[1:], len(value), bytes(value), repr(bytes(value[:40])))
            return {tag: base64.b64encode(bytes(value)).decode("ascii")}
        if isinstance(value, types.ModuleType):
            return {"$module": value.__name__}
        stand_in = getattr(type(value), "__rlm_stand_in__", None)
        if stand_in is not None:  # a value living elsewhere (a REPL worker process)
            type_name, shown = stand_in(value)
            if type_name in _REPR_TYPE_NAMES:
                return {"$repr": {"type": type_name, "repr": normalize_text(shown)}}
            return {"$opaque": type_name}
        if isinstance(value, BaseException):
            return {
                "$exception": {
                    "type": _type_name(value),
                    "args": self._container(list(value.args), depth),
                }
            }
        if isinstance(value, _REPR_TYPES):
            return {"$repr": {"type": _type_name(value), "repr": normalize_text(repr(value))}}
        if isinstance(value, (list, tuple, set, frozenset, dict)):
            return self._collection(value, depth)
        plain = _plain_scalar(value)
        if plain is not None:  # enum members, str subclasses...
            return {"$obj": {"type": _type_name(value), "value": self.encode(plain, depth + 1)}}
        return {"$opaque": _type_name(value)}

    def _collection(self, value: Any, depth: int) -> Any:
        if id(value) in self._path:
            return {"$cycle": _type_name(value)}
        if depth >= MAX_DEPTH:
            return {"$deep": _type_name(value)}
        self._path.add(id(value))
        try:
            encoded = self._collection_body(value, depth)
        finally:
            self._path.discard(id(value))
        if len(value) > MAX_ITEMS:
            text = canonical(encoded)
            return _digest(_type_name(value), len(value), text.encode(), text[:80])
        base = next(t for t in (dict, list, tuple, set, frozenset) if isinstance(value, t))
        if type(value) is not base:
            return {"$obj": {"type": _type_name(value), "value": encoded}}
        return encoded

    def _collection_body(self, value: Any, depth: int) -> Any:
        if isinstance(value, dict):
            return self._mapping(value, depth)
        items = [self.encode(item, depth + 1) for item in value]
        if isinstance(value, list):
            return items
        if isinstance(value, tuple):
            return {"$tuple": items}
        tag = "$frozenset" if isinstance(value, frozenset) else "$set"
        return {tag: _sorted_items(items)}

    def _container(self, items: list[Any], depth: int) -> Any:
        return [self.encode(item, depth + 1) for item in items[:MAX_ITEMS]]

    def _mapping(self, value: Mapping[Any, Any], depth: int) -> Any:
        pairs = [(self.encode(k, depth + 1), self.encode(v, depth + 1)) for k, v in value.items()]
        if all(isinstance(k, str) and not k.startswith("$") for k, _ in pairs):
            return dict(pairs)
        return {"$dict": [[k, v] for k, v in pairs]}


def encode(value: Any) -> Any:
    """``value`` as tagged JSON (never raises; see the module docstring for the bounds)."""
    try:
        return _Encoder().encode(value, 0)
    except RecursionError:
        return {"$deep": _type_name(value)}
    except Exception as exc:  # a hostile __len__ / __iter__ must not break a recording
        return {"$unencodable": f"{_type_name(value)}: {type(exc).__name__}"}


def canonical(value: Any) -> str:
    """The one JSON text of an encoded value: sorted keys, no spaces, ASCII-safe escapes kept."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def decode(data: Any) -> Any:
    """The Python value for tagged JSON ``data`` (the inverse of :func:`encode` where one exists).

    ``$module`` imports the named module (the real object, as upstream's loop puts ``re`` into the
    environment). Tags that only summarise (``$opaque``, ``$digest``, ``$cycle``, ``$deep``...)
    raise DecodeError: they exist to be compared, not rebuilt.
    """
    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    if isinstance(data, list):
        return [decode(item) for item in data]
    if not isinstance(data, dict):
        raise DecodeError(f"not tagged JSON: {type(data).__name__}")
    tags = [k for k in data if k.startswith("$")]
    if not tags:
        return {k: decode(v) for k, v in data.items()}
    if len(data) != 1:
        raise DecodeError(f"a tagged value has exactly one key, got {sorted(data)}")
    tag, body = next(iter(data.items()))
    return _decode_tag(tag, body)


def _decode_tag(tag: str, body: Any) -> Any:
    if tag == "$float":
        values = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
        if body not in values:
            raise DecodeError(f"$float must be one of {sorted(values)}, got {body!r}")
        return values[body]
    if tag in ("$tuple", "$set", "$frozenset"):
        if not isinstance(body, list):
            raise DecodeError(f"{tag} takes a list, got {type(body).__name__}")
        items = [decode(item) for item in body]
        return {"$tuple": tuple, "$set": set, "$frozenset": frozenset}[tag](items)
    if tag in ("$bytes", "$bytearray"):
        if not isinstance(body, str):
            raise DecodeError(f"{tag} takes a base64 string")
        try:
            raw = base64.b64decode(body.encode("ascii"), validate=True)
        except (ValueError, UnicodeEncodeError) as exc:
            raise DecodeError(f"{tag}: invalid base64 ({exc})") from None
        return raw if tag == "$bytes" else bytearray(raw)
    if tag == "$dict":
        if not isinstance(body, list) or not all(isinstance(p, list) and len(p) == 2 for p in body):
            raise DecodeError("$dict takes a list of [key, value] pairs")
        return {_hashable(decode(k)): decode(v) for k, v in body}
    if tag == "$module":
        if not isinstance(body, str):
            raise DecodeError("$module takes a module name")
        try:
            return importlib.import_module(body)
        except ImportError as exc:
            raise DecodeError(f"$module {body!r}: {exc}") from None
    raise DecodeError(f"tag {tag!r} cannot be decoded into a value")


def _hashable(key: Any) -> Any:
    try:
        hash(key)
    except TypeError:
        raise DecodeError(f"$dict key {key!r} is not hashable") from None
    return key
