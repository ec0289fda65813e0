"""The parser conformance inputs: stable ids, JSON-able, FINAL-heavy, and agreeing with the model."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections import Counter

from locations import ROOT
from parser_model import model_extract_final, model_extract_final_var, model_is_final

from rlm_compat import parser
from rlm_compat.tools.conformance import parser_cases
from rlm_compat.tools.conformance.parser_cases import (
    EDGE_CASES,
    all_parser_cases,
    edge_cases,
    generate_parser_cases,
)

_ROOT = str(ROOT)

# sha256 of the default corpus as JSON: a change here silently renames every recorded case.
_PINNED = "891b0b23d27dbbe4e7f7645464690f7a5a765baac61fb108da77fc09a02a761d"


def _digest(cases: list[parser_cases.ParserCase]) -> str:
    blob = json.dumps(cases, ensure_ascii=True, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def test_generated_corpus_is_pinned() -> None:
    assert _digest(generate_parser_cases()) == _PINNED


def test_generation_is_deterministic_and_prefix_stable() -> None:
    full = generate_parser_cases()
    assert len(full) == 6000
    assert generate_parser_cases(250) == full[:250]
    assert generate_parser_cases(5, seed=1) != full[:5]
    assert [case["id"] for case in full[:3]] == ["parser.gen.00001", "parser.gen.00002", "parser.gen.00003"]


def test_same_corpus_in_another_interpreter_process() -> None:
    """Hash randomisation and interpreter state must not leak into the cases."""
    code = (
        "import hashlib, json; from rlm_compat.tools.conformance.parser_cases import "
        "generate_parser_cases as g; print(hashlib.sha256(json.dumps(g(), ensure_ascii=True, "
        "sort_keys=True, separators=(',', ':')).encode()).hexdigest())"
    )
    for seed in ("0", "12345"):
        out = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            env={"PYTHONHASHSEED": seed, "PYTHONPATH": _ROOT},
            check=True,
        )
        assert out.stdout.strip() == _digest(generate_parser_cases())


def test_cases_are_well_formed_json() -> None:
    cases = all_parser_cases()
    ids = [case["id"] for case in cases]
    assert len(ids) == len(set(ids)) == 6000 + len(EDGE_CASES)
    assert ids == sorted(ids)
    for case in cases:
        assert set(case) == {"id", "response", "env"}
        assert isinstance(case["response"], str)
        for name, value in case["env"].items():
            assert isinstance(name, str)
            assert (
                value is None
                or isinstance(value, (str, int))
                or (isinstance(value, list) and all(isinstance(v, str) for v in value))
            )
        assert json.loads(json.dumps(case, ensure_ascii=False)) == case


def test_edge_cases_cover_the_quirks() -> None:
    assert len(EDGE_CASES) >= 60
    names = {case["id"].removeprefix("parser.edge.") for case in EDGE_CASES}
    for required in (
        "greedy_triple",
        "space_before_paren",
        "escaped_double_quote",
        "final_var_missing",
        "final_var_present",
        "final_var_hyphen",
        "final_var_then_final",
        "empty",
        "unicode_answer",
        "bytes_literal",
    ):
        assert required in names
    copy = edge_cases()
    copy[0]["env"]["mutated"] = 1
    assert "mutated" not in EDGE_CASES[0]["env"]


def test_corpus_exercises_every_outcome() -> None:
    """Generated cases hit each upstream outcome often, including the disagreements."""
    seen: Counter[str] = Counter()
    for case in generate_parser_cases():
        text, env = case["response"], case["env"]
        final, var = parser.extract_final(text), parser.extract_final_var(text, env)
        seen["extract_final"] += final is not None
        seen["extract_final_var"] += var is not None
        seen["is_final"] += parser.is_final(text)
        seen["final_but_no_answer"] += parser.is_final(text) and parser.parse_response(text, env) is None
        seen["answer_but_not_final"] += (not parser.is_final(text)) and parser.parse_response(
            text, env
        ) is not None
        resolved = parser.resolve_final(text, env)
        seen["fixed_answer"] += resolved.answer is not None
        seen["fixed_feedback"] += resolved.feedback is not None
    assert min(seen.values()) >= 300, seen


def test_upstream_exact_functions_match_the_model_on_the_corpus() -> None:
    for case in all_parser_cases():
        text, env = case["response"], case["env"]
        assert parser.extract_final(text) == model_extract_final(text), case["id"]
        assert parser.extract_final_var(text, env) == model_extract_final_var(text, env), case["id"]
        assert parser.is_final(text) is model_is_final(text), case["id"]
