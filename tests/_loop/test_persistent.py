"""Persistent sessions (``persistent=True``) through litellm to the loopback server, in the hardened
worker by default: calls share one REPL, contexts and exchanges are kept, nothing crosses twice."""

from __future__ import annotations

import asyncio
import os
import pickle
import time
from collections.abc import Callable
from typing import Any

import pytest

from rlm_compat import RLM
from rlm_compat.errors import BudgetExceededError, ConfigurationError, SessionBusyError
from rlm_compat.events import ReplStep
from rlm_compat.record import CompletionResult
from rlm_compat.sandbox.isolate import mapped
from rlm_compat.testing import ScriptedChatServer

ServerFactory = Callable[..., ScriptedChatServer]


def _rlm(server: ScriptedChatServer, **kwargs: Any) -> RLM:
    return RLM("openai/m", api_base=server.base_url, api_key="sk-loop", persistent=True, **kwargs)


def _fenced(code: str) -> str:
    return f"```python\n{code}\n```"


def _outputs(result: CompletionResult) -> list[str]:
    return [e.output.strip() for e in result.trajectory if isinstance(e, ReplStep)]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_three_calls_share_one_repl_and_a_big_context_crosses_once(
    chat_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    written: list[int] = []
    real_write = mapped.write

    def counting_write(value: Any) -> Any:
        written.append(len(value))
        return real_write(value)

    monkeypatch.setattr(mapped, "write", counting_write)
    big = "log line\n" * 11_200_000  # 100.8 MB
    server = chat_server(
        [
            _fenced("lines = context.count('\\n')\nprint(lines)"),
            'FINAL_VAR("lines")',
            _fenced("print(lines, len(context_0), context_1, context)"),
            'FINAL("second")',
            _fenced(
                "h = history_0\nprint(h['query'], h['answer'], h['error'], [s['code'][:9] for s in h['steps']])"
            ),
            'FINAL("third")',
            _fenced("print(query, context, 'context_3' in dir())"),
            'FINAL("fourth")',
        ]
    )
    with _rlm(server) as rlm:
        first = rlm.complete_result("count", big)
        before_second = len(written)
        second = rlm.complete_result("again", "small")
        third = rlm.complete_result("recall", "tiny")
        fourth = rlm.complete_result("no context given")
        runner = rlm._engine.session.repl._runner  # type: ignore[union-attr]
        pid = runner.worker_pid
        assert pid is not None and _alive(pid)
    assert (first.answer, second.answer, third.answer) == ("11200000", "second", "third")
    assert [r.session_turn for r in (first, second, third)] == [1, 2, 3]
    assert written[:before_second] == [len(big)]  # once, though bound as context and context_0
    assert all(n < len(big) for n in written[before_second:])  # never again
    assert _outputs(second)[0] == f"11200000 {len(big)} small small"
    assert _outputs(third)[0] == "count 11200000 None ['```python', 'FINAL_VAR']"
    user = server.requests[4]["messages"][1]["content"]
    assert user.startswith("recall\n\n[Persistent REPL session, call 3.")
    assert "context_0 (100,800,000 chars), context_1 (5 chars), context_2 (4 chars)" in user
    assert "history_0, history_1" in user
    assert not _alive(pid)  # close() (the with block) ended the worker
    assert third.to_dict()["session_turn"] == 3
    assert _outputs(fourth)[0] == "no context given tiny False"  # a question about the newest context


def test_a_second_call_while_one_runs_is_refused(chat_server: ServerFactory) -> None:
    server = chat_server([_fenced("x = 1"), 'FINAL("done")'], latency=0.3)
    rlm = _rlm(server, isolation="inline")

    async def both() -> list[Any]:
        return await asyncio.gather(rlm.acomplete("a", "c"), rlm.acomplete("b", "c"), return_exceptions=True)

    first, second = asyncio.run(both())
    assert first == "done"
    assert isinstance(second, SessionBusyError) and "one call at a time" in str(second)
    rlm.close()


def test_a_failed_call_is_kept_as_history_and_the_session_goes_on(chat_server: ServerFactory) -> None:
    server = chat_server(
        [
            _fenced("kept = [1, 2]"),
            _fenced("kept.append(3)"),
            _fenced("print(kept, history_0['error'])"),
            'FINAL("ok")',
        ]
    )
    rlm = _rlm(server, max_iterations=2)
    failed = rlm.try_complete_result("first", "c")
    assert not failed.succeeded and failed.session_turn == 1
    second = rlm.complete_result("second", "c")
    assert _outputs(second)[0] == "[1, 2, 3] MaxIterationsError: Max iterations (2) exceeded without FINAL()"
    rlm.close()


def test_a_cancelled_call_loses_only_what_lived_in_its_worker(chat_server: ServerFactory) -> None:
    server = chat_server(
        [
            _fenced("small = 'kept'\ndef helper():\n    return 1"),
            _fenced("import time\nwhile True:\n    time.sleep(0.01)"),
            _fenced("print(small, 'helper' in dir())"),
            'FINAL("after")',
        ]
    )
    rlm = _rlm(server, repl_timeout=30)

    async def cancelled() -> None:
        task = asyncio.ensure_future(rlm.acomplete("spin", "c"))
        deadline = time.monotonic() + 20
        while len(server.requests) < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancelled())
    result = rlm.complete_result("next", "c")
    assert result.answer == "after" and _outputs(result)[0] == "kept False"
    assert (
        "A cancelled call lost what lived only in its REPL worker: helper."
        in (server.requests[2]["messages"][1]["content"])
    )
    rlm.close()


