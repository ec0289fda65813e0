"""The loop engine's seams: typed model-call outcomes, children from settings, no per-run state on the facade."""

from __future__ import annotations

import asyncio
from typing import Any

from rlm_compat import RLM
from rlm_compat._loop import ModelCaller, Reply, RetryAfter, Tally
from rlm_compat.clients import ScriptedClient
from rlm_compat.record import Run
from rlm_compat.types import Message


class _RateLimited(Exception):
    status_code = 429


class _FlakyClient:
    """Fails once with a 429, then answers."""

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, model: str, messages: list[Message], **kwargs: Any) -> str:
        self.calls += 1
        if self.calls == 1:
            raise _RateLimited("slow down")
        return "hi"


def test_an_attempt_is_a_reply_or_a_typed_retry_delay() -> None:
    settings = RLM("m", client=ScriptedClient([]), max_retries=1, retry_backoff_seconds=0.25).settings
    caller = ModelCaller(settings, _FlakyClient(), Tally())
    run = Run()
    messages = [Message(role="user", content="q")]

    async def attempts() -> list[Reply | RetryAfter]:
        from rlm_compat._loop.model_call import _Call

        call = _Call(run, "rlm-1", messages, "m", {}, False, 1, 0, 0)
        return [await caller._attempt(call, 1), await caller._attempt(call, 2)]

    assert asyncio.run(attempts()) == [RetryAfter(0.25), Reply("hi")]
    assert caller.tally.llm_calls == 2
    kinds = [type(e).__name__ for e in run.events()]
    assert kinds == ["ModelCallStarted", "ModelCallFailed", "ModelCallStarted", "ModelCallFinished"]


def test_a_run_writes_nothing_on_the_facade_but_its_record() -> None:
    client = ScriptedClient(['```python\nprint(rlm_query("sub", "ctx"))\n```', 'FINAL("c")', 'FINAL("done")'])
    rlm = RLM("m", recursive_model="small", client=client, isolation="inline")
    before = dict(vars(rlm))
    assert rlm.complete("q", "context") == "done"
    changed = {name for name, value in vars(rlm).items() if before.get(name) is not value}
    assert changed == {"last_run", "_last_messages"}
    assert [c.model for c in client.calls] == ["m", "small", "m"]  # the child: settings.child()
    assert rlm.messages[-1]["content"].endswith("c")  # the root's conversation, after the run
    assert rlm.stats == {"llm_calls": 2, "iterations": 2, "depth": 0}  # the child's call is its own
