"""A request body decoded and checked for what JSON allows but nothing after it can carry.

``json.loads`` accepts bodies that would fail later, far from the client's mistake: nesting deep
enough to exhaust the interpreter's recursion, ``NaN`` / ``Infinity`` / ``1e999`` (not JSON numbers
to any other parser), integers longer than Python converts, and strings with lone surrogates (no
UTF-8 encoding exists, so neither the provider request nor the trajectory could be written). Each is
refused here with a 400 naming the field as the client wrote it (``messages[0].content``).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from .api_errors import ApiError, bad

__all__ = ["MAX_DEPTH", "field_path", "load_body"]

MAX_DEPTH = 32
"""Deepest nesting a body may have; the deepest field this server reads is 5 levels down
(``messages[i].content[j].text``), so 32 leaves room for what clients send and refuse."""

_SURROGATE = re.compile("[\ud800-\udfff]")


MAX_VALUES = 1_000_000
"""JSON values (objects, arrays, their elements) a body may hold. Decoded, a value costs 10-30 times
its bytes (``[]`` is 2 bytes and a 56-byte list), so a body within ``--max-body-bytes`` could
otherwise cost gigabytes; a million values cost at most ~100 MB, and a real request holds a few
hundred (its long texts are single strings)."""

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')


def load_body(raw: bytes) -> Any:
    """The decoded body; ApiError (400) for anything not JSON or not representable downstream."""
    _count_values(raw)
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise bad(f"request body is not valid JSON: {exc}") from None
    except RecursionError:
        raise bad(f"request body is nested deeper than this server reads ({MAX_DEPTH} levels)") from None
    except ValueError as exc:  # an integer over Python's digit limit for conversion
        raise bad(f"request body is not usable JSON: {exc}") from None
    if isinstance(body, (dict, list)):
        _check(body)
    return body


def _count_values(raw: bytes) -> None:
    """Refuse a body of more than MAX_VALUES values before decoding it: the separators and brackets
    bound the count from above (counted at C speed); only a body over that bound is counted exactly,
    outside its strings."""
    if raw.count(b",") + raw.count(b"[") + raw.count(b"{") <= MAX_VALUES:
        return
    outside = _STRING.sub(b"", raw)
    values = outside.count(b",") + outside.count(b"[") + outside.count(b"{")
    if values > MAX_VALUES:
        raise bad(
            f"request body holds about {values:,} JSON values; this server takes at most {MAX_VALUES:,} "
            "(send long text as one string)"
        )


def field_path(parts: list[str | int]) -> str:
    """``["messages", 0, "content"]`` as ``messages[0].content``."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out or "(body)"


def _check(body: Any) -> None:
    """One pass over the decoded value, iteratively (a recursive walk would hit the very limit it
    guards), naming the first offending field; only containers are queued, each with a link to its
    parent, so the pass costs a small fraction of what decoding did."""
    todo: list[tuple[Any, int, _Node]] = [(body, 0, None)]
    while todo:
        value, depth, node = todo.pop()
        if depth > MAX_DEPTH:
            raise _bad_at(
                node, f"is nested deeper than this server reads (at most {MAX_DEPTH} levels)", keys=2
            )
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            if isinstance(key, str) and _SURROGATE.search(key):
                raise _bad_at(node, "has a key holding a lone UTF-16 surrogate")
            if isinstance(item, (dict, list)):
                todo.append((item, depth + 1, (node, key)))
            elif isinstance(item, str):
                if _SURROGATE.search(item):
                    raise _bad_at((node, key), "holds a lone UTF-16 surrogate, which is no character")
            elif isinstance(item, float) and not math.isfinite(item):
                raise _bad_at((node, key), f"is {item!r}: not a finite number (NaN, Infinity, 1e999)")


_Node = tuple[Any, str | int] | None


def _bad_at(node: _Node, what: str, keys: int | None = None) -> ApiError:
    """A 400 naming the field; ``keys``: name only the first object keys of the path (the field the
    client wrote, not a thousand levels of brackets below it)."""
    parts: list[str | int] = []
    while node is not None:
        node, key = node
        parts.append(key)
    parts.reverse()
    if keys is not None:
        leading: list[str | int] = [p for p in parts[:keys] if isinstance(p, str)]
        parts = parts[: len(leading)] if len(leading) == len(parts[:keys]) else leading[:1]
    name = field_path(parts)
    return bad(f"'{name}' {what}", param=name if parts else None)
