"""The fixed parser (profile ``fixed``): Python literal semantics, clear ending rules, never raises."""

from __future__ import annotations

import ast
import warnings
from typing import Any

import pytest
from examples import examples
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from parser_model import NAMES, env_values, final_heavy_text, identifiers

from rlm_compat import parser
from rlm_compat.errors import FinalVarMissingError, REPLError
from rlm_compat.parser import FinalResolution, find_directive, is_final_fixed, resolve_final

_MANY = settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Prose that cannot itself open a fence or start a directive line.
prose = (
    st.text(max_size=40)
    .map(lambda t: t.replace("`", "'").replace("~", "-"))
    .filter(
        lambda t: not any(line.lstrip().startswith("FINAL") for line in t.replace("\r", "\n").split("\n"))
    )
)
envs = st.dictionaries(st.sampled_from(NAMES), env_values, max_size=5)


def _python_value(source: str) -> Any:
    """The argument's value when Python reads ``source`` as a call with one constant."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            call = ast.parse(source, mode="eval").body
    except (SyntaxError, ValueError) as exc:
        return type(exc)
    assert isinstance(call, ast.Call)
    if len(call.args) == 1 and not call.keywords and isinstance(call.args[0], ast.Constant):
        return call.args[0].value
    return None


@st.composite
def string_literals(draw: st.DrawFn) -> str:
    """Source text of one or more adjacent string literals, valid or not, with any prefix."""
    parts = []
    for _ in range(draw(st.integers(1, 3))):
        prefix = draw(st.sampled_from(["", "", "r", "u", "R", "b", "f", "rb", "Br"]))
        quote = draw(st.sampled_from(['"', "'", '"""', "'''"]))
        body = draw(st.text(max_size=12) | st.sampled_from(["\\n", "\\", "\\x4", "\\N{BULLET}", "\\u00e9"]))
        parts.append(prefix + quote + body + quote)
    joiners = draw(
        st.lists(st.sampled_from(["", " ", "\n", " \\\n"]), min_size=len(parts), max_size=len(parts))
    )
    return "".join(p + j for p, j in zip(parts, joiners, strict=True)).rstrip("\\\n ")


# --- round trip and Python semantics -------------------------------------------------------------


@_MANY
@given(st.text())
def test_round_trip_repr(value: str) -> None:
    assert resolve_final(f"FINAL({value!r})", {}) == FinalResolution(value, None)


@_MANY
@given(st.text(), prose, st.sampled_from(["```python", "```", "~~~", "```repl"]))
def test_round_trip_in_a_fence_and_after_prose(value: str, text: str, fence: str) -> None:
    literal = repr(value)
    assert resolve_final(f"{text}\n{fence}\nFINAL({literal})\n{fence[:3]}\n", {}).answer == value
    assert resolve_final(f"{text}\nFINAL({literal})\n{text}", {}).answer == value
    assert resolve_final(f"{text}\nFINAL (\n    {literal}\n)", {}).answer == value


@_MANY
@given(string_literals())
def test_literal_argument_means_what_python_says(literal: str) -> None:
    text = f"FINAL({literal})"
    result = resolve_final(text, {})
    expected = _python_value(text)
    if isinstance(expected, str):
        assert result == FinalResolution(expected, None)
    elif result.answer is not None:
        # Python rejects the whole text, but a call closed earlier: what was read is valid alone.
        directive = find_directive(text)
        assert directive is not None and directive.source is not None and directive.source != text
        assert _python_value(directive.source) == result.answer
    else:
        assert result.feedback


@_MANY
@given(st.text(alphabet=st.characters(blacklist_characters="\"'\\\r\n\x00"), max_size=30))
def test_plain_literals_agree_with_upstream(value: str) -> None:
    """Where upstream is right (no quotes, escapes or NUL, which Python refuses in source)."""
    value = value.strip()
    response = f'FINAL("{value}")'
    assert resolve_final(response, {}).answer == parser.extract_final(response) == value


# --- agreement, totality ---------------------------------------------------------------------------


