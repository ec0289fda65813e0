"""Shared fixtures: a real loopback chat-completions server, offline litellm."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from report_guard import pytest_runtest_makereport  # noqa: F401  (a failure's report stays short)
from upstream_checkout import (  # noqa: F401  (the live tests' ysz/recursive-llm checkout)
    pytest_collection_modifyitems,
    pytest_configure,
    pytest_report_header,
)

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from rlm_compat.loopback import ScriptedChatServer

ServerFactory = Callable[..., ScriptedChatServer]


@pytest.fixture
def chat_server() -> Iterator[ServerFactory]:
    """Start scripted OpenAI-compatible servers on 127.0.0.1; all are stopped after the test."""
    started: list[ScriptedChatServer] = []

    def start(replies: Sequence[str] | Callable[[dict[str, Any]], str] = ()) -> ScriptedChatServer:
        server = ScriptedChatServer(replies).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
