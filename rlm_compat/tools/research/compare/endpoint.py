"""A model endpoint for offline runs: a task's scripted policy behind an OpenAI-compatible server.

Any implementation that can talk to an OpenAI-compatible ``api_base`` (through litellm, the
``openai`` client, anything) gets the same deterministic "model" rlm_compat's own grid uses: the
task's :class:`~.scripted_policy.ScriptedPolicy`, which reads the implementation's system prompt and writes
in its conventions (:class:`~.scripted_policy.Dialect`: fence tag, ``FINAL`` / ``FINAL_VAR`` inline or
alone, or the ``answer`` dict). What it measures is the implementations' *mechanics* (their
REPL, parser, loop and sub-call plumbing on the same replies); a real model measures the rest.

Every request is kept, so calls and tokens are counted here the same way for every
implementation: tokens are words, as :class:`~rlm_compat.testing.ScriptedChatServer` reports them.
"""

from __future__ import annotations

import json
from types import TracebackType
from typing import Any

from ....testing import ScriptedChatServer
from ..base import TaskInstance
from ..task_policies import policy_for

__all__ = ["SCRIPTED_ENDPOINT_MODEL", "PolicyEndpoint"]

SCRIPTED_ENDPOINT_MODEL = "openai/scripted"
"""The litellm model name implementations are given for the scripted endpoint."""


class PolicyEndpoint:
    """``with PolicyEndpoint(task) as endpoint:`` a loopback server at ``endpoint.base_url``."""

    def __init__(self, task: TaskInstance, *, variant: int = 0) -> None:
        self.policy = policy_for(task, variant=variant)
        self.server = ScriptedChatServer(self._reply)

    def _reply(self, request: dict[str, Any]) -> str:
        return self.policy.reply(request.get("messages", []))

    @property
    def base_url(self) -> str:
        return self.server.base_url

    def __enter__(self) -> PolicyEndpoint:
        self.server.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.server.stop()

    def transcript(self) -> str:
        """Every request it served and the reply, one JSON line each: the model's side of the run,
        the same for every implementation (kept as ``endpoint.jsonl`` beside the record)."""
        lines = []
        for request in self.server.requests:
            messages = request.get("messages", [])
            reply = self.policy.reply(messages)
            lines.append(json.dumps({"model": request.get("model"), "messages": messages, "reply": reply}))
        return "".join(line + "\n" for line in lines)

    def usage(self) -> tuple[int, int, int]:
        """``(calls, prompt_tokens, completion_tokens)`` served so far (tokens are words)."""
        prompt = completion = 0
        for request in self.server.requests:
            messages = request.get("messages", [])
            prompt += sum(len(str(m.get("content", "")).split()) for m in messages)
            completion += len(self.policy.reply(messages).split())
        return len(self.server.requests), prompt, completion
