"""The RLM loop end to end: RLM -> litellm -> HTTP -> a scripted server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from rlm_compat import RLM, ConfigurationError, LLMCallError, MaxDepthError, MaxIterationsError
from rlm_compat.errors import UnknownOptionWarning
from rlm_compat.prompts import build_system_prompt
from rlm_compat.testing import ScriptedChatServer

ServerFactory = Callable[..., ScriptedChatServer]

MODEL = "openai/root-model"
CHEAP = "openai/leaf-model"
PROFILES = ["fixed", "upstream"]


def make(server: Any, **kwargs: Any) -> RLM:
    kwargs.setdefault("api_key", "sk-loopback")
    return RLM(kwargs.pop("model", MODEL), api_base=server.base_url, **kwargs)


@pytest.mark.parametrize("profile", PROFILES)
def test_message_layout_and_feedback(chat_server: ServerFactory, profile: str) -> None:
    server = chat_server(["x = context[:5]\nprint(x)", "y = 1 / 0", 'FINAL("done")'])
    rlm = make(server, profile=profile)
    assert rlm.complete("What?", "Hello World") == "done"
    first, second, third = server.messages
    assert first == [
        {"role": "system", "content": build_system_prompt(11, 0)},
        {"role": "user", "content": "What?"},
    ]
    assert second[2:] == [
        {"role": "assistant", "content": "x = context[:5]\nprint(x)"},
        {"role": "user", "content": "Hello"},
    ]
    feedback = third[-1]["content"]
    assert feedback.startswith("Error: Execution error: ")
    assert "division by zero" in feedback
    assert rlm.stats == {"llm_calls": 3, "iterations": 3, "depth": 0}


@pytest.mark.parametrize("profile", PROFILES)
def test_single_argument_is_context(chat_server: ServerFactory, profile: str) -> None:
    server = chat_server(["FINAL_VAR(context)"])
    rlm = make(server, profile=profile)
    assert rlm.complete("only one string") == "only one string"
    assert server.messages[0][1] == {"role": "user", "content": ""}
    assert build_system_prompt(len("only one string"), 0) == server.messages[0][0]["content"]


async def test_depth_error_before_any_call(chat_server: ServerFactory) -> None:
    server = chat_server([])
    rlm = make(server, max_depth=2, _current_depth=2)
    with pytest.raises(MaxDepthError, match=r"^Max recursion depth \(2\) exceeded$"):
        await rlm.acomplete("q", "c")
    assert server.requests == []


@pytest.mark.parametrize("profile", PROFILES)
async def test_iteration_error_text(chat_server: ServerFactory, profile: str) -> None:
    server = chat_server(["x = 1"] * 3)
    rlm = make(server, max_iterations=3, profile=profile)
    with pytest.raises(MaxIterationsError, match=r"^Max iterations \(3\) exceeded without FINAL\(\)$"):
        await rlm.acompletion("q", "c")
    assert rlm.stats["llm_calls"] == 3
    assert rlm.stats["iterations"] == 3


def _route(request: dict[str, Any]) -> str:
    """Root model delegates to recursive_llm; the leaf model answers from its own context."""
    if request["model"] == "root-model":
        if len(request["messages"]) == 2:
            return 'sub = recursive_llm("first word?", context.split()[0])\nprint(sub)'
        return "FINAL_VAR(sub)"
    return "FINAL_VAR(context)"


@pytest.mark.parametrize("profile", PROFILES)
def test_two_model_routing_and_recursion(chat_server: ServerFactory, profile: str) -> None:
    server = chat_server(_route)
    rlm = make(server, recursive_model=CHEAP, profile=profile)
    assert rlm.complete("q", "alpha beta") == "alpha"
    models = [r["model"] for r in server.requests]
    assert models == ["root-model", "leaf-model", "root-model"]
    child_prompt = server.requests[1]["messages"][0]["content"]
    assert child_prompt == build_system_prompt(len("alpha"), 1)
    assert server.requests[1]["messages"][1]["content"] == "first word?"


def test_recursion_depth_string(chat_server: ServerFactory) -> None:
    server = chat_server(['r = recursive_llm("q", "c")\nprint(r)', "FINAL_VAR(r)"])
    rlm = make(server, max_depth=1)
    assert rlm.complete("q", "c") == "Max recursion depth (1) reached"


def test_api_base_key_and_llm_kwargs_pass_through(chat_server: ServerFactory) -> None:
    server = chat_server(['FINAL("ok")'])
    rlm = make(server, api_key="sk-secret-1", temperature=0.25)
    assert rlm.complete("q", "c") == "ok"
    request = server.requests[0]
    assert request["_headers"]["authorization"] == "Bearer sk-secret-1"
    assert request["temperature"] == 0.25


def test_call_kwargs_override_model(chat_server: ServerFactory) -> None:
    server = chat_server(['FINAL("ok")'])
    rlm = make(server)
    with pytest.warns(UnknownOptionWarning, match="'model'.*forwarded"):
        assert rlm.complete("q", "c", model="openai/override", max_tokens=7) == "ok"
    assert server.requests[0]["model"] == "override"
    assert server.requests[0]["max_tokens"] == 7


def test_stats_accumulate_calls_across_runs(chat_server: ServerFactory) -> None:
    server = chat_server(["x = 1", 'FINAL("a")', 'FINAL("b")'])
    rlm = make(server)
    rlm.complete("q", "c")
    assert rlm.stats == {"llm_calls": 2, "iterations": 2, "depth": 0}
    rlm.complete("q", "c")
    assert rlm.stats == {"llm_calls": 3, "iterations": 1, "depth": 0}


async def test_sync_wrapper_inside_running_loop(chat_server: ServerFactory) -> None:
    server = chat_server(['FINAL("from sync")', 'FINAL("old name")'])
    rlm = make(server)
    asyncio.get_running_loop()  # a loop is running in this thread: asyncio.run would refuse
    assert rlm.complete("q", "c") == "from sync"
    assert rlm.completion("q", "c") == "old name"


def test_fixed_executes_before_final(chat_server: ServerFactory) -> None:
    server = chat_server(["x = context.upper()\nFINAL_VAR(x)"])
    rlm = make(server, profile="fixed")
    assert rlm.complete("q", "abc") == "ABC"
    assert rlm.stats["iterations"] == 1


def test_upstream_checks_final_before_executing(chat_server: ServerFactory) -> None:
    server = chat_server(["x = context.upper()\nFINAL_VAR(x)", "FINAL_VAR(x)"])
    rlm = make(server, profile="upstream")
    assert rlm.complete("q", "abc") == "ABC"
    assert rlm.stats["iterations"] == 2
    feedback = server.messages[1][-1]["content"]
    assert feedback == "Error: Execution error: name 'FINAL_VAR' is not defined"


def test_fixed_final_callable_with_expression(chat_server: ServerFactory) -> None:
    server = chat_server(["words = context.split()\nFINAL(len(words))"])
    assert make(server).complete("q", "a b c") == "3"


def test_fixed_final_var_missing_is_fed_back(chat_server: ServerFactory) -> None:
    server = chat_server(["answer = 42\nFINAL_VAR(answr)", "FINAL_VAR(answer)"])
    rlm = make(server)
    assert rlm.complete("q", "c") == "42"
    feedback = server.messages[1][-1]["content"]
    assert "answr" in feedback and "answer" in feedback


def test_fixed_llm_query(chat_server: ServerFactory) -> None:
    def reply(request: dict[str, Any]) -> str:
        if request["model"] == "leaf-model":
            return "Paris"
        if len(request["messages"]) == 2:
            return 'cap = llm_query("Capital of France?")\nFINAL(cap)'
        raise AssertionError("unexpected call")

    server = chat_server(reply)
    assert make(server, recursive_model=CHEAP).complete("q", "c") == "Paris"
    assert server.requests[1]["messages"] == [{"role": "user", "content": "Capital of France?"}]


def test_prompt_version_selects_upstream_text(chat_server: ServerFactory) -> None:
    server = chat_server(['FINAL("x")'])
    make(server, prompt_version="2fb46cc").complete("q", "abc")
    assert server.messages[0][0]["content"] == build_system_prompt(3, 0, version="2fb46cc")
    assert 'query: str (the question: "{query}")' in server.messages[0][0]["content"]


def test_context_never_in_messages(chat_server: ServerFactory) -> None:
    context = "needle-in-haystack " * 500
    server = chat_server(["n = len(context)", "FINAL_VAR(n)"])
    assert make(server).complete("How long?", context) == str(len(context))
    assert all(context not in json.dumps(m) for m in server.messages)


def test_script_exhaustion_is_a_clear_error(chat_server: ServerFactory) -> None:
    server = chat_server([])
    with pytest.raises(Exception, match="script exhausted"):
        make(server, max_retries=0).complete("q", "c")


@pytest.mark.parametrize(
    "kwargs",
    [{"max_iterations": -1}, {"max_depth": "5"}, {"profile": "strict"}, {"prompt_version": "v9"}],
)
def test_bad_configuration_is_typed(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        RLM("openai/x", **kwargs)


def test_non_text_reply_is_typed(chat_server: ServerFactory) -> None:
    from rlm_compat.clients import ScriptedClient

    class NoneClient(ScriptedClient):
        async def complete(self, model: str, messages: Any, **kwargs: Any) -> str | None:
            return None

    with pytest.raises(LLMCallError, match="plain text reply"):
        RLM("m", client=NoneClient([])).complete("q", "c")


def test_fixed_llm_query_batched_keeps_order(chat_server: ServerFactory) -> None:
    def reply(request: dict[str, Any]) -> str:
        if request["model"] == "leaf-model":
            return request["messages"][0]["content"].upper()
        if len(request["messages"]) == 2:
            return 'out = llm_query_batched(["a", "b", "c", "d"])\nFINAL("".join(out))'
        raise AssertionError("unexpected call")

    server = chat_server(reply)
    assert make(server, recursive_model=CHEAP).complete("q", "c") == "ABCD"
    assert sorted(r["messages"][0]["content"] for r in server.requests[1:]) == ["a", "b", "c", "d"]


@pytest.mark.parametrize(
    "reply",
    [
        # FINAL_VAR in prose after a fenced block that raised before reassigning x
        "```python\nx = 1 / 0\n```\nFINAL_VAR(x)",
        # the same unfenced: the callable is never reached
        "x = int('nope')\nFINAL_VAR(x)",
        # the callable ran, then the code raised
        'FINAL("early")\ny = 1 / 0',
        # a fenced block that does not compile, beside a text-level FINAL
        '```python\nx = (1\n```\nFINAL("stale")',
    ],
)
def test_fixed_never_answers_beside_code_that_raised(chat_server: ServerFactory, reply: str) -> None:
    server = chat_server(["x = 0", reply, 'FINAL("after the error")'])
    rlm = make(server, profile="fixed")
    assert rlm.complete("q", "c") == "after the error"
    assert rlm.stats["iterations"] == 3
    feedback = server.messages[2][-1]["content"]
    assert feedback.startswith("Error: Execution error: ")
    assert feedback.endswith(
        "The code in this reply raised an error, so its FINAL / FINAL_VAR did not end the run. "
        "Fix the error, then give the final answer again."
    )


def test_fixed_final_var_of_a_value_still_answers(chat_server: ServerFactory) -> None:
    # FINAL_VAR(answer) hands the callable the value, which raises at the directive itself: the
    # code before it ran, so the text-level directive answers (the common real-model form)
    server = chat_server(["```python\nanswer = context.upper()\nFINAL_VAR(answer)\n```"])
    assert make(server, profile="fixed").complete("q", "abc") == "ABC"


def test_fixed_prose_final_still_answers(chat_server: ServerFactory) -> None:
    server = chat_server(['I counted them.\nFINAL("42")'])
    assert make(server, profile="fixed").complete("q", "c") == "42"


def test_fixed_final_after_code_that_ran_answers(chat_server: ServerFactory) -> None:
    server = chat_server(["```python\nx = len(context)\n```\nFINAL_VAR(x)"])
    assert make(server, profile="fixed").complete("q", "abcd") == "4"


def test_fixed_with_minimal_env_answers_when_only_the_directive_failed(chat_server: ServerFactory) -> None:
    # no callable FINAL_VAR: executing the directive is the step's only error, after x was set
    server = chat_server(["x = context.upper()\nFINAL_VAR(x)"])
    assert make(server, profile="fixed-with:minimal_env").complete("q", "abc") == "ABC"


UNPRICED = "openai/no-price-for-this-model"  # a model litellm's bundled price map does not know


def test_an_unpriced_model_prints_nothing_of_litellms_on_stdout(
    chat_server: ServerFactory, capfd: pytest.CaptureFixture[str]
) -> None:
    # used as a library: litellm prices every reply, and asked about an unknown model it printed a
    # red "Provider List: ..." on the program's stdout (file descriptor 1, captured here)
    server = chat_server(["```python\nn = len(context)\n```", "FINAL_VAR(n)"])
    rlm = make(server, model=UNPRICED)
    capfd.readouterr()
    assert rlm.complete("how long?", "abcd") == "4"
    out, _ = capfd.readouterr()
    assert out == "", out
    assert rlm.stats["llm_calls"] == 2


def test_a_handlers_unpriced_reply_is_priced_quietly(
    chat_server: ServerFactory, capfd: pytest.CaptureFixture[str]
) -> None:
    # a completion_handler's plain-dict reply has no cost attached: rlm_compat asks
    # litellm.completion_cost itself, the path that printed the banner
    import litellm

    server = chat_server(['FINAL("done")'])

    async def handler(**kwargs: Any) -> dict[str, Any]:
        reply = await litellm.acompletion(**kwargs)
        return dict(reply.model_dump())

    before = litellm.suppress_debug_info
    rlm = make(server, model=UNPRICED, completion_handler=handler)
    capfd.readouterr()
    assert rlm.complete("q", "c") == "done"
    out, _ = capfd.readouterr()
    assert out == "", out
    assert litellm.suppress_debug_info is before  # the user's setting, back as it was
