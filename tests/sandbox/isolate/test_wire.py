"""The worker → parent wire format: plain values round-trip; nothing else decodes.

Properties over examples: every plain value the worker may hold comes back equal (and of the same
types); any byte string, and any mutation of a valid message, decodes to a bounded plain value
or fails with a :class:`WireError` — never another exception, never a value of another type.
"""

from __future__ import annotations

import collections
import datetime
import decimal
import fractions
import math
import types
from typing import Any

import pytest
from examples import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from rlm_compat.sandbox.isolate import replies, wire, wire_encode

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**200), max_value=2**200),
    st.floats(allow_nan=False),
    st.text(),
    st.binary(max_size=64),
    st.complex_numbers(allow_nan=False),
    st.decimals(allow_nan=False),
    st.fractions(),
    st.datetimes(timezones=st.none() | st.just(datetime.timezone.utc)),
    st.dates(),
    st.timedeltas(),
)
_hashables = st.recursive(
    _scalars, lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3), max_leaves=6
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(_hashables, inner, max_size=4),
        st.sets(_hashables, max_size=4),
        st.builds(collections.deque, st.lists(inner, max_size=3)),
        st.builds(collections.Counter, st.dictionaries(st.text(max_size=3), st.integers(), max_size=3)),
        st.builds(collections.OrderedDict, st.dictionaries(st.text(max_size=3), inner, max_size=3)),
        st.builds(
            lambda d: types.SimpleNamespace(**d), st.dictionaries(st.text(max_size=3), inner, max_size=3)
        ),
        st.builds(ValueError, inner),
        st.builds(bytearray, st.binary(max_size=8)),
    ),
    max_leaves=20,
)


def _same(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, BaseException):
        return _same(list(a.args), list(b.args))
    if isinstance(a, types.SimpleNamespace):
        return _same(vars(a), vars(b))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, (list, tuple, collections.deque)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


@settings(max_examples=examples(100), deadline=None)
@given(_values)
def test_plain_values_round_trip_with_their_types(value: Any) -> None:
    data, kept = wire_encode.encode_value(value)
    assert not kept
    assert _same(wire.decode(data), value)


@settings(max_examples=examples(150), deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_decode_to_plain_data_or_a_wire_error(data: bytes) -> None:
    try:
        wire.decode(data, wire.WireLimits(max_bytes=1 << 20))
    except wire.WireError as exc:
        assert exc.limit in (None, "bytes", "items", "depth", "int_bytes")


@settings(max_examples=examples(150), deadline=None)
@given(_values, st.data())
def test_a_mutated_value_decodes_or_fails_with_a_wire_error(value: Any, data: st.DataObject) -> None:
    encoded = bytearray(wire_encode.encode_value(value)[0])
    for _ in range(data.draw(st.integers(1, 4))):
        if not encoded:
            break
        where = data.draw(st.integers(0, len(encoded) - 1))
        encoded[where] = data.draw(st.integers(0, 255))
    try:
        wire.decode(bytes(encoded))
    except wire.WireError:
        pass


def test_what_is_not_plain_data_is_a_stand_in_or_refused() -> None:
    data, kept = wire_encode.encode_value({"f": len, "g": [lambda: 0], "m": memoryview(b"x")})
    assert kept
    made = wire.decode(data, stand_in=lambda name, shown: ("stand-in", name))
    assert made == {"f": ("stand-in", "builtin_function_or_method"), "g": [("stand-in", "function")],
                    "m": ("stand-in", "memoryview")}  # fmt: skip
    with pytest.raises(wire.WireError, match="not plain data"):
        wire.decode(data)
    with pytest.raises(wire.Unplain):
        wire_encode.encode([len])


def test_the_worker_keeps_what_the_parent_would_refuse() -> None:
    """Depth, items (counted without sharing: 40 levels of x = [x, x] is 2**40 items), big ints:
    the worker sends a stand-in's name instead, at once, and one message's values share a budget."""
    deep: Any = []
    for _ in range(wire.MAX_DEPTH + 1):
        deep = [deep]
    shared: Any = []
    for _ in range(40):
        shared = [shared, shared]
    assert wire_encode.encode_value(deep) == (b"", True)
    assert wire_encode.Encoder(budget=10_000).value(shared) == (b"", True)
    assert wire_encode.encode_value(1 << (8 * wire.MAX_INT_BYTES))[1]
    encoder = wire_encode.Encoder(budget=100)
    assert not encoder.value(list(range(60)))[1]
    assert encoder.value(list(range(60))) == (b"", True)


def test_limits_name_themselves() -> None:
    with pytest.raises(wire.WireError) as big:
        wire.decode(b"\x90" * 10, wire.WireLimits(max_bytes=5))
    assert big.value.limit == "bytes"
    with pytest.raises(wire.WireError) as many:
        wire.decode(wire_encode.encode_value([[0] * 10] * 10)[0], wire.WireLimits(max_items=50))
    assert many.value.limit == "items"
    with pytest.raises(wire.WireError) as deep:
        wire.decode(b"\x91" * 20 + b"\x90", wire.WireLimits(max_depth=10))
    assert deep.value.limit == "depth"


def test_one_decoder_counts_every_value_of_a_message() -> None:
    decoder = wire.Decoder(wire.WireLimits(max_items=150))
    decoder.decode(wire_encode.encode_value(list(range(100)))[0])
    with pytest.raises(wire.WireError):
        decoder.decode(wire_encode.encode_value(list(range(100)))[0])


@pytest.mark.parametrize(
    "message",
    [
        {"op": "done"},
        {"op": "done", "seq": 1, "result": {"ok": True, "text": "x"}, "values": {"v": ["t", "no", b""]},
         "removed": [], "aliases": {}, "unloadable": {}},
        {"op": "call", "seq": 1, "name": 7, "payload": b""},
        {"op": "ready", "seq": 1, "pid": "1"},
        {"op": "value", "seq": 1, "found": "text"},
        {"op": "synced", "seq": 1, "unloadable": {"a": 1}},
    ],
)  # fmt: skip
def test_a_message_of_the_wrong_shape_is_a_worker_fault(message: dict[str, Any]) -> None:
    with pytest.raises(replies.WorkerFault):
        replies.parse(message, ("done", "call", "ready", "value", "synced"), 1)


def test_a_reply_must_answer_the_request_and_be_expected() -> None:
    assert replies.parse({"op": "ready", "seq": 3, "pid": 9}, ("ready",), 3) == replies.Ready(9)
    with pytest.raises(replies.WorkerFault, match="out of turn"):
        replies.parse({"op": "ready", "seq": 2, "pid": 9}, ("ready",), 3)
    with pytest.raises(replies.WorkerFault, match="unexpected"):
        replies.parse({"op": "ready", "seq": 3, "pid": 9}, ("done",), 3)


def test_plain_classes_cross_as_values() -> None:
    for cls in (int, collections.Counter, datetime.date, decimal.Decimal, fractions.Fraction, KeyError):
        assert wire.decode(wire_encode.encode(cls)) is cls
