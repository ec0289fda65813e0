"""What the process boundary alone does not fix: failures that surface in the parent.

Each test runs in both isolations: model code raising BaseExceptions that are not Exceptions
(directly, thrown into a generator, or from a model-defined ``__str__`` while an error, a shown
value or a final answer is rendered), and final answers whose rendering runs model code.
"""

from __future__ import annotations

import pytest

from rlm_compat import RLM, Limits, REPLError, REPLExecutor
from rlm_compat.clients import ScriptedClient

ISOLATIONS = ["inline", "process"]

BASE_EXCEPTIONS = ["KeyboardInterrupt", "SystemExit", "GeneratorExit"]


@pytest.fixture(params=ISOLATIONS)
def isolation(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _raises_named(isolation: str, code: str, name: str) -> None:
    with REPLExecutor(timeout=5, isolation=isolation) as ex:
        env: dict = {"keep": 1}
        with pytest.raises(REPLError, match=name):
            ex.execute(code, env)
        assert ex.execute("print(keep + 1)", env) == "2"


@pytest.mark.parametrize("name", BASE_EXCEPTIONS)
@pytest.mark.parametrize(
    "template",
    [
        "raise {name}('boom')",
        "def g():\n    yield 1\ngen = g()\nnext(gen)\ngen.throw({name})",
        "def g():\n    yield 1\ngen = g()\nnext(gen)\ngen.throw({name}('x'))",
        "class V:\n    @property\n    def x(self):\n        raise {name}\nV().x",
        "class V:\n    def __len__(self):\n        raise {name}\nlen(V())",
        "def g():\n    try:\n        yield 1\n    finally:\n        raise {name}\ngen = g()\nnext(gen)\ngen.close()",
    ],
    ids=["raise", "throw_class", "throw_instance", "property", "len", "finally_on_close"],
)
def test_base_exceptions_become_repl_errors(isolation: str, name: str, template: str) -> None:
    if "finally" in template and name == "GeneratorExit":
        pytest.skip("close() ends quietly when the generator raises GeneratorExit (as in Python)")
    _raises_named(isolation, template.format(name=name), name)


@pytest.mark.parametrize(
    "template",
    [
        "class E(Exception):\n    def __str__(self):\n        raise {name}\nraise E()",
        "class V:\n    def __str__(self):\n        raise {name}\nV()",
        "class V:\n    def __repr__(self):\n        raise {name}\nprint([V()])",
    ],
    ids=["error_str", "shown_value", "repr_in_print"],
)
def test_base_exceptions_from_model_dunders(isolation: str, template: str) -> None:
    _raises_named(isolation, template.format(name="KeyboardInterrupt"), "KeyboardInterrupt")


@pytest.mark.parametrize("profile", ["fixed", "upstream"])
def test_base_exceptions_in_both_profiles(isolation: str, profile: str) -> None:
    with (
        REPLExecutor(timeout=5, isolation=isolation, profile=profile) as ex,
        pytest.raises(REPLError, match="stop"),
    ):
        ex.execute("raise SystemExit('stop')", {})


def _run(replies: list[str], isolation: str, **kwargs: object) -> tuple[str, RLM, ScriptedClient]:
    client = ScriptedClient(replies)
    rlm = RLM("scripted", client=client, repl_timeout=1, isolation=isolation, max_iterations=4, **kwargs)
    answer = rlm.complete("q", "some context")
    return answer, rlm, client


def _observations(client: ScriptedClient) -> list[str]:
    return [str(m["content"]) for m in client.calls[-1].messages if m["role"] == "user"][1:]


SLOW = "[list(range(1000))] * 10000"
SLOW_STR = f"```python\nslow = {SLOW}\n```\n"


@pytest.mark.parametrize(
    "reply",
    [
        SLOW_STR + "FINAL_VAR(slow)",
        SLOW_STR + "FINAL(slow)",
        f"```python\nslow = {SLOW}\nFINAL_VAR('slow')\n```",
        f"```python\nFINAL({SLOW})\n```",
    ],
    ids=["text_final_var", "text_bare_final", "callable_final_var", "callable_final"],
)
def test_final_rendering_runs_under_the_step_timeout(isolation: str, reply: str) -> None:
    """str() of 10**7 list items takes ~0.5 s in one C call: past the 0.2 s step timeout.

    Which limit speaks first is a race (the deadline lands when the C call returns; the 49 MB
    text is also over the answer cap), but one of them must, and the run goes on.
    """
    client = ScriptedClient([reply, 'FINAL("after")'])
    rlm = RLM("scripted", client=client, repl_timeout=0.2, isolation=isolation, max_iterations=3)
    assert rlm.complete("q", "ctx") == "after"
    observation = _observations(client)[0]
    assert "timeout" in observation or "over the limit of 1000000" in observation


@pytest.mark.parametrize(
    "reply",
    [
        "```python\nbig = 'x' * 5000\n```\nFINAL_VAR(big)",
        "```python\nbig = 'x' * 5000\nFINAL_VAR('big')\n```",
        "```python\nFINAL('x' * 5000)\n```",
    ],
    ids=["text_final_var", "callable_final_var", "callable_final"],
)
def test_final_answers_are_capped(isolation: str, reply: str) -> None:
    answer, _, client = _run([reply, 'FINAL("short")'], isolation, limits=Limits(answer_chars=1000))
    assert answer == "short"
    assert "over the limit of 1000" in _observations(client)[0]


def test_render_refuses_a_missing_variable_and_times_out(isolation: str) -> None:
    with REPLExecutor(timeout=0.2, isolation=isolation) as ex:
        env: dict = {}
        ex.execute(f"s = {SLOW}\nn = 41", env)
        # one ~0.5 s C call: the deadline lands when it returns, racing the answer cap
        with pytest.raises(REPLError, match=r"timeout|over the limit"):
            ex.render(env, "s")
        assert ex.render(env, "n") == "41"
        with pytest.raises(REPLError, match="not found"):
            ex.render(env, "missing")
