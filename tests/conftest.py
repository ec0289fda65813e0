"""Shared fixtures: a real loopback chat-completions server, offline litellm."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from rlm_compat.testing import Reply, ScriptedChatServer

ServerFactory = Callable[..., ScriptedChatServer]

# Short failure reports; the live tests' upstream checkout; how tests are split over xdist workers.
pytest_plugins = ("report_guard", "upstream_checkout", "xdist_plan")


@pytest.fixture
def chat_server() -> Iterator[ServerFactory]:
    """Start scripted OpenAI-compatible servers on 127.0.0.1; all are stopped after the test."""
    started: list[ScriptedChatServer] = []

    def start(
        replies: Sequence[Reply] | Callable[[dict[str, Any]], Reply] = (), *, latency: float = 0.0
    ) -> ScriptedChatServer:
        server = ScriptedChatServer(replies, latency=latency).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def mapped_writes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The lengths of the values the parent puts in sealed memory files (the real write still runs):
    how the tests tell how often a big context crossed."""
    from rlm_compat.sandbox.isolate import mapped

    lengths: list[int] = []
    real = mapped.write

    def counting(value: str | bytes) -> tuple[int, str, int]:
        lengths.append(len(value))
        return real(value)

    monkeypatch.setattr(mapped, "write", counting)
    return lengths
