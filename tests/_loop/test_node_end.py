"""How a node ends is decided from typed facts (errors.StepFailure, the final outcome), never from
the wording of an error: rewording every error text changes no run's end."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest

from rlm_compat import RLM, REPLError, REPLExecutor
from rlm_compat import parser as rlm_parser
from rlm_compat._loop.final import WITHHELD
from rlm_compat.clients import ScriptedClient
from rlm_compat.errors import StepFailure
from rlm_compat.sandbox.step.texts import Texts

# (profile, the reply under test, the answer, whether its directive was withheld)
CASES = [
    ("fixed", "```python\nx = 1 / 0\n```\nFINAL_VAR(x)", "after", True),
    ("fixed", "x = int('nope')\nFINAL_VAR(x)", "after", True),
    ("fixed", 'FINAL("early")\ny = 1 / 0', "after", True),
    ("fixed", '```python\nx = (1\n```\nFINAL("stale")', "after", True),
    ("fixed", '```python\nimport os\n```\nFINAL("refused")', "after", True),
    # unfenced code the policy refused is code, not prose: withheld under either wording
    ("fixed", 'exec("x = 1")\nFINAL("refused")', "after", True),
    ("fixed-with:upstream_error_text", 'exec("x = 1")\nFINAL("refused")', "after", True),
    ("fixed", 'import os\nFINAL("refused")', "after", True),
    # prose: nothing compiled, so nothing ran
    ("fixed", 'I counted them.\nFINAL("42")', "42", False),
    ("fixed-with:upstream_error_text", 'I counted them.\nFINAL("42")', "42", False),
    # the directive itself failed, after the code before it ran
    ("fixed", "```python\nanswer = context.upper()\nFINAL_VAR(answer)\n```", "ABC", False),
    ("fixed-with:minimal_env", "x = context.upper()\nFINAL_VAR(x)", "ABC", False),
    ("fixed-with:minimal_env", 'x = 1\nFINAL("x is set")', "x is set", False),
    # code that ran, then a directive in prose
    ("fixed", "```python\nx = len(context)\n```\nFINAL_VAR(x)", "3", False),
]

_FAILURE_TEXTS = (
    "raised",
    "timeout",
    "memory",
    "crashed",
    "compile_error",
    "worker_fault",
    "reply_too_large",
)


def _reversed_text(method: Callable[..., str]) -> Callable[..., str]:
    @functools.wraps(method)
    def reworded(*args: Any, **kwargs: Any) -> str:
        return "reworded: " + method(*args, **kwargs)[::-1]

    return reworded


@pytest.fixture
def reworded_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every error text a step can give, reversed (no known phrase survives)."""
    for name in _FAILURE_TEXTS:
        method = getattr(Texts, name)
        wrapped = _reversed_text(method)
        monkeypatch.setattr(
            Texts, name, staticmethod(wrapped) if isinstance(Texts.__dict__[name], staticmethod) else wrapped
        )
    original = rlm_parser.missing_variable_error

    def missing(name: str, env: Any) -> Any:
        error = original(name, env)
        return type(error)(str(error)[::-1])

    monkeypatch.setattr(rlm_parser, "missing_variable_error", missing)


def _end(profile: str, reply: str, isolation: str = "inline") -> tuple[str, int, bool]:
    client = ScriptedClient(["x = 0", reply, 'FINAL("after")'])
    rlm = RLM("m", client=client, profile=profile, isolation=isolation)
    answer = rlm.complete("q", "abc")
    withheld = any(WITHHELD in str(m["content"]) for call in client.calls for m in call.messages)
    return answer, rlm.stats["iterations"], withheld


@pytest.mark.parametrize("isolation", ["inline", "process"])
@pytest.mark.parametrize(("profile", "reply", "answer", "withheld"), CASES)
def test_a_node_ends_where_the_typed_facts_say(
    profile: str, reply: str, answer: str, withheld: bool, isolation: str
) -> None:
    assert _end(profile, reply, isolation) == (answer, 3 if withheld or answer == "after" else 2, withheld)


@pytest.mark.parametrize(("profile", "reply", "answer", "withheld"), CASES)
def test_rewording_every_error_text_changes_no_end(
    reworded_errors: None, profile: str, reply: str, answer: str, withheld: bool
) -> None:
    assert _end(profile, reply) == (answer, 3 if withheld or answer == "after" else 2, withheld)


def test_the_rewording_reaches_what_the_model_is_shown(reworded_errors: None) -> None:
    client = ScriptedClient(["x = 1 / 0", 'FINAL("done")'])
    RLM("m", client=client, isolation="inline").complete("q", "c")
    shown = client.calls[1].messages[-1]["content"]
    assert shown.startswith("Error: reworded: ") and "ZeroDivisionError" not in shown


STEPS = [
    ("x = (1", StepFailure("syntax")),
    ('exec("1")', StepFailure("policy")),
    ("x = 1 / 0", StepFailure("run")),
    ("x = 1\nFINAL_VAR('x')", StepFailure("run", directive=True)),
    ("def f():\n    return FINAL\nf()", StepFailure("run", directive=True)),
    ("raise NameError(\"name 'FINAL' is not defined\")", StepFailure("run")),
]


@pytest.mark.parametrize("isolation", ["inline", "process"])
def test_how_a_step_failed_crosses_from_the_worker(isolation: str) -> None:
    repl = REPLExecutor(profile="fixed-with:minimal_env", isolation=isolation)
    env: dict[str, Any] = {"context": "abc"}
    try:
        for code, failure in STEPS:
            with pytest.raises(REPLError) as raised:
                repl.execute(code, env)
            assert (code, raised.value.failure) == (code, failure)
    finally:
        repl.close()
