"""Sessions over `rlm-compat serve`: a conversation of turns over one persistent RLM, with the openai
client against real server processes (through litellm to the scripted loopback provider).

A three-turn conversation over a 50 MB context: the context crosses to the session's worker once (the
same worker answers every turn and holds one copy); then DELETE, expiry, the limits, a busy session
and an id from another server process each behave as docs/serve.md says.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from serve_harness import MODEL, TOKEN, Served, descendants, rss_mb, serving

from rlm_compat.testing import Reply, ScriptedChatServer

pytest.importorskip("aiohttp")

BIG = 50_000_000


def _script(request: dict[str, Any]) -> Reply:
    messages = request.get("messages", [])
    query = str(messages[1].get("content", "")) if len(messages) > 1 else ""
    later = len(messages) > 2
    if query.startswith("T1"):
        return 'FINAL_VAR("n")' if later else "n = len(context)\nprint(n)"
    if query.startswith("T2"):
        return 'FINAL_VAR("r")' if later else "r = f'{n}/{len(context_0)}/{len(context)}'\nprint(r)"
    if query.startswith("T3"):
        return (
            'FINAL_VAR("r")'
            if later
            else "r = f'{n}:{context}:{len(context_0)}:{history_1[\"answer\"]}'\nprint(r)"
        )
    if query.startswith("SLOW"):  # within the harness's 1 s provider timeout
        time.sleep(0.8)
        return 'FINAL("slow")'
    return 'FINAL("ok")'


def _flags(*extra: str) -> list[str]:
    return ["--max-context-chars", str(BIG + 1000), "--max-body-bytes", str(BIG + 1_000_000), *extra]


@pytest.fixture(scope="module")
def provider() -> Iterator[ScriptedChatServer]:
    with ScriptedChatServer(_script) as server:
        yield server


def _ask(server: Served, query: str, **rlm: Any) -> tuple[str, dict[str, Any], httpx.Headers]:
    raw = server.client().chat.completions.with_raw_response.create(
        model=MODEL, messages=[{"role": "user", "content": query}], extra_body={"rlm": rlm}
    )
    reply = raw.parse()
    extra = reply.model_extra["rlm"]  # type: ignore[index]
    return str(reply.choices[0].message.content), extra, raw.headers


def _session_error(server: Served, query: str, **rlm: Any) -> openai.APIStatusError:
    with pytest.raises(openai.APIStatusError) as caught:
        _ask(server, query, **rlm)
    return caught.value


def _workers(server: Served) -> list[int]:
    return [p for p in server.workers() if p != server.process.pid]


# once_per_ci: the 50 MB context's crossing and memory are the worker transport's, the same code on
# every Python; the session rules (limits, expiry, ids) run on every Python in the tests below
@pytest.mark.once_per_ci
def test_a_three_turn_conversation_keeps_one_worker_with_one_copy(
    provider: ScriptedChatServer, tmp_path: Path
) -> None:
    with serving(tmp_path, provider, *_flags("--max-sessions", "2")) as server:
        answer, extra, headers = _ask(server, "T1", session="new", context="x" * BIG)
        session = extra["session"]["id"]
        assert answer == str(BIG) and headers["x-rlm-session"] == session and extra["session"]["turn"] == 1
        workers = _workers(server)
        assert len(workers) == 1  # the session's, kept; a plain run's worker ends with its run
        answer, extra, _ = _ask(server, "T2", session=session)
        assert answer == f"{BIG}/{BIG}/{BIG}" and extra["session"]["turn"] == 2
        answer, extra, _ = _ask(server, "T3", session=session, context="small")
        assert answer == f"{BIG}:small:{BIG}:{BIG}/{BIG}/{BIG}" and extra["session"]["turn"] == 3
        assert _workers(server) == workers  # every turn in the same worker
        assert rss_mb(workers[0]) < BIG / 1e6 * 1.5 + 40  # one copy of the context, not one per turn

        # a plain request beside it is untouched by the session
        assert _ask(server, "plain", context="c")[0] == "ok"

        health = httpx.get(server.base_url.removesuffix("/v1") + "/health").json()
        assert health["sessions"] == 1
        deleted = httpx.delete(
            f"{server.base_url}/rlm/sessions/{session}", headers={"Authorization": f"Bearer {TOKEN}"}
        )
        assert deleted.status_code == 200 and deleted.json()["deleted"] is True
        error = _session_error(server, "T2", session=session)
        assert error.status_code == 404 and error.body["code"] == "session_not_found"  # type: ignore[index]
        deadline = time.monotonic() + 10
        while workers[0] in descendants(server.process.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert workers[0] not in descendants(server.process.pid)


def test_limits_busy_expiry_and_shutdown(provider: ScriptedChatServer, tmp_path: Path) -> None:
    flags = _flags(
        "--max-sessions", "2", "--session-idle-seconds", "1.0", "--session-max-context-chars", "100"
    )
    with serving(tmp_path, provider, *flags) as server:
        first = _ask(server, "go", session="new", context="a" * 60)[1]["session"]["id"]
        second = _ask(server, "go", session="new")[1]["session"]["id"]
        full = _session_error(server, "go", session="new")
        assert full.status_code == 429 and full.body["code"] == "session_limit"  # type: ignore[index]
        over = _session_error(server, "go", session=first, context="b" * 50)
        assert over.status_code == 400 and over.body["code"] == "session_context_exceeded"  # type: ignore[index]
        fixed = _session_error(server, "go", session=first, max_calls=1)
        assert fixed.status_code == 400 and fixed.body["code"] == "session_limits_fixed"  # type: ignore[index]

        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            slow = pool.submit(_ask, server, "SLOW", session=second)
            time.sleep(0.3)
            busy = _session_error(server, "go", session=second)
            assert slow.result()[0] == "slow"
        assert busy.status_code == 429 and busy.body["code"] == "session_busy"  # type: ignore[index]

        time.sleep(1.8)  # both idle past 1 s: the reaper (every 0.25 s) closed them
        expired = _session_error(server, "go", session=first)
        assert expired.status_code == 404 and expired.body["code"] == "session_not_found"  # type: ignore[index]
        kept = _ask(server, "go", session="new")[1]["session"]["id"]
        worker = _workers(server)
        assert worker and kept
    # the server stopped (SIGTERM): the session it held ended with it
    assert all(not Path(f"/proc/{pid}").exists() or _zombie(pid) for pid in worker)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True
