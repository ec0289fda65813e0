"""Differential tests against a live ysz/recursive-llm checkout (``RLM_COMPAT_UPSTREAM``).

The checkout's ``src/rlm/parser.py`` is loaded by file path, so ``rlm/__init__`` (which imports
litellm) never runs. Without the variable every test here is skipped with a reason; with it set to
something that is not a checkout, they fail rather than pass vacuously.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from examples import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parser_model import final_heavy_text, model_parse_response, text_and_env
from upstream_checkout import missing

from rlm_compat import parser
from rlm_compat.tools.conformance.parser_cases import all_parser_cases

pytestmark = pytest.mark.upstream

_FUNCTIONS = ("extract_final", "extract_final_var", "is_final", "parse_response")


@pytest.fixture(scope="module")
def upstream() -> ModuleType:
    root = os.environ.get("RLM_COMPAT_UPSTREAM")
    if not root:
        missing("RLM_COMPAT_UPSTREAM is not set (path to a ysz/recursive-llm checkout)")
    path = Path(root) / "src" / "rlm" / "parser.py"
    assert path.is_file(), f"RLM_COMPAT_UPSTREAM={root!r} has no src/rlm/parser.py"
    spec = importlib.util.spec_from_file_location("_rlm_upstream_parser", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name in _FUNCTIONS:
        assert callable(getattr(module, name, None)), f"{path} has no {name}()"
    return module


def _outcomes(module: Any, text: str, env: dict[str, Any]) -> tuple[Any, ...]:
    return (
        module.extract_final(text),
        module.extract_final_var(text, env),
        module.is_final(text),
        module.parse_response(text, env),
    )


def test_corpus_matches_upstream(upstream: ModuleType) -> None:
    cases = all_parser_cases()
    assert len(cases) >= 6000
    mismatches = [
        case["id"]
        for case in cases
        if _outcomes(parser, case["response"], case["env"])
        != _outcomes(upstream, case["response"], case["env"])
    ]
    assert not mismatches, f"{len(mismatches)} cases differ, first: {mismatches[:10]}"


@settings(
    max_examples=examples(1500),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(st.one_of(text_and_env(), st.tuples(final_heavy_text, st.just({"answer": "A", "x": 1}))))
def test_hypothesis_matches_upstream(upstream: ModuleType, case: tuple[str, dict[str, Any]]) -> None:
    text, env = case
    expected = _outcomes(upstream, text, env)
    assert _outcomes(parser, text, env) == expected
    assert model_parse_response(text, env) == expected[3]