def test_children_are_not_persistent_and_plain_rlms_have_no_session(chat_server: ServerFactory) -> None:
    server = chat_server(
        [
            _fenced("print(rlm_query('sub', 'c'))"),
            _fenced("print('context_0' in dir())"),
            'FINAL("c")',
            'FINAL("r")',
        ]
    )
    rlm = _rlm(server, isolation="inline")
    assert rlm.complete("q", "ctx") == "r"
    child = [e for e in rlm.trajectory if isinstance(e, ReplStep) and e.depth == 1]
    assert child[0].output.strip() == "False"
    assert rlm.settings.child().persistent is False
    plain = RLM("openai/m", api_base=server.base_url, api_key="k")
    plain.close()  # nothing to end
    assert os.getpid() > 0


def test_a_session_budget_spans_the_calls_and_each_call_keeps_its_own(chat_server: ServerFactory) -> None:
    """``session_budget`` charges every call of the session; ``max_total_*`` still bounds each."""
    server = chat_server([_fenced("x = 1"), 'FINAL("a")'] * 6)
    with _rlm(server, session_budget={"max_calls": 5}, max_total_calls=4) as rlm:
        first = rlm.try_complete_result("q1", "ctx")
        second = rlm.try_complete_result("q2")
        assert isinstance(first, CompletionResult) and isinstance(second, CompletionResult)
        assert second.stats["budget"]["session"]["reserved_calls"] == 4
        assert second.stats["budget"]["reserved_calls"] == 2  # the call's own figures
        third = rlm.try_complete_result("q3")
        assert third.error_type == "BudgetExceededError"  # type: ignore[union-attr]
        assert third.error.startswith("Session budget exceeded for llm_calls: limit=5")  # type: ignore[union-attr]
        assert len(server.requests) == 5  # the refused call was never sent
        rlm.close()  # a new session, a new budget
        assert isinstance(rlm.try_complete_result("q4", "ctx"), CompletionResult)
    assert rlm.settings.session_budget is not None
    with _rlm(chat_server([_fenced("x = 1"), 'FINAL("a")'] * 2)) as plain:  # totals without limits
        plain.complete("q1", "ctx")
        totals = plain.complete_result("q2").stats["budget"]["session"]
        assert totals["reserved_calls"] == 4 and totals["max_calls"] is None
    with pytest.raises(ConfigurationError, match="session_budget needs persistent=True"):
        RLM("openai/m", session_budget={"max_calls": 3})
    with pytest.raises(ConfigurationError, match="must be None or a dict of max_calls"):
        RLM("openai/m", persistent=True, session_budget={"max_seconds": 3})
    with pytest.raises(ConfigurationError, match="max_calls must be a positive"):
        RLM("openai/m", persistent=True, session_budget={"max_calls": 0})
    error = BudgetExceededError("llm_calls", 5, 6, "session")
    assert pickle.loads(pickle.dumps(error)).scope == "session"
