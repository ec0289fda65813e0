"""Compaction (``compaction=True``) through litellm to the loopback server with a small window: the
run compacts, keeps its REPL state and answers; the events and the figures are in the record."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rlm_compat import RLM
from rlm_compat.errors import ConfigurationError
from rlm_compat.events import CompactionFinished, CompactionStarted, ModelCallStarted, ReplStep
from rlm_compat.testing import ScriptedChatServer

ServerFactory = Callable[..., ScriptedChatServer]

STEP = "```python\nseen = seen + [len(context)] if 'seen' in dir() else [len(context)]\nprint('x' * 600)\n```"
SUMMARY = "Summary: `seen` holds one length per step so far; keep stepping."


def _script(replies: list[str]) -> Callable[[dict[str, Any]], str]:
    queue = list(replies)

    def reply(request: dict[str, Any]) -> str:
        last = str(request["messages"][-1]["content"])
        if last.startswith("Your conversation is about to be compacted"):
            return SUMMARY
        return queue.pop(0)

    return reply


def test_a_small_window_compacts_and_the_repl_keeps_its_state(
    chat_server: ServerFactory, tmp_path: Path
) -> None:
    server = chat_server(_script([STEP] * 5 + ["```python\nprint(len(seen))\n```", 'FINAL_VAR("seen")']))
    trajectory = tmp_path / "run.jsonl"
    rlm = RLM(
        "openai/m",
        api_base=server.base_url,
        api_key="sk-loop",
        compaction=True,
        context_window_tokens=1200,
        trajectory_path=trajectory,
    )
    result = rlm.complete_result("q", "ctx")
    assert result.answer == "[3, 3, 3, 3, 3]"  # every step's variable survived the compactions
    steps = [e for e in result.trajectory if isinstance(e, ReplStep)]
    assert steps[5].output.strip() == "5"
    started = [e for e in result.trajectory if isinstance(e, CompactionStarted)]
    finished = [e for e in result.trajectory if isinstance(e, CompactionFinished)]
    assert started and len(started) == len(finished)
    assert all(s.tokens_before >= s.threshold_tokens == int(1200 * 0.85) for s in started)
    assert all(
        f.tokens_after < s.tokens_before and f.messages_after == 4
        for s, f in zip(started, finished, strict=True)
    )
    assert result.stats["compactions"] == len(started) and result.stats["compacted_tokens"] > 0
    summary_calls = [e for e in result.trajectory if isinstance(e, ModelCallStarted) and e.is_leaf]
    assert len(summary_calls) == len(started)  # one counted, recorded model call each
    after = next(
        r for r in server.requests if len(r["messages"]) > 3 and r["messages"][2]["content"] == SUMMARY
    )
    note = after["messages"][3]["content"]
    assert note.startswith("Your conversation has been compacted (1 time)") and "seen (list)" in note
    assert [m["role"] for m in after["messages"][:4]] == ["system", "user", "assistant", "user"]
    from rlm_compat.tools.runs.steps import from_trajectory

    recorded = from_trajectory(trajectory)
    assert all(not step.subcalls for step in recorded.steps)  # the summary call is not the code's


def test_without_a_window_a_model_litellm_does_not_know_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="context_window_tokens"):
        RLM("openai/no-such-model-xyz", compaction=True)
    assert RLM("openai/gpt-4o-mini", compaction=True).settings.context_window_tokens == 128000
    assert RLM("openai/no-such-model-xyz").settings.context_window_tokens is None  # off: not needed
    with pytest.raises(ConfigurationError, match="compaction_threshold_pct"):
        RLM("m", compaction=True, context_window_tokens=10, compaction_threshold_pct=1.5)
