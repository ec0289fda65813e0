"""Plain data (:data:`rlm_compat.custom_tools.PLAIN_TYPES`) as JSON text and back, exactly.

A tool's result is recorded so a replay can answer the call as the tool did; JSON alone would
turn a tuple into a list, ``bytes`` into nothing and a dict with int keys into str keys. What JSON
cannot say is a tagged object ``{"$": kind, "v": ...}``; a dict with a ``"$"`` key is tagged too,
so an untagged object is always a dict of str keys.
"""

from __future__ import annotations

import base64
import json
import math
from typing import Any

__all__ = ["dumps", "loads"]

_TAG = "$"


def dumps(value: Any) -> str:
    """JSON text of plain data (TypeError for anything else)."""
    return json.dumps(_encode(value), ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def loads(text: str) -> Any:
    """The plain data :func:`dumps` wrote (ValueError for text it did not write)."""
    return _decode(json.loads(text))


def _encode(value: Any) -> Any:
    kind = type(value)
    if kind in (str, int, bool) or value is None:
        return value
    if kind is float:
        return value if math.isfinite(value) else {_TAG: "float", "v": repr(value)}
    if kind is bytes:
        return {_TAG: "bytes", "v": base64.b64encode(value).decode("ascii")}
    if kind is list:
        return [_encode(v) for v in value]
    if kind in (tuple, set, frozenset):
        items = value if kind is tuple else sorted(value, key=repr)
        return {_TAG: kind.__name__, "v": [_encode(v) for v in items]}
    if kind is dict:
        if all(type(k) is str for k in value) and _TAG not in value:
            return {k: _encode(v) for k, v in value.items()}
        return {_TAG: "dict", "v": [[_encode(k), _encode(v)] for k, v in value.items()]}
    raise TypeError(f"a {kind.__name__} is not plain data")


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if _TAG not in value:
        return {k: _decode(v) for k, v in value.items()}
    kind, body = value[_TAG], value.get("v")
    if kind == "float" and body in ("nan", "inf", "-inf"):
        return float(body)
    if kind == "bytes" and isinstance(body, str):
        return base64.b64decode(body, validate=True)
    if kind in ("tuple", "set", "frozenset") and isinstance(body, list):
        return {"tuple": tuple, "set": set, "frozenset": frozenset}[kind](_decode(v) for v in body)
    if kind == "dict" and isinstance(body, list) and all(isinstance(p, list) and len(p) == 2 for p in body):
        return {_hashable(_decode(k)): _decode(v) for k, v in body}
    raise ValueError(f"not plain-data JSON: a tagged object of kind {kind!r}")


def _hashable(key: Any) -> Any:
    if isinstance(key, (list, dict, set)):
        raise ValueError("not plain-data JSON: an unhashable dict key")
    return key
