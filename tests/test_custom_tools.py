"""Custom tools as given to ``RLM(...)``: rlms' shapes, names refused at construction, the prompt's lines."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlm_compat import RLM
from rlm_compat.clients import ScriptedClient
from rlm_compat.custom_tools import RESERVED_NAMES, Tool, parse_tools, plain_size
from rlm_compat.errors import ConfigurationError
from rlm_compat.prompts import PROMPT_VERSIONS, build_system_prompt
from rlm_compat.settings.run_config import run_config


def _rlm(**kwargs: Any) -> RLM:
    return RLM("m", client=ScriptedClient([]), **kwargs)


def lookup(user_id: int, *, verbose: bool = False) -> dict[str, Any]:
    """Look up a user.

    More text the prompt leaves out.
    """
    return {"id": user_id}


def test_rlms_shapes_become_functions_and_values() -> None:
    tools = parse_tools(
        {
            "lookup": lookup,
            "described": {"tool": lookup, "description": "find one"},
            "LIMIT": 3,
            "rows": [1, "a"],
        }
    )
    assert [(t.name, t.is_function) for t in tools] == [
        ("lookup", True),
        ("described", True),
        ("LIMIT", False),
        ("rows", False),
    ]
    lines = [t.prompt_line() for t in tools]
    assert lines[0] == (
        "- lookup(user_id: int, *, verbose: bool = False) -> dict[str, typing.Any]: Look up a user. "
        "(a host tool: takes and returns plain data)"
    )
    assert lines[1].startswith("- described(user_id: int") and ": find one (a host tool" in lines[1]
    assert lines[2:] == ["- LIMIT: int (custom data)", "- rows: list (custom data)"]


@pytest.mark.parametrize(
    "name", [*sorted(RESERVED_NAMES), "context_0", "history_12", "print", "len", "_x", "class", "a-b"]
)
def test_names_that_would_shadow_the_repls_own_are_refused(name: str) -> None:
    with pytest.raises(ConfigurationError, match=r"custom_tools\["):
        _rlm(custom_tools={name: lookup})


@pytest.mark.parametrize(
    ("given", "match"),
    [
        ({"f": {"tool": lookup, "timeot": 3}}, "unknown keys"),
        ({"f": {"tool": lookup, "timeout": 0}}, "timeout must be"),
        ({"f": {"tool": lookup, "max_result_bytes": "big"}}, "max_result_bytes must be"),
        ({"f": {"tool": lookup, "description": 3}}, "description must be a str"),
        ({"V": {"tool": 3, "timeout": 1}}, "is a value, not a function"),
        ({"V": object()}, "an? object is not plain data"),
        ({"V": [1, {2: lambda: 0}]}, "a function is not plain data"),
        ([("f", lookup)], "must be a dict"),
    ],
)
def test_bad_tools_get_a_configuration_error_naming_them(given: Any, match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        _rlm(custom_tools=given)


def test_sub_tools_default_to_the_tools_and_children_get_them() -> None:
    settings = _rlm(custom_tools={"lookup": lookup}).settings
    assert settings.custom_sub_tools == settings.custom_tools
    assert settings.child().custom_tools == settings.custom_tools
    none_below = _rlm(custom_tools={"lookup": lookup}, custom_sub_tools={}).settings
    assert none_below.custom_sub_tools == () and none_below.child().custom_tools == ()
    assert none_below.child().child().custom_tools == ()


def test_the_record_keeps_names_never_a_functions_value_and_a_value_only_with_content() -> None:
    tools = {"lookup": lookup, "KEY": "sk-value"}
    config = run_config(_rlm(custom_tools=tools).settings, None)
    assert [row["name"] for row in config["custom_tools"]] == ["lookup", "KEY"]
    assert config["custom_tools"][1]["value"] == '"sk-value"' and config["custom_tools"][0]["value"] is None
    redacted = run_config(_rlm(custom_tools=tools, capture_trajectory_content=False).settings, None)
    assert redacted["custom_tools"][1]["value"] is None


@pytest.mark.parametrize("version", sorted(PROMPT_VERSIONS))
def test_each_prompt_lists_tools_after_re_and_is_unchanged_without(version: str) -> None:
    plain = build_system_prompt(1000, 0, 2, version=version)
    assert build_system_prompt(1000, 0, 2, version=version, tools=()) == plain
    lines = ["- lookup(x): find (a host tool: takes and returns plain data)", "- K: int (custom data)"]
    listed = build_system_prompt(1000, 0, 2, version=version, tools=lines)
    assert listed.replace("\n" + "\n".join(lines), "") == plain
    assert listed.index("- re: already imported") < listed.index(lines[0])


_plain = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text() | st.binary(),
    lambda inner: (
        st.lists(inner)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text() | st.integers(), inner)
        | st.frozensets(st.integers() | st.text())
    ),
    max_leaves=20,
)


@given(_plain)
def test_plain_size_counts_each_leaf_and_stops_at_the_limit(value: Any) -> None:
    size = plain_size(value)
    assert size >= 8 or type(value) in (str, bytes)
    if size > 0:
        with pytest.raises(OverflowError):
            plain_size(value, size - 1)
    assert plain_size(value, size) == size


def test_a_subclass_or_a_deep_nest_is_not_plain() -> None:
    class Text(str):
        pass

    with pytest.raises(TypeError, match="a Text is not plain data"):
        plain_size(["a", Text("b")])
    deep: list[Any] = []
    for _ in range(100):
        deep = [deep]
    with pytest.raises(TypeError, match="nested deeper"):
        plain_size(deep)
    assert Tool("f", lookup).is_function and not Tool("f", lookup).is_async
