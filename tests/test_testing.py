"""The public fakes: the loopback server's scripted replies, errors, raw bodies, drops and latency."""

from __future__ import annotations

import http.client
import json
from typing import Any

import pytest

from rlm_compat.testing import Disconnect, ErrorReply, RawReply, ScriptedChatServer


def post(server: ScriptedChatServer, body: dict[str, Any]) -> http.client.HTTPResponse:
    host, port = server.base_url.split("//")[1].split("/")[0].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    return conn.getresponse()


REQUEST = {"model": "m", "messages": [{"role": "user", "content": "two words"}]}


def test_text_reply_has_word_count_usage() -> None:
    with ScriptedChatServer(["three word reply"]) as server:
        response = post(server, REQUEST)
        body = json.loads(response.read())
    assert response.status == 200
    assert body["choices"][0]["message"]["content"] == "three word reply"
    assert body["usage"] == {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5}
    assert server.messages == [REQUEST["messages"]]


def test_error_reply_carries_status_and_retry_after() -> None:
    with ScriptedChatServer([ErrorReply(429, "slow down", retry_after=1.5)]) as server:
        response = post(server, REQUEST)
        body = json.loads(response.read())
    assert response.status == 429
    assert response.getheader("Retry-After") == "1.5"
    assert body["error"]["message"] == "slow down"
    assert body["error"]["type"] == "rate_limit_error"


def test_raw_reply_is_sent_verbatim() -> None:
    with ScriptedChatServer([RawReply(b"{oops", status=200)]) as server:
        response = post(server, REQUEST)
        assert response.read() == b"{oops"


def test_disconnect_sends_nothing() -> None:
    with ScriptedChatServer([Disconnect()]) as server, pytest.raises(http.client.RemoteDisconnected):
        post(server, REQUEST)


@pytest.mark.parametrize(
    ("script", "match"),
    [
        ([], "script exhausted after 0"),
        (lambda r: 42, "returned int, not a Reply"),
        (lambda r: 1 / 0, "ZeroDivision"),
    ],
    ids=["exhausted", "bad-type", "script-raises"],
)
def test_script_problems_are_400_with_a_reason(script: Any, match: str) -> None:
    with ScriptedChatServer(script) as server:
        response = post(server, REQUEST)
        body = json.loads(response.read())
    assert response.status == 400
    assert match in body["error"]["message"]


def test_loopback_module_is_gone() -> None:
    with pytest.raises(ImportError):
        __import__("rlm_compat.loopback")