@_MANY
@given(st.one_of(final_heavy_text, st.text()), envs)
def test_never_raises_and_is_final_agrees(text: str, env: dict[str, Any]) -> None:
    result = resolve_final(text, env)
    assert is_final_fixed(text, env) is (result.answer is not None)
    assert result.answer is None or result.feedback is None
    assert result.feedback is None or 0 < len(result.feedback) <= 1200
    directive = find_directive(text)
    if directive is None:
        assert result == FinalResolution(None, None)
    elif not directive.complete:
        assert result.answer is None and result.feedback
    else:
        assert directive.source is not None and directive.source.startswith(directive.kind)


@_MANY
@given(
    final_heavy_text,
    envs,
    st.text(max_size=30),
    st.sampled_from(["FINAL('x')", "FINAL_VAR(answer)", "FINAL(x)", "```\nFINAL(1)"]),
)
def test_first_complete_directive_wins(text: str, env: dict[str, Any], tail: str, last: str) -> None:
    """Once a directive is complete, nothing after it changes the outcome."""
    text = f"{text}\n{last}"
    directive = find_directive(text)
    assume(directive is not None and directive.complete)
    assert resolve_final(f"{text}\n{tail}", env) == resolve_final(text, env)
    assert resolve_final(f"{text}{tail}", env) == resolve_final(text, env)


@pytest.mark.parametrize("value", [object(), float("nan"), b"x", {"k": [1]}])
def test_unusual_env_values_resolve(value: Any) -> None:
    assert resolve_final("FINAL_VAR(v)", {"v": value}) == FinalResolution(str(value), None)


def test_a_failing_str_becomes_feedback() -> None:
    class Broken:
        def __str__(self) -> str:
            raise RuntimeError("boom")

    result = resolve_final("FINAL_VAR(v)", {"v": Broken()})
    assert result.answer is None and result.feedback is not None
    assert "'v'" in result.feedback and "RuntimeError: boom" in result.feedback


# --- FINAL_VAR and names --------------------------------------------------------------------------


@_MANY
@given(identifiers, envs, st.sampled_from(["FINAL_VAR({})", "FINAL_VAR({!r})", "FINAL({})"]))
def test_missing_variable_feedback_names_it_and_lists_variables(
    name: str, env: dict[str, Any], form: str
) -> None:
    env.pop(name, None)
    result = resolve_final(form.format(name), env)
    assert result.answer is None and result.feedback is not None
    assert f"no variable named {name!r}" in result.feedback
    listed = [n for n in sorted(env) if not n.startswith("_")]
    assert f"Variables: {', '.join(listed) or '(none)'}" in result.feedback


@_MANY
@given(identifiers, envs)
def test_missing_variable_error_shares_the_wording(name: str, env: dict[str, Any]) -> None:
    env = {key: value for key, value in env.items() if key != name and value != name}
    error = parser.missing_variable_error(name, env)
    assert isinstance(error, FinalVarMissingError) and isinstance(error, REPLError)
    assert str(error) == resolve_final(f"FINAL_VAR({name!r})", env).feedback


@_MANY
@given(
    identifiers,
    env_values,
    st.sampled_from(
        ["FINAL_VAR({})", "FINAL_VAR({!r})", "FINAL({})", "FINAL_VAR( {} )", "FINAL_VAR(\n{}\n)"]
    ),
)
def test_present_variable_resolves_to_its_str(name: str, value: Any, form: str) -> None:
    assert resolve_final(form.format(name), {name: value}).answer == str(value)


def test_variables_listed_are_user_data_only() -> None:
    import re

    env = {
        "answer": 1,
        "chunks": [],
        "context": "c",
        "query": "q",
        "re": re,
        "_print": 1,
        "recursive_llm": print,
        "FINAL": print,
        "helper": lambda: 1,
    }
    assert parser.user_variables(env) == ["answer", "chunks", "context", "query"]
    assert str(parser.missing_variable_error("answr", env)) == (
        "FINAL_VAR('answr'): no variable named 'answr'. Variables: answer, chunks, context, query"
    )


