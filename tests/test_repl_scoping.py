"""One namespace in profile fixed; 2fb46cc's split namespaces in profile upstream."""

from __future__ import annotations

import pytest
import upstream_truth as truth

from rlm_compat.errors import REPLError
from rlm_compat.profiles import Profile
from rlm_compat.repl import REPLExecutor

# rlm_compat's own expectation in profile fixed (one namespace), by case of
# inputs/repl/namespaces.toml; what upstream does on each Python is recorded in the fixtures.
FIXED = {
    "list_comprehension": "['abc', 'def', 'ghi']",
    "set_comprehension": "3",
    "dict_comprehension": "{0: 'a', 1: 'b'}",
    "generator_body": "1",
    "lambda": "ab",
    "function_reads_top_level": "j",
    "recursion": "144",
    "nested_function": "10",
    "global_statement": "7",
}


NAMESPACES = truth.recorded("namespaces")


def _run(code: str, profile: str) -> str:
    env: dict = {"context": "abcdefghij"}
    try:
        return REPLExecutor(profile=profile).execute(code, env)
    except REPLError as exc:
        return str(exc)


@pytest.mark.parametrize("line", NAMESPACES, ids=[truth.name(line) for line in NAMESPACES])
def test_scoping_as_upstream_recorded(line: dict) -> None:
    truth.skip_unless_comparable(line)
    assert truth.replay(line) == truth.recorded_steps(line)


@pytest.mark.parametrize(("name", "fixed"), FIXED.items(), ids=list(FIXED))
def test_scoping_fixed(name: str, fixed: str) -> None:
    [code] = truth.line(f"repl.namespaces.{name}")["input"]["steps"]
    assert _run(code, "fixed") == fixed


def test_fixed_functions_see_later_and_earlier_steps() -> None:
    ex = REPLExecutor()
    env: dict = {}
    ex.execute("def total():\n    return sum(values) * factor", env)
    ex.execute("values = [1, 2, 3]", env)
    ex.execute("factor = 10", env)
    assert ex.execute("total()", env) == "60"
    ex.execute("def fact(n):\n    return 1 if n <= 1 else n * fact(n - 1)", env)
    assert ex.execute("fact(10)", env) == "3628800"


def test_fixed_global_statement_across_steps() -> None:
    ex = REPLExecutor()
    env: dict = {"hits": 0}
    ex.execute("def hit():\n    global hits\n    hits += 1", env)
    ex.execute("hit()\nhit()", env)
    assert env["hits"] == 2


def test_fixed_functions_keep_working_after_the_call_returns() -> None:
    """Inline, the function itself lands in env and the host can call it."""
    env: dict = {}
    REPLExecutor(isolation="inline").execute("def double(x):\n    return [v * 2 for v in x]", env)
    assert "__builtins__" not in env
    assert env["double"]([1, 2]) == [2, 4]


def test_separate_scopes_switch_alone() -> None:
    ex = REPLExecutor(profile=Profile.fixed().replace(separate_scopes=True))
    env: dict = {"context": "abc"}
    with pytest.raises(REPLError, match="name 'context' is not defined"):
        ex.execute("f = lambda: context\nf()", env)
    ex2 = REPLExecutor(profile=Profile.upstream().replace(separate_scopes=False))
    assert "context" in ex2.execute("f = lambda: 'context'\nf()", env)
