"""One namespace in profile fixed; 2fb46cc's split namespaces in profile upstream."""

from __future__ import annotations

import sys

import pytest

from rlm_compat.errors import REPLError
from rlm_compat.profiles import Profile
from rlm_compat.repl import REPLExecutor

PY312 = sys.version_info >= (3, 12)

# (code run after `context = "abcdefghij"`, output in fixed, upstream error or output)
CASES = [
    (
        "list_comprehension",
        "print([context[i:i+3] for i in range(0, 9, 3)])",
        "['abc', 'def', 'ghi']",
        "['abc', 'def', 'ghi']" if PY312 else "Execution error: name 'context' is not defined",
    ),
    (
        "set_comprehension",
        "print(len({context[i] for i in range(3)}))",
        "3",
        "3" if PY312 else "Execution error: name 'context' is not defined",
    ),
    (
        "dict_comprehension",
        "print({i: context[i] for i in range(2)})",
        "{0: 'a', 1: 'b'}",
        "{0: 'a', 1: 'b'}" if PY312 else "Execution error: name 'context' is not defined",
    ),
    (
        "generator_body",
        "print(sum(1 for i in range(3) if context[i] == 'a'))",
        "1",
        "Execution error: name 'context' is not defined",
    ),
    ("lambda", "f = lambda: context[:2]\nprint(f())", "ab", "Execution error: name 'context' is not defined"),
    (
        "function_reads_top_level",
        "def f():\n    return context[-1]\nprint(f())",
        "j",
        "Execution error: name 'context' is not defined",
    ),
    (
        "recursion",
        "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\nprint(fib(12))",
        "144",
        "Execution error: name 'fib' is not defined",
    ),
    (
        "nested_function",
        "def outer():\n    def inner():\n        return len(context)\n    return inner()\nprint(outer())",
        "10",
        "Execution error: name 'context' is not defined",
    ),
    (
        "global_statement",
        "def bump():\n    global counter\n    counter = 7\nbump()\nprint(counter)",
        "7",
        "7",
    ),
]


@pytest.mark.parametrize(("name", "code", "fixed", "upstream"), CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("profile", ["fixed", "upstream"])
def test_scoping(profile: str, name: str, code: str, fixed: str, upstream: str) -> None:
    ex = REPLExecutor(profile=profile)
    env: dict = {"context": "abcdefghij"}
    expected = fixed if profile == "fixed" else upstream
    try:
        out = ex.execute(code, env)
    except REPLError as exc:
        out = str(exc)
    assert out == expected


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