def test_missing_variable_error_spots_a_value_passed_for_a_name() -> None:
    message = str(parser.missing_variable_error("Paris", {"answer": "Paris", "query": "q"}))
    assert message.endswith("'Paris' is the value of answer; pass the name: FINAL_VAR('answer')")


def test_long_variable_lists_are_capped() -> None:
    env = {f"v{i:03d}": i for i in range(100)}
    feedback = resolve_final("FINAL_VAR(missing)", env).feedback
    assert feedback is not None and feedback.endswith("... (70 more)") and "v029" in feedback


# --- where a directive counts -----------------------------------------------------------------------


@_MANY
@given(
    st.text(alphabet=st.characters(blacklist_characters="\r\n`~"), min_size=1, max_size=20),
    st.text(max_size=10),
)
def test_mid_line_prose_never_counts(prefix: str, value: str) -> None:
    assume(not prefix.startswith("FINAL"))
    assert resolve_final(f"{prefix}FINAL({value!r})", {}) == FinalResolution(None, None)


@_MANY
@given(st.text(max_size=10))
def test_strings_comments_and_nested_statements_in_code_never_count(value: str) -> None:
    directive = f"FINAL({value!r})"
    for body in (
        f"print({directive!r})",
        f"# {directive}",
        f"if x:\n    {directive}",
        f"def f():\n    {directive}",
        f"if x: {directive}",
        f"y = 1; {directive}",
        f"s = '''\n{directive}\n'''",
        f"x = [\n{directive}]",
    ):
        assert resolve_final(f"```python\n{body}\n```", {"x": 1}) == FinalResolution(None, None)


_CODE_LINES = [
    "x = 1",
    'FINAL("top")',
    "FINAL_VAR(x)",
    "FINAL (\n  'multi'\n)",
    "if x:\n    FINAL('in if')",
    "def f():\n    FINAL('in def')",
    's = """\nFINAL("in string")\n"""',
    "# FINAL('comment')",
    "print(\"FINAL('p')\")",
    "y = [\n    1,\n]",
    "z = (1 +\n     2)",
    "x = 1; FINAL('after semicolon')",
    "FINAL('a') if x else None",
    "FINAL_VAR('x').upper()",
    "t = '''\n'''",
    "w = {'k': (\n1)}",
    "v = 1 + \\\n    2",
    "FINAL(r'raw\\n')",
    "FINAL('#not a comment')",
]


@_MANY
@given(st.lists(st.sampled_from(_CODE_LINES), max_size=7))
def test_code_blocks_agree_with_pythons_parser(lines: list[str]) -> None:
    """In valid code, the directive is the first top-level statement that starts with the call."""
    code = "\n".join(lines)
    tree = ast.parse(code)
    expected = None
    for statement in tree.body:
        calls = [
            node
            for node in ast.walk(statement)
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("FINAL", "FINAL_VAR")
            and (node.lineno, node.col_offset) == (statement.lineno, 0)
        ]
        if calls:
            expected = ast.get_source_segment(code, calls[0])
            break
    found = find_directive(f"```python\n{code}\n```\nFINAL('after the block')")
    assert found is not None
    if expected is None:
        assert found.source == "FINAL('after the block')" and not found.in_code
    else:
        assert found.source == expected and found.in_code


