"""REPLExecutor's contract: constructor, return strings, env persistence, error texts, REPLError only."""

from __future__ import annotations

import re

import pytest
import upstream_truth as truth
from examples import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlm_compat.errors import ConfigurationError, REPLError, REPLSecurityError
from rlm_compat.profiles import Profile
from rlm_compat.repl import REPLExecutor

PROFILES = ["fixed", "upstream"]


def run(code: str, env: dict | None = None, profile: str = "fixed", **kw) -> str:
    return REPLExecutor(profile=profile, **kw).execute(code, {} if env is None else env)


def error_of(code: str, env: dict | None = None, profile: str = "fixed", **kw) -> REPLError:
    with pytest.raises(REPLError) as info:
        run(code, env, profile, **kw)
    return info.value


# --- constructor -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"timeout": 0},
        {"timeout": -1},
        {"timeout": float("nan")},
        {"timeout": "5"},
        {"timeout": True},
        {"max_output_chars": -1},
        {"max_output_chars": 2.5},
        {"max_output_chars": True},
        {"isolation": "thread"},
        {"profile": "nope"},
        {"profile": 3},
        {"memory_limit_mb": 0},
    ],
)
def test_bad_constructor_arguments_raise_configuration_error(kwargs: dict) -> None:
    with pytest.raises(ConfigurationError):
        REPLExecutor(**kwargs)


