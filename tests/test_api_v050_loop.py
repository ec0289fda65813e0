"""The RLM loop under recursive-llm 0.5.0's API preset (``api="0.5"``), through a loopback server.

Each test also pins 2fb46cc's default where the two contracts differ, so a preset value that
leaks into the default shows up here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest

from rlm_compat import RLM
from rlm_compat.errors import MaxDepthError, RLMError
from rlm_compat.testing import ScriptedChatServer

ServerFactory = Callable[..., ScriptedChatServer]


def make(server: ScriptedChatServer, **kwargs: Any) -> RLM:
    kwargs.setdefault("api_key", "sk-loopback")
    kwargs.setdefault("isolation", "inline")
    return RLM(kwargs.pop("model", "openai/root"), api_base=server.base_url, **kwargs)


def replies(*texts: str) -> Callable[[dict[str, Any]], str]:
    queue = list(texts)
    return lambda _request: queue.pop(0)


def test_max_depth_default_and_meaning_follow_the_preset(chat_server: ServerFactory) -> None:
    assert make(chat_server(replies())).max_depth == 5
    assert make(chat_server(replies()), api="0.5").max_depth == 1

    # 0.5: max_depth=0 runs the root with no query functions in its REPL
    server = chat_server(replies("print('llm_query' in dir())", 'FINAL("root only")'))
    assert make(server, api="0.5", max_depth=0).complete("q", "ctx") == "root only"
    assert "False" in str(server.requests[1]["messages"][-1]["content"])
    # 2fb46cc: max_depth=0 refuses the run
    with pytest.raises(MaxDepthError):
        make(chat_server(replies()), max_depth=0).complete("q", "ctx")

    # 0.5, max_depth=1: recursive_llm is a plain model call (0.5.0's sub-call system message, no REPL)
    server = chat_server(replies("r = recursive_llm('sub', 'piece')", "leaf says hi", "FINAL_VAR(r)"))
    rlm = make(server, api="0.5", recursive_model="openai/leaf")
    assert rlm.complete("q", "ctx") == "leaf says hi"
    leaf = server.requests[1]
    assert leaf["model"] == "leaf" and [m["role"] for m in leaf["messages"]] == ["system", "user"]
    assert leaf["messages"][0]["content"].startswith("Answer the subproblem")
    assert leaf["messages"][1]["content"] == "Task:\nsub\n\nContext:\npiece"
    assert (rlm.stats["leaf_calls"], rlm.stats["max_depth_reached"]) == (1, 1)


def test_system_prompt_is_the_releases_under_the_preset(chat_server: ServerFactory) -> None:
    from rlm_compat.prompts import build_system_prompt

    # max_depth=2: the root's recursive_llm makes a child RLM, whose own is a plain model call
    server = chat_server(replies("r = recursive_llm('sub', context[:3])", 'FINAL("child")', "FINAL_VAR(r)"))
    assert make(server, api="0.5", max_depth=2).complete("q", "context") == "child"
    root, child = (request["messages"][0]["content"] for request in server.requests[:2])
    assert root == build_system_prompt(7, 0, 2, version="0.5.0")
    assert "Each response must be exactly one of these two forms" in root
    assert root.endswith("Depth: 0. max_depth: 2. recursive_llm creates a child RLM.")
    assert child == build_system_prompt(3, 1, 2, version="0.5.0")
    assert child.endswith("Depth: 1. max_depth: 2. recursive_llm makes one plain LM call at this boundary.")
    server = chat_server(replies('FINAL("none")'))
    make(server, api="0.5", max_depth=0).complete("q", "ctx")
    assert "- LM subcalls are disabled for this run." in server.requests[0]["messages"][0]["content"]
    # an explicit prompt_version wins; the default API keeps cc7a826's text
    server = chat_server(replies('FINAL("x")'))
    make(server, api="0.5", prompt_version="cc7a826").complete("q", "ctx")
    assert server.requests[0]["messages"][0]["content"] == build_system_prompt(3, 0)
    server = chat_server(replies('FINAL("x")'))
    make(server).complete("q", "ctx")
    assert server.requests[0]["messages"][0]["content"] == build_system_prompt(3, 0, version="cc7a826")


def test_llm_query_takes_a_context_second_under_the_preset(chat_server: ServerFactory) -> None:
    server = chat_server(replies("a = llm_query('what?', 'the piece')", "leaf", "FINAL_VAR(a)"))
    assert make(server, api="0.5").complete("q", "ctx") == "leaf"
    assert "the piece" in server.requests[1]["messages"][-1]["content"]
    assert server.requests[1]["model"] == "root"

    # 2fb46cc: the second positional argument is the model
    server = chat_server(replies("a = llm_query('what?', 'openai/other')", "leaf", "FINAL_VAR(a)"))
    assert make(server).complete("q", "ctx") == "leaf"
    assert server.requests[1]["model"] == "other"


def test_final_only_as_the_whole_response_and_the_answer_dict(chat_server: ServerFactory) -> None:
    server = chat_server(replies('x = 1\nif x == 2:\n    FINAL("never")', 'FINAL("only this")'))
    assert make(server, api="0.5").complete("q", "ctx") == "only this"
    server = chat_server(replies("answer['content'] = 'published'; answer['ready'] = True"))
    assert make(server, api="0.5").complete("q", "ctx") == "published"
    assert len(server.requests) == 1


def test_stats_are_per_run_under_the_preset_and_cumulative_by_default(chat_server: ServerFactory) -> None:
    script = replies("x = 1", 'FINAL("first")', 'FINAL("second")')
    rlm = make(chat_server(script), api="0.5")
    assert rlm.stats["llm_calls"] == 0 and rlm.stats["budget"]["reserved_calls"] == 0
    rlm.complete("q", "ctx")
    assert (rlm.stats["llm_calls"], rlm.stats["root_calls"], rlm.stats["iterations"]) == (2, 2, 2)
    rlm.complete("q", "ctx")
    assert rlm.stats["llm_calls"] == 1

    rlm = make(chat_server(replies("x = 1", 'FINAL("first")', 'FINAL("second")')))
    rlm.complete("q", "ctx")
    rlm.complete("q", "ctx")
    assert rlm.stats == {"llm_calls": 3, "iterations": 1, "depth": 0}


def test_final_answer_validator_rejects_then_accepts(chat_server: ServerFactory) -> None:
    server = chat_server(replies('FINAL("bad")', "value = 'good'", "FINAL_VAR(value)"))
    seen: list[str] = []

    def check(answer: str) -> str | None:
        seen.append(answer)
        return None if answer == "good" else "Answer must be 'good'."

    result = make(server, final_answer_validator=check).complete_result("q", "ctx")
    assert result.answer == "good" and seen == ["bad", "good"]
    assert "Answer must be 'good'." in server.requests[1]["messages"][-1]["content"]
    rejected = next(e for e in result.trajectory if e.kind == "final_answer_rejected")
    assert rejected.data == {"answer_chars": 3, "reason_chars": 22}
    assert [e.kind for e in result.trajectory].count("final_answer_validated") == 1
    assert result.config["final_answer_validator"] is True


def test_a_rejected_answer_dict_is_withdrawn_and_children_are_not_validated(
    chat_server: ServerFactory,
) -> None:
    server = chat_server(
        replies(
            "answer['content'] = 'bad'; answer['ready'] = True",
            "print(answer['ready'])\nchild = rlm_query('sub', 'piece')",
            'FINAL("child answer")',
            'FINAL("good")',
        )
    )
    seen: list[str] = []

    def check(answer: str) -> str | None:
        seen.append(answer)
        return None if answer == "good" else "Use good."

    rlm = make(server, api="0.5", max_depth=2, final_answer_validator=check)
    assert rlm.complete("q", "ctx") == "good"
    assert "Use good." in server.requests[1]["messages"][-1]["content"]
    assert server.requests[3]["messages"][-1]["content"].startswith("False")
    assert seen == ["bad", "good"]


@pytest.mark.parametrize(
    ("verdict", "message"), [(RuntimeError("down"), "validator failed"), ("", "non-empty string")]
)
def test_a_broken_validator_ends_the_run(chat_server: ServerFactory, verdict: Any, message: str) -> None:
    def check(_answer: str) -> str | None:
        if isinstance(verdict, Exception):
            raise verdict
        return str(verdict)

    with pytest.raises(RLMError, match=message):
        make(chat_server(replies('FINAL("a")')), final_answer_validator=check).complete("q", "ctx")


def test_empty_and_null_replies_get_feedback_under_the_preset(chat_server: ServerFactory) -> None:
    from rlm_compat.errors import ProviderResponseError
    from rlm_compat.testing import RawReply

    server = chat_server(replies("   ", 'FINAL("recovered")'))
    result = make(server, api="0.5").complete_result("q", "ctx")
    assert result.answer == "recovered"
    assert "response was empty" in server.requests[1]["messages"][-1]["content"]
    assert not [e for e in result.trajectory if e.kind == "repl_step"]

    body = {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "root",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": None}}],
    }
    null = RawReply(json.dumps(body).encode())
    script: list[Any] = [null, 'FINAL("after null")']
    result = make(chat_server(lambda _r: script.pop(0)), api="0.5").complete_result("q", "ctx")
    assert result.answer == "after null"
    assert [e.kind for e in result.trajectory].count("provider_response_normalized") == 1
    with pytest.raises(ProviderResponseError):
        make(chat_server([null]), max_retries=0).complete("q", "ctx")


def test_strict_limits_and_per_call_retry_options_under_the_preset(chat_server: ServerFactory) -> None:
    from rlm_compat.errors import ConfigurationError, UnsupportedOptionError

    for kwargs in ({"max_iterations": 0}, {"max_output_chars": 0}, {"_current_depth": -1}):
        with pytest.raises(ConfigurationError, match=next(iter(kwargs))):
            RLM("m", api="0.5", **kwargs)  # type: ignore[arg-type]
    RLM("m", max_iterations=0, max_output_chars=0)  # 2fb46cc takes both
    server = chat_server(replies())
    with pytest.raises(UnsupportedOptionError, match="RLM max_retries"):
        make(server, api="0.5").complete("q", "ctx", max_retries=2)
    assert server.requests == []


def test_completion_handler_replaces_litellm_acompletion() -> None:
    calls: list[dict[str, Any]] = []

    async def handler(**kwargs: Any) -> dict[str, Any]:
        calls.append(kwargs)
        return {"choices": [{"message": {"role": "assistant", "content": 'FINAL("handled")'}}]}

    assert RLM("some/model", completion_handler=handler, temperature=0).complete("q", "ctx") == "handled"
    assert calls[0]["model"] == "some/model" and calls[0]["temperature"] == 0
    with pytest.raises(RLMError, match="completion_handler"):
        RLM("m", completion_handler=handler, client=object())  # type: ignore[arg-type]


def test_cancelling_a_run_cancels_its_sub_calls_without_blocking_the_loop() -> None:
    import asyncio

    async def scenario() -> None:
        child_started, child_cancelled = asyncio.Event(), asyncio.Event()

        async def handler(*, messages: list[dict[str, Any]], **_kwargs: Any) -> dict[str, Any]:
            if messages[-1]["content"] == "go":
                return {"choices": [{"message": {"content": "print(recursive_llm('child', context))"}}]}
            child_started.set()
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                child_cancelled.set()
                raise
            raise AssertionError("the child call was not cancelled")

        rlm = RLM("m", completion_handler=handler, isolation="inline")
        task = asyncio.create_task(rlm.acomplete("go", "ctx"))
        await asyncio.wait_for(child_started.wait(), 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(child_cancelled.wait(), 30)

    asyncio.run(scenario())


def test_rlm_level_retries_count_each_attempt_under_the_preset(chat_server: ServerFactory) -> None:
    from rlm_compat.errors import BudgetExceededError
    from rlm_compat.testing import ErrorReply

    server = chat_server([ErrorReply(status=503), 'FINAL("done")'])
    result = make(server, api="0.5", max_retries=1, retry_backoff_seconds=0).complete_result("q", "ctx")
    assert result.answer == "done" and len(server.requests) == 2
    assert (result.stats["llm_calls"], result.stats["retry_calls"], result.stats["total_iterations"]) == (
        2,
        1,
        1,
    )
    starts = [e for e in result.trajectory if e.kind == "model_call_start"]
    assert [e.data["attempt"] for e in starts] == [1, 2]
    failed = next(e for e in result.trajectory if e.kind == "model_call_error")
    assert failed.data["retrying"] is True
    retry = next(e for e in result.trajectory if e.kind == "model_retry")
    assert (retry.data["failed_attempt"], retry.data["next_attempt"]) == (1, 2)

    # a retry reserves its call first: a spent call budget stops it
    server = chat_server([ErrorReply(status=503), 'FINAL("never")'])
    rlm = make(server, api="0.5", max_retries=2, retry_backoff_seconds=0, max_total_calls=1)
    with pytest.raises(BudgetExceededError):
        rlm.complete("q", "ctx")
    assert len(server.requests) == 1
    # a client error is not retried
    server = chat_server([ErrorReply(status=400), 'FINAL("never")'])
    with pytest.raises(Exception):  # noqa: B017 - litellm's BadRequestError
        make(server, api="0.5", max_retries=3, retry_backoff_seconds=0).complete("q", "ctx")
    assert len(server.requests) == 1
    # the default API's retries are the RLM's too, so the backoff applies there as well
    assert RLM("m", retry_backoff_seconds=0.25).retry_policy.backoff_seconds == 0.25


def test_retry_policy_reads_status_and_retry_after() -> None:
    import asyncio
    from types import SimpleNamespace

    from rlm_compat.retry import RetryPolicy, is_retryable

    def failure(status: int, after: str | None = None) -> Exception:
        exc = RuntimeError(f"HTTP {status}")
        headers = {} if after is None else {"Retry-After": after}
        exc.response = SimpleNamespace(status_code=status, headers=headers)  # type: ignore[attr-defined]
        return exc

    policy = RetryPolicy(max_retries=2, backoff_seconds=0.5)
    assert policy.delay(1, failure(429)) == 0.5 and policy.delay(2, failure(500)) == 1.0
    assert policy.delay(1, failure(503, "2.5")) == 2.5 and policy.delay(1, failure(503, "soon")) == 0.5
    assert policy.delay(3, failure(503)) is None and policy.delay(1, failure(401)) is None
    # litellm 1.9x: the headers only on litellm_response_headers, beside a rebuilt response
    rebuilt = failure(429)
    rebuilt.litellm_response_headers = {"retry-after-ms": "1500"}  # type: ignore[attr-defined]
    assert policy.delay(1, rebuilt) == 1.5
    assert is_retryable(asyncio.TimeoutError()) and not is_retryable(asyncio.CancelledError())
    assert not is_retryable(ValueError("bad request"))


def test_max_iterations_message_follows_the_preset(chat_server: ServerFactory) -> None:
    from rlm_compat.errors import MaxIterationsError

    with pytest.raises(MaxIterationsError, match=r"^Max iterations \(1\) exceeded without FINAL\(\)$"):
        make(chat_server(["x = 1"]), max_iterations=1).complete("q", "ctx")
    with pytest.raises(MaxIterationsError, match=r"^Max iterations \(1\) exceeded without a final answer$"):
        make(chat_server(["x = 1"]), api="0.5", max_iterations=1).complete("q", "ctx")


def test_result_trajectory_takes_the_release_shape_under_the_preset(chat_server: ServerFactory) -> None:
    script = ("x = context[:3]\nprint(x)", "a = llm_query('sub', 'piece')", "leaf", "FINAL_VAR(a)")
    redacted = make(chat_server(replies(*script)), api="0.5").complete_result("Secret q", "Secret c")
    kinds = [e.kind for e in redacted.trajectory]
    assert kinds[0] == "run_start" and kinds[-1] == "run_end" and "subcall_start" not in kinds
    assert [e.sequence for e in redacted.trajectory] == list(range(1, len(kinds) + 1))
    assert redacted.trajectory[0].data == {"query_chars": 8, "context_chars": 8}
    assert "Secret" not in json.dumps(redacted.to_dict())
    step = next(e for e in redacted.trajectory if e.kind == "repl_step")
    assert step.data == {"status": "ok", "code_chars": len(script[0]), "output_chars": 3}
    final = next(e for e in redacted.trajectory if e.kind == "final_answer")
    assert final.data == {"method": "worker_variable", "answer_chars": 4}  # FINAL_VAR(a), 0.5.0's name
    direct = make(chat_server(replies('FINAL("ok")')), api="0.5").complete_result("q", "c")
    assert next(e for e in direct.trajectory if e.kind == "final_answer").data["method"] == "directive"

    seen: list[Any] = []
    rlm = make(
        chat_server(replies(*script)),
        api="0.5",
        capture_trajectory_content=True,
        event_handler=seen.append,
    )
    captured = rlm.complete_result("Secret q", "Secret c")
    assert seen == list(captured.trajectory)
    assert captured.trajectory[0].data == {"query": "Secret q", "context": "Secret c"}
    starts = [e.data for e in captured.trajectory if e.kind == "model_call_start"]
    # every call reports the whole list it sent, as the provider received it
    assert [len(s["messages"]) for s in starts] == [s["message_count"] for s in starts] == [2, 4, 2, 6]
    assert starts[2]["is_leaf"] and starts[2]["messages"][1]["content"] == "Task:\nsub\n\nContext:\npiece"
    ends = [e.data for e in captured.trajectory if e.kind == "model_call_end"]
    assert [e["response"] for e in ends] == list(script)

    # the default API keeps rlm_compat's own typed events (docs/trajectory.md)
    default = make(chat_server(replies(*script[:1], 'FINAL("ok")'))).complete_result("Secret q", "Secret c")
    assert default.trajectory[0].data["query"] == "Secret q"
    assert "reply" in next(e.data for e in default.trajectory if e.kind == "model_call_end")


def test_a_repl_step_is_cut_off_by_the_run_time_budget(chat_server: ServerFactory) -> None:
    from rlm_compat.errors import BudgetExceededError

    server = chat_server(replies('FINAL("warm")', "while True: pass"))
    assert make(server, api="0.5").complete("q", "ctx") == "warm"  # litellm imported before the clock runs
    rlm = make(
        server,
        api="0.5",
        repl_timeout=60,
        max_elapsed_seconds=3,
        isolation="process",
        capture_trajectory_content=True,
    )
    with pytest.raises(BudgetExceededError) as raised:
        rlm.complete("q", "ctx")
    # the step's 60 s timeout never ran out: the budget's deadline ended it
    assert raised.value.metric == "elapsed_seconds"
    step = next(e for e in rlm.trajectory if e.kind == "repl_step")
    assert step.data["status"] == "error"
    limit = float(re.search(r"exceeded the ([0-9.]+) s timeout", step.data["output"])[1])  # type: ignore[index]
    assert limit <= 3
