"""Tagged JSON (rlm_compat/tools/conformance/values.py): round trips, determinism, bounds."""

from __future__ import annotations

import datetime
import json
import math
import re
from collections import Counter, OrderedDict, defaultdict
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlm_compat.tools.conformance import values

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=30)
    | st.binary(max_size=30)
)
keys = st.text(max_size=8) | st.integers() | st.tuples(st.integers(), st.text(max_size=3))
plain = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.lists(inner, max_size=5).map(tuple)
        | st.dictionaries(keys, inner, max_size=5)
        | st.sets(st.integers() | st.text(max_size=5), max_size=5)
        | st.frozensets(st.integers(), max_size=5)
    ),
    max_leaves=25,
)


def _same(a: Any, b: Any) -> bool:
    """Equality that also tells tuples from lists and 1 from 1.0 / True."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


@given(plain)
def test_round_trip_preserves_types_and_values(value: Any) -> None:
    encoded = values.encode(value)
    assert json.loads(values.canonical(encoded)) == encoded  # plain JSON
    assert _same(values.decode(encoded), value)


@given(st.lists(st.text(max_size=6), max_size=12, unique=True))
def test_sets_encode_independently_of_insertion_order(items: list[str]) -> None:
    forward, backward = set(), set()
    for item in items:
        forward.add(item)
    for item in reversed(items):
        backward.add(item)
    assert values.canonical(values.encode(forward)) == values.canonical(values.encode(backward))


def test_special_floats_are_tagged() -> None:
    assert values.encode([math.nan, math.inf, -math.inf, -0.0]) == [
        {"$float": "nan"},
        {"$float": "inf"},
        {"$float": "-inf"},
        -0.0,
    ]
    assert math.isnan(values.decode({"$float": "nan"}))


def test_dict_keys_that_are_not_plain_strings_use_pairs() -> None:
    assert values.encode({"a": 1}) == {"a": 1}
    assert values.encode({"$a": 1}) == {"$dict": [["$a", 1]]}
    assert values.encode({1: "x", (1, 2): "y"}) == {"$dict": [[1, "x"], [{"$tuple": [1, 2]}, "y"]]}


def test_modules_functions_and_objects() -> None:
    def fn() -> None: ...

    class Thing: ...

    assert values.encode(re) == {"$module": "re"}
    assert values.decode({"$module": "re"}) is re
    assert values.encode(fn) == {"$opaque": "function"}
    assert values.encode(Thing) == {"$opaque": "type"}
    assert values.encode(Thing()) == {"$opaque": "test_modules_functions_and_objects.<locals>.Thing"}
    assert values.encode(map(str, [])) == {"$opaque": "map"}


def test_value_like_objects_by_repr_and_subclasses_by_base() -> None:
    assert values.encode(datetime.timedelta(days=1)) == {
        "$repr": {"type": "timedelta", "repr": "datetime.timedelta(days=1)"}
    }
    assert values.encode(re.compile("a+")) == {"$repr": {"type": "Pattern", "repr": "re.compile('a+')"}}
    counter = values.encode(Counter("aab"))
    assert counter == {"$obj": {"type": "Counter", "value": {"a": 2, "b": 1}}}
    assert values.encode(defaultdict(int))["$obj"]["type"] == "defaultdict"
    assert values.encode(OrderedDict(a=1)) == {"$obj": {"type": "OrderedDict", "value": {"a": 1}}}
    assert values.encode(ValueError("bad", 3)) == {"$exception": {"type": "ValueError", "args": ["bad", 3]}}


def test_bounds_cycles_depth_and_size() -> None:
    loop: list[Any] = [1]
    loop.append(loop)
    assert values.encode(loop) == [1, {"$cycle": "list"}]
    deep: list[Any] = []
    for _ in range(values.MAX_DEPTH + 5):
        deep = [deep]
    text = values.canonical(values.encode(deep))
    assert '{"$deep":"list"}' in text
    big = list(range(values.MAX_ITEMS + 1))
    digest = values.encode(big)["$digest"]
    assert digest["type"] == "list" and digest["len"] == values.MAX_ITEMS + 1
    assert values.encode(list(range(values.MAX_ITEMS + 1)))["$digest"]["sha256"] == digest["sha256"]
    assert values.encode([*big[:-1], -1])["$digest"]["sha256"] != digest["sha256"]
    long = "x" * (values.MAX_STR + 1)
    assert values.encode(long)["$digest"]["len"] == values.MAX_STR + 1


def test_hostile_objects_never_break_encoding() -> None:
    class Liar(list):  # type: ignore[type-arg]
        def __len__(self) -> int:
            raise RuntimeError("no")

    assert "$unencodable" in values.encode(Liar([1]))


def test_addresses_are_normalised() -> None:
    text = f"<function f at {hex(id(test_addresses_are_normalised))}>"
    assert values.normalize_text(text) == "<function f at 0x?>"
    assert values.normalize_text("0x1f is short") == "0x1f is short"


@pytest.mark.parametrize(
    "bad",
    [
        {"$float": "tiny"},
        {"$tuple": 1},
        {"$bytes": "not base64!"},
        {"$dict": [[1]]},
        {"$dict": [[[1], 2]]},
        {"$module": "no_such_module_here"},
        {"$opaque": "function"},
        {"$tuple": [], "x": 1},
    ],
)
def test_decode_rejects_bad_or_summary_tags(bad: Any) -> None:
    with pytest.raises(values.DecodeError):
        values.decode(bad)
