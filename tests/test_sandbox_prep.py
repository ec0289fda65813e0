"""Code preparation: fences, the last expression, compile-time size guards, the compile cache."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlm_compat.errors import REPLError
from rlm_compat.repl import REPLExecutor
from rlm_compat.sandbox.prep import CompileOptions, compile_program, extract


def outcome(code: str, profile: str = "fixed", env: dict | None = None) -> str:
    try:
        return REPLExecutor(profile=profile).execute(code, {} if env is None else env)
    except REPLError as exc:
        return str(exc)


# --- fences -------------------------------------------------------------------------------------

FENCE_CASES = [
    ("python", "```python\nprint(1)\n```", "1", "1"),
    ("py", "```py\nprint(1)\n```", "1", "Execution error: name 'py' is not defined"),
    ("python3", "```python3\nprint(1)\n```", "1", "1"),  # upstream runs `3` then print(1)
    ("repl", "```repl\nprint(1)\n```", "1", "Execution error: name 'repl' is not defined"),
    ("bare", "```\nprint(1)\n```", "1", "1"),
    ("prose_around", "I will count.\n```python\nprint(2)\n```\nThat is all, FINAL soon.", "2", "2"),
    (
        "two_blocks",
        "```python\nx = 1\n```\nand then\n```python\nprint(x + 1)\n```",
        "2",
        "Code executed successfully (no output)",
    ),  # only the first block runs upstream
    ("other_tag_ignored", "```text\nnot code\n```\n```python\nprint(3)\n```", "3", "3"),
    (
        "tilde",
        "~~~python\nprint(4)\n~~~",
        "4",
        "Execution error: Compilation error: Line 3: SyntaxError: invalid syntax at statement: '~~~'",
    ),
    ("no_fence", "x = 5\nprint(x)", "5", "5"),
    (
        "unclosed",
        "```python\nprint(6)",
        "6",
        "Execution error: Compilation error: Line 1: SyntaxError: invalid syntax at statement: '```python'",
    ),
    (
        "only_prose_block",
        "```text\nhello\n```",
        "No code to execute",
        "Execution error: name 'text' is not defined",
    ),
    ("indented_fence", "1. step\n   ```python\n   print(7)\n   ```", "7", "7"),
]


@pytest.mark.parametrize(("name", "text", "fixed", "upstream"), FENCE_CASES, ids=[c[0] for c in FENCE_CASES])
@pytest.mark.parametrize("profile", ["fixed", "upstream"])
def test_fences(profile: str, name: str, text: str, fixed: str, upstream: str) -> None:
    assert outcome(text, profile) == (fixed if profile == "fixed" else upstream)


@given(
    blocks=st.lists(st.sampled_from(["x = 1", "y = 2", "print(3)", "z = [4]"]), min_size=1, max_size=5),
    prose=st.sampled_from(["", "Some text.", "FINAL(maybe)", "a\nb"]),
)
def test_all_blocks_join_in_order(blocks: list[str], prose: str) -> None:
    text = prose + "\n" + "\n".join(f"```python\n{b}\n```\n{prose}" for b in blocks)
    program = extract(text, first_fence_only=False)
    assert program.source == "\n".join(blocks)
    assert program.blocks == len(blocks)


# --- the last expression ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "fixed", "upstream"),
    [
        ("x = []\nx.append(1)\nprint(x)", "[1]", "[1]"),
        (
            "x = []\nx.append(1)",
            "Code executed successfully (no output)",
            "Code executed successfully (no output)",
        ),
        ("diff = 5\ndiff", "5", "Code executed successfully (no output)"),
        ("platform = 3\nplatform", "3", "Code executed successfully (no output)"),
        ("x = 5\nif x > 3:\n    x", "Code executed successfully (no output)", "5"),
        ("'text'", "text", "text"),
        ("None", "Code executed successfully (no output)", "Code executed successfully (no output)"),
        ("print(1)\nprint(2)\n3", "1\n2\n3", "1\n2\n3"),
        ("def f():\n    return 4\nf()", "4", "4"),
        ("[1,\n 2]", "[1, 2]", "Code executed successfully (no output)"),
    ],
)
@pytest.mark.parametrize("profile", ["fixed", "upstream"])
def test_last_expression(profile: str, code: str, fixed: str, upstream: str) -> None:
    assert outcome(code, profile) == (fixed if profile == "fixed" else upstream)


@pytest.mark.parametrize("profile", ["fixed", "upstream"])
def test_last_line_runs_once_in_fixed_twice_in_upstream(profile: str) -> None:
    env: dict = {}
    REPLExecutor(profile=profile).execute("x = []\nx.append(1)", env)
    assert env["x"] == ([1] if profile == "fixed" else [1, 1])


def test_second_evaluation_is_restricted() -> None:
    # The last line alone parses differently from the program: 2fb46cc's plain eval runs
    # `().__reduce_ex__(2)` and prints copyreg internals; the restricted one refuses it.
    code = "s = '''\n().__reduce_ex__(2) #'''"
    assert outcome(code, "upstream") == "Code executed successfully (no output)"


def test_leading_string_does_not_become_a_docstring_in_fixed() -> None:
    env: dict = {}
    REPLExecutor().execute("'doc'\nx = 1", env)
    assert "__doc__" not in env
    env2: dict = {}
    REPLExecutor(profile="upstream").execute("'doc'\nx = 1", env2)
    assert env2["__doc__"] == "doc"


# --- size guards --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "code",
    [
        "x = 2 ** 10 ** 10",
        "x = 1 << 10 ** 9",
        "x = 'a' * 10 ** 10",
        "x = [0] * 10 ** 10",
        "x = pow(7, 10 ** 9)",
        "n = 10 ** 9\nx = 3 ** n",
        "x = (1,) * (2 ** 40)",
    ],
)
@pytest.mark.parametrize("profile", ["fixed", "upstream"])
def test_size_bombs_are_refused_before_computing(profile: str, code: str) -> None:
    with pytest.raises(REPLError, match=r"refused: .*\(sandbox limit"):
        REPLExecutor(timeout=5, profile=profile).execute(code, {})


def test_augmented_bombs_are_refused() -> None:
    with pytest.raises(REPLError, match="refused"):
        REPLExecutor().execute("x = 'ab'\nx *= 10 ** 9", {})
    with pytest.raises(REPLError, match="refused"):
        REPLExecutor().execute("x = 2\nx **= 10 ** 9", {})


def test_ordinary_arithmetic_is_untouched() -> None:
    assert (
        outcome("print(2 ** 100, 3 << 5, 'ab' * 3, [0] * 4, 10 ** 6 * 7)")
        == f"{2**100} 96 ababab [0, 0, 0, 0] 7000000"
    )


# --- compile cache ------------------------------------------------------------------------------


def test_compile_cache_returns_the_same_program() -> None:
    opts = CompileOptions()
    assert compile_program("x = 1 + 1", opts) is compile_program("x = 1 + 1", opts)
    assert compile_program("x = 1 + 1", opts) is not compile_program(
        "x = 1 + 1", CompileOptions(trailing_line_heuristic=True)
    )