RULES = [
    # (response, env, answer, feedback fragment)
    ('FINAL ("x")', {}, "x", None),
    ('FINAL("  padded  ")', {}, "  padded  ", None),
    ('FINAL("say \\"hi\\"")', {}, 'say "hi"', None),
    ('FINAL("a\\nb")', {}, "a\nb", None),
    ('FINAL(r"C:\\new")', {}, "C:\\new", None),
    ('FINAL("a" \'b\' """c""")', {}, "abc", None),
    ('FINAL("""multi\nline""")', {}, "multi\nline", None),
    ('FINAL("""a""")\nthen FINAL("""b""")', {}, "a", None),
    ('FINAL("a")\nFINAL("""b""")', {}, "a", None),
    ('FINAL("x"  # note\n)', {}, "x", None),
    ('FINAL("x",)', {}, "x", None),
    ("FINAL(42)", {}, "42", None),
    ("FINAL(answer)", {"answer": "A"}, "A", None),
    ("FINAL_VAR(answer)", {"answer": 7}, "7", None),
    ('FINAL_VAR("answer")', {"answer": [1]}, "[1]", None),
    ("x = 1\nFINAL_VAR(x)", {"x": 1}, "1", None),
    ('FINAL_VAR(answer)\nFINAL("literal")', {"answer": "A"}, "A", None),
    ('FINAL("abc\nFINAL("ok")', {}, "ok", None),
    ('FINAL("x")\r\n', {}, "x", None),
    ('FINAL("""a\r\nb""")', {}, "a\nb", None),
    ('```python\nFINAL("x")\n```', {}, "x", None),
    ('~~~\nFINAL("x")\n~~~', {}, "x", None),
    ('```python\nFINAL("x")', {}, "x", None),
    ("```python\nanswer = 6 * 7\n```\nFINAL_VAR(answer)", {"answer": 42}, "42", None),
    ('```python\ns = """\n```\n"""\nFINAL("after")\n```', {}, "after", None),
    ('```python\ns = """\n```\nFINAL("x")\n"""\n```', {}, "x", None),
    ('```json\nFINAL("shown, not run")\n```', {}, None, None),
    ('```text\nFINAL("shown")\n```\nFINAL("prose")', {}, "prose", None),
    ('```python\r\nFINAL("x")\r\n```\r\n', {}, "x", None),
    ('```python\nfor c in chunks:\n    go(c)\nFINAL("done")\n```', {}, "done", None),
    ('    ```python\n    x = 1\n    FINAL("indented block")\n    ```', {}, "indented block", None),
    ('FINAL(\n"x"\n```python\nFINAL("in block")\n```', {}, "in block", None),
    ('Use FINAL("answer") when you are done.', {}, None, None),
    ('When done, write `FINAL("x")`.', {}, None, None),
    ('**FINAL("x")**', {}, None, None),
    ('    FINAL("x")', {}, None, None),
    ('final("x")', {}, None, None),
    ('MY_FINAL("x")', {}, None, None),
    ("FINAL_VARIABLE(answer)", {"answer": 1}, None, None),
    ("The answer is 42.", {}, None, None),
    ("", {}, None, None),
    ("FINAL(answer)", {}, None, "no variable named 'answer'"),
    ("FINAL(answr)", {"answer": 1}, None, 'quote it: FINAL("...")'),
    ("FINAL_VAR(answr)", {"answer": 1}, None, "Variables: answer"),
    ("FINAL_VAR(my-var)", {"my": 1}, None, "takes a variable name"),
    ("FINAL_VAR(1)", {}, None, "takes a variable name"),
    ("FINAL(len(context))", {"context": "c"}, None, "FINAL_VAR(name)"),
    ('FINAL(f"{x}")', {"x": 1}, None, "expression"),
    ("FINAL(b'x')", {}, None, "bytes"),
    ("FINAL()", {}, None, "exactly one argument"),
    ('FINAL("a", "b")', {}, None, "exactly one argument"),
    ('FINAL(answer="x")', {}, None, "exactly one argument"),
    ('FINAL("unclosed', {}, None, "never closed"),
    ('FINAL("x"', {}, None, "never closed"),
    ('FINAL("""never closed', {}, None, "line 1 is never closed"),
    ("text\n```python\nFINAL_VAR(\n```", {}, None, "FINAL_VAR( on line 3"),
    ('FINAL("""```python\nx = 1\n```""")', {}, None, "line 1 is never closed"),
    ('FINAL("\\N{nope}")', {}, None, "not valid Python"),
    ("FINAL(" + "1+" * 6000 + "1)", {}, None, "too long"),
    ("FINAL(1" + "0" * 5000 + ")", {}, None, "not valid Python"),
]


@pytest.mark.parametrize(("response", "env", "answer", "feedback"), RULES)
def test_documented_rules(
    response: str, env: dict[str, Any], answer: str | None, feedback: str | None
) -> None:
    result = resolve_final(response, env)
    assert result.answer == answer
    if feedback is None:
        assert result.feedback is None
    else:
        assert result.feedback is not None and feedback in result.feedback