def test_defaults_and_repr_match_upstream_signature(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RLM_COMPAT_ISOLATION", raising=False)
    ex = REPLExecutor()
    assert (ex.timeout, ex.max_output_chars, ex.isolation) == (5, 2000, "process")
    assert REPLExecutor(profile="upstream").isolation == "process"  # hardened worker in every profile
    assert REPLExecutor(profile=Profile.upstream().replace(inline_by_default=True)).isolation == "inline"
    monkeypatch.setenv("RLM_COMPAT_ISOLATION", "inline")
    assert REPLExecutor().isolation == "inline"
    monkeypatch.setenv("RLM_COMPAT_ISOLATION", "process")
    assert REPLExecutor(profile="upstream").isolation == "process"
    text = repr(REPLExecutor(7, 300, profile="upstream", isolation="inline"))
    for part in ("timeout=7", "max_output_chars=300", "profile='upstream'", "isolation='inline'"):
        assert part in text


def test_profile_accepts_name_profile_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert REPLExecutor(profile=Profile.upstream()).profile == Profile.upstream()
    assert REPLExecutor(profile="upstream").profile.name == "upstream"
    monkeypatch.setenv("RLM_COMPAT_PROFILE", "upstream")
    assert REPLExecutor().profile.name == "upstream"
    monkeypatch.delenv("RLM_COMPAT_PROFILE")
    assert REPLExecutor().profile.name == "fixed"


def test_timeout_none_disables_the_deadline() -> None:
    ex = REPLExecutor(timeout=None)
    assert ex.timeout == float("inf")
    assert ex.execute("x = 1", {}) == "Code executed successfully (no output)"


# --- return strings -----------------------------------------------------------------------------


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("code", ["", "   ", "\n\n\t"])
def test_blank_code(profile: str, code: str) -> None:
    assert run(code, profile=profile) == "No code to execute"


@pytest.mark.parametrize("profile", PROFILES)
def test_no_output(profile: str) -> None:
    assert run("x = 1", profile=profile) == "Code executed successfully (no output)"


@pytest.mark.parametrize("profile", PROFILES)
def test_output_is_stripped(profile: str) -> None:
    assert run("print('  padded  ')", profile=profile) == "padded"


@pytest.mark.parametrize("profile", PROFILES)
@settings(
    max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(limit=st.integers(1, 300), length=st.integers(0, 700))
def test_truncation_marker(profile: str, limit: int, length: int) -> None:
    out = run(f"print('ab' * {length})", profile=profile, max_output_chars=limit)
    text = "ab" * length + "\n"
    if length == 0:
        assert out == ""
    elif len(text) > limit:
        assert out == (
            f"{text[:limit]}\n\n[Output truncated: {len(text)} chars total, showing first {limit}]"
        )
    else:
        assert out == text.strip()


# --- env ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("profile", PROFILES)
def test_variables_persist_in_env(profile: str) -> None:
    env: dict = {"context": "Hello World", "re": re}
    ex = REPLExecutor(profile=profile)
    ex.execute("x = 5 + 3", env)
    ex.execute("result = context[:5]", env)
    ex.execute("matches = re.findall(r'\\w+', context)", env)
    assert env["x"] == 8 and env["result"] == "Hello" and env["matches"] == ["Hello", "World"]
    assert ex.execute("print(x * 2)", env) == "16"


def test_fixed_env_holds_only_user_names() -> None:
    env: dict = {"context": "abc"}
    run("def f(s):\n    print(s)\n    return s\nx = f(context)\nclass A:\n    pass\nx", env)
    assert sorted(env) == ["A", "context", "f", "x"]


def test_upstream_env_gains_the_print_key() -> None:
    env: dict = {}
    run("print('x')", env, profile="upstream")
    assert sorted(env) == ["_print"]


@pytest.mark.parametrize("profile", PROFILES)
def test_callers_builtins_key_is_restored(profile: str) -> None:
    marker = object()
    env: dict = {"__builtins__": marker}
    run("x = len('ab')", env, profile=profile)
    assert env["__builtins__"] is marker and env["x"] == 2


@pytest.mark.parametrize("profile", PROFILES)
def test_raw_modules_in_env_are_proxied_only_during_the_call(profile: str) -> None:
    env: dict = {"re": re}
    run("alias = re\nkinds = [re]", env, profile=profile, isolation="inline")
    assert env["re"] is re
    assert type(env["alias"]).__name__ == "ModuleProxy"
    assert env["kinds"][0] is env["alias"]
    assert env["alias"].sub("a", "b", "aa") == "bb"


# --- REPLError only -----------------------------------------------------------------------------


@pytest.mark.parametrize("profile", PROFILES)
@settings(
    max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(code=st.text(max_size=80))
def test_any_text_gives_a_string_or_a_repl_error(profile: str, code: str) -> None:
    ex = REPLExecutor(timeout=1, profile=profile)
    try:
        assert isinstance(ex.execute(code, {}), str)
    except REPLError as exc:
        assert str(exc).startswith("Execution error: ")


@pytest.mark.parametrize(
    ("profile", "code", "expected"),
    [
        ("fixed", "raise BaseException('x')", "Execution error: BaseException: x (line 1)"),
        ("fixed", "raise GeneratorExit", "Execution error: GeneratorExit (line 1)"),
        (
            "fixed",
            "def f():\n    f()\nf()",
            "Execution error: RecursionError: maximum recursion depth exceeded (line 2)",
        ),
        ("fixed", "raise StopIteration", "Execution error: StopIteration (line 1)"),
        # 2fb46cc's texts: str(exc) only, and its functions cannot see their own name
        ("upstream", "raise BaseException('x')", "Execution error: x"),
        ("upstream", "raise GeneratorExit", "Execution error: "),
        ("upstream", "def f():\n    f()\nf()", "Execution error: name 'f' is not defined"),
        ("upstream", "raise StopIteration", "Execution error: "),
    ],
)
def test_odd_exceptions_are_wrapped(profile: str, code: str, expected: str) -> None:
    """Exceptions outside Exception (and ones Python treats specially) reach the model as REPLError."""
    err = error_of(code, profile=profile)
    assert type(err) is REPLError
    assert str(err) == expected


@pytest.mark.parametrize("profile", PROFILES)
def test_a_self_referencing_list_prints_as_python_prints_it(profile: str) -> None:
    assert run("x = []\nx.append(x)\nprint(x)", profile=profile) == "[[...]]"


@pytest.mark.parametrize("bad", [None, 3, b"x = 1"])
def test_non_str_code_is_a_repl_error(bad: object) -> None:
    with pytest.raises(REPLError, match="code must be a str"):
        REPLExecutor().execute(bad, {})  # type: ignore[arg-type]


def test_non_dict_env_is_a_repl_error() -> None:
    with pytest.raises(REPLError, match="env must be a dict"):
        REPLExecutor().execute("x = 1", [])  # type: ignore[arg-type]


# --- error texts --------------------------------------------------------------------------------


def test_fixed_runtime_error_names_type_message_and_line() -> None:
    err = error_of("x = 1\n\ny = undefined + x")
    assert str(err) == "Execution error: NameError: name 'undefined' is not defined (line 3)"
    assert type(err) is REPLError


def test_fixed_error_line_inside_a_function_is_the_call_site_in_this_step() -> None:
    env: dict = {}
    with REPLExecutor() as ex:  # functions live in the executor's session
        ex.execute("def f(d):\n    return d['k']", env)
        with pytest.raises(REPLError) as info:
            ex.execute("a = 1\nf({})", env)
    assert str(info.value) == "Execution error: KeyError: 'k' (line 2)"


def test_fixed_error_line_is_relative_to_the_code_block() -> None:
    text = "Some prose\n\n```python\nx = 1\ny = 1 / 0\n```\n"
    assert str(error_of(text)) == "Execution error: ZeroDivisionError: division by zero (line 2)"
    text = "```python\na = 1\n```\nthen\n```python\nb = 2\nc = nope\n```"
    assert str(error_of(text)).endswith("(line 2 of code block 2)")


def test_fixed_compile_errors_are_readable() -> None:
    assert str(error_of("x = (")) == "Execution error: SyntaxError: '(' was never closed (line 1)"
    err = error_of("a = 1\n_write_ = 2")
    assert isinstance(err, REPLSecurityError)
    assert str(err) == (
        'Execution error: SecurityError: "_write_" is an invalid variable name because it starts with "_" (line 2)'
    )


def test_fixed_empty_message_shows_the_type_alone() -> None:
    assert str(error_of("raise ValueError()")) == "Execution error: ValueError (line 1)"


ERROR_TEXTS = truth.recorded("error_texts")


@pytest.mark.parametrize("line", ERROR_TEXTS, ids=[truth.name(line) for line in ERROR_TEXTS])
def test_upstream_error_texts_as_recorded(line: dict) -> None:
    truth.skip_unless_comparable(line)
    [code] = line["input"]["steps"]
    [step] = truth.recorded_steps(line)
    assert str(error_of(code, profile="upstream")) == truth.shown(step)


@pytest.mark.parametrize("name", ["break_outside_loop", "continue_outside_loop"])
def test_fixed_compile_errors_found_by_cpython_are_syntax_errors(name: str) -> None:
    [code] = truth.line(f"repl.error_texts.{name}")["input"]["steps"]
    assert str(error_of(code)).startswith("Execution error: SyntaxError: ")


def test_error_text_never_shows_internal_frames() -> None:
    text = str(error_of("import json\njson.loads('{')"))
    assert "rlm_compat" not in text and "Traceback" not in text
    assert text.startswith("Execution error: JSONDecodeError: ") and text.endswith("(line 2)")


def test_host_repl_error_subclasses_keep_their_class() -> None:
    from rlm_compat.errors import FinalVarMissingError
    from rlm_compat.sandbox import host_call

    def final_var(name: str) -> None:
        raise FinalVarMissingError(f"no variable {name!r}")

    env: dict = {"FINAL_VAR": host_call(final_var)}
    with pytest.raises(FinalVarMissingError, match="no variable 'x'"):
        REPLExecutor().execute("FINAL_VAR('x')", env)
    out = REPLExecutor().execute(
        "try:\n    FINAL_VAR('x')\nexcept Exception as e:\n    print('caught', e)", env
    )
    assert out == "caught no variable 'x'"
