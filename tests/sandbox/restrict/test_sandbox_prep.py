"""Code preparation: fences, the last expression, compile-time size guards, the compile cache."""

from __future__ import annotations

import pytest
import upstream_truth as truth
from hypothesis import given
from hypothesis import strategies as st

from rlm_compat.errors import REPLError
from rlm_compat.repl import REPLExecutor
from rlm_compat.sandbox.restrict.prep import compile_program, extract
from rlm_compat.sandbox.restrict.transformer import CompileOptions


def outcome(code: str, profile: str = "fixed", env: dict | None = None) -> str:
    try:
        return REPLExecutor(profile=profile).execute(code, {} if env is None else env)
    except REPLError as exc:
        return str(exc)


# --- fences -------------------------------------------------------------------------------------

# rlm_compat's own expectation in profile fixed, by case of inputs/repl/prep.toml (what upstream does
# with the same text is recorded in the fixtures).
FIXED_FENCES = {
    "python": "1",
    "py": "1",
    "python3": "1",
    "repl": "1",
    "bare": "1",
    "prose_around": "2",
    "two_blocks": "2",
    "other_tag_ignored": "3",
    "tilde": "4",
    "no_fence": "5",
    "unclosed": "6",
    "only_prose_block": "No code to execute",
    "indented_fence": "7",
}


PREP = truth.recorded("prep")


@pytest.mark.parametrize("line", PREP, ids=[truth.name(line) for line in PREP])
def test_fences_and_last_line_as_upstream_recorded(line: dict) -> None:
    truth.skip_unless_comparable(line)
    [step] = truth.recorded_steps(line)
    assert outcome(line["input"]["steps"][0], "upstream") == truth.shown(step)


@pytest.mark.parametrize(("name", "fixed"), FIXED_FENCES.items(), ids=list(FIXED_FENCES))
def test_fences_fixed(name: str, fixed: str) -> None:
    [text] = truth.line(f"repl.prep.fence_{name}")["input"]["steps"]
    assert outcome(text) == fixed


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


# Profile fixed shows the value of the last expression statement once, whatever its name or shape.
FIXED_LAST = {
    "append_then_print": "[1]",
    "append_last": "Code executed successfully (no output)",
    "skipped_name_diff": "5",
    "skipped_name_platform": "3",
    "indented_last_line": "Code executed successfully (no output)",
    "string_last": "text",
    "none_last": "Code executed successfully (no output)",
    "prints_then_value": "1\n2\n3",
    "call_last": "4",
    "multiline_last_expression": "[1, 2]",
}


@pytest.mark.parametrize(("name", "fixed"), FIXED_LAST.items(), ids=list(FIXED_LAST))
def test_last_expression_fixed(name: str, fixed: str) -> None:
    [code] = truth.line(f"repl.prep.last_{name}")["input"]["steps"]
    assert outcome(code) == fixed


def test_last_line_runs_once_in_fixed() -> None:
    """2fb46cc runs it twice (env ``x == [1, 1]``): recorded as repl.upstream_parity.double_eval."""
    env: dict = {}
    REPLExecutor().execute("x = []\nx.append(1)", env)
    assert env["x"] == [1]


def test_second_evaluation_is_restricted() -> None:
    # The last line alone parses differently from the program: 2fb46cc's plain eval runs
    # `().__reduce_ex__(2)` and prints copyreg internals; the restricted one refuses it.
    code = "s = '''\n().__reduce_ex__(2) #'''"
    assert outcome(code, "upstream") == "Code executed successfully (no output)"


def test_leading_string_does_not_become_a_docstring_in_fixed() -> None:
    """2fb46cc leaves ``__doc__`` in env: recorded as repl.upstream_parity.docstring."""
    env: dict = {}
    REPLExecutor().execute("'doc'\nx = 1", env)
    assert "__doc__" not in env


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
