"""Plain data through the record's JSON text and back, exactly (a tool's result, replayed)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlm_compat import plain_json

_keys = st.text() | st.integers() | st.booleans() | st.none() | st.binary() | st.tuples(st.integers())
_plain = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text() | st.binary(),
    lambda inner: (
        st.lists(inner)
        | st.tuples(inner, inner)
        | st.dictionaries(_keys, inner)
        | st.sets(st.integers() | st.text())
        | st.frozensets(st.binary())
    ),
    max_leaves=25,
)


def _same(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=False))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


@given(_plain)
def test_plain_data_comes_back_with_its_types(value: Any) -> None:
    assert _same(plain_json.loads(plain_json.dumps(value)), value)


def test_non_finite_floats_and_the_tag_key_itself() -> None:
    back = plain_json.loads(plain_json.dumps([math.inf, -math.inf, {"$": 1}]))
    assert back[:2] == [math.inf, -math.inf] and back[2] == {"$": 1}
    assert math.isnan(plain_json.loads(plain_json.dumps(math.nan)))


@pytest.mark.parametrize(
    "text", ['{"$": "module", "v": "os"}', '{"$": "dict", "v": [[[1], 2]]}', '{"$": "bytes", "v": "!"}']
)
def test_text_it_did_not_write_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        plain_json.loads(text)


def test_anything_else_is_not_written() -> None:
    with pytest.raises(TypeError):
        plain_json.dumps([object()])
