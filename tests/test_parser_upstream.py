"""The upstream-exact parser functions against an independent model of 2fb46cc's documented rules."""

from __future__ import annotations

import re
import sys
from typing import Any

import pytest
import upstream_truth as truth
from examples import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parser_model import (
    FRAGMENTS,
    NAMES,
    final_heavy_text,
    final_var_like,
    model_extract_final,
    model_extract_final_var,
    model_is_final,
    model_parse_response,
    text_and_env,
)

from rlm_compat import parser
from rlm_compat.tools.conformance import values

_MANY = settings(max_examples=examples(700), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_MANY
@given(text_and_env())
def test_all_four_functions_match_the_model(case: tuple[str, dict[str, Any]]) -> None:
    text, env = case
    assert parser.extract_final(text) == model_extract_final(text)
    assert parser.extract_final_var(text, env) == model_extract_final_var(text, env)
    assert parser.is_final(text) is model_is_final(text)
    assert parser.parse_response(text, env) == model_parse_response(text, env)


@_MANY
@given(
    st.lists(st.sampled_from(['"""', "'''", '"', "'", "FINAL(", "FINAL (", "x", "\n", " "]), max_size=16).map(
        "".join
    )
)
def test_quote_forms_and_greediness_match_the_model(text: str) -> None:
    assert parser.extract_final(text) == model_extract_final(text)


@_MANY
@given(
    st.lists(st.one_of(final_var_like, st.sampled_from(FRAGMENTS)), max_size=5).map("".join),
    st.dictionaries(st.sampled_from([*NAMES, "1", "my"]), st.integers(), max_size=4),
)
def test_final_var_matches_the_model(text: str, env: dict[str, Any]) -> None:
    assert parser.extract_final_var(text, env) == model_extract_final_var(text, env)
    assert parser.parse_response(text, env) == model_parse_response(text, env)


@settings(max_examples=examples(300), deadline=None)
@given(final_heavy_text, st.text(max_size=8))
def test_result_types(text: str, value: str) -> None:
    env = {"answer": value, "x": 3}
    for result in (
        parser.extract_final(text),
        parser.extract_final_var(text, env),
        parser.parse_response(text, env),
    ):
        assert result is None or type(result) is str
    assert type(parser.is_final(text)) is bool


@settings(max_examples=examples(200), deadline=None)
@given(st.text(max_size=30), st.sampled_from(["answer", "x", "résumé", "a1", "_p"]))
def test_final_var_resolves_str_of_the_value(prefix: str, name: str) -> None:
    text = prefix.replace("FINAL", "") + f"\nFINAL_VAR({name})"
    for value in ("text", 42, None, ["a", "b"]):
        assert parser.extract_final_var(text, {name: value}) == str(value)
    assert parser.extract_final_var(text, {}) is None


def test_model_character_classes_equal_re_classes() -> None:
    """The model's isspace / isalnum reading of ``\\s`` / ``\\w`` holds for every code point."""
    every = "".join(map(chr, range(sys.maxunicode + 1)))
    assert re.findall(r"\s", every) == [c for c in every if c.isspace()]
    assert re.findall(r"\w", every) == [c for c in every if c.isalnum() or c == "_"]


# Documented quirks of 2fb46cc (../shared/reference/upstream-2fb46cc.md), as parser edge cases whose
# results are recorded from the checkout (upstream_fixtures/parser.jsonl).
QUIRK_CASES = [
    "space_before_paren",
    "greedy_triple",
    "triple_beats_earlier_double",
    "double_beats_earlier_single",
    "escaped_double_quote",
    "padded_answer_stripped",
    "assign_then_final_var",
    "final_var_space_not_final",
    "prefixed_name",
    "unquoted_name_present",
]


@pytest.mark.parametrize("name", QUIRK_CASES)
def test_documented_quirks(name: str) -> None:
    line = truth.parser_line(f"parser.edge.{name}")
    response, env = line["input"]["response"], values.decode(line["input"]["env"])
    assert {
        "extract_final": parser.extract_final(response),
        "extract_final_var": parser.extract_final_var(response, env),
        "is_final": parser.is_final(response),
        "parse_response": parser.parse_response(response, env),
    } == line["expected"]
