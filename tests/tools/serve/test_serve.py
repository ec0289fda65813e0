"""`rlm-compat serve` with real clients: the openai package and litellm talk to a real server process,
which talks through litellm to the scripted loopback provider (rlm_compat.testing).

One server process for the module (its litellm import is the expensive part). The provider's script
reads markers in the query, so each test chooses its own provider behaviour. Load: 64 concurrent
requests with distinct contexts, then nothing left behind. Faults: provider errors, timeouts and
malformed replies, a worker killed mid-step, a client gone mid-stream, each limit, bad bodies; after
each the server keeps serving (every test ends with a healthy request, see ``server``).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from serve_harness import (
    MODEL,
    PROVIDER_KEY,
    TOKEN,
    Served,
    describe,
    non_socket_fds,
    rss_mb,
    serving,
)

from rlm_compat.testing import ErrorReply, RawReply, Reply, ScriptedChatServer

pytest.importorskip("aiohttp")

ANSWER_CODE = 'import re\nm = re.search(r"TOKEN-\\w+", context)\nFINAL(query + "|" + m.group(0))'
SPIN_CODE = "x = 0\nwhile True:\n    x += 1"
LOAD = os.environ.get("RLM_COMPAT_SERVE_LOAD_TESTS") == "1"
"""The 64-request load and queue-overflow tests (~10 s): .ci/run sets this for the default Python only."""
load_test = pytest.mark.skipif(
    not LOAD, reason="RLM_COMPAT_SERVE_LOAD_TESTS=1 runs the load tests (set by .ci/run)"
)
MAX_BODY = 1_000_000
MAX_CONTEXT = 300_000
RETRY_LITELLM, RETRY_LEAN = "rlm-retry-litellm", "rlm-retry-lean"


def _script(request: dict[str, Any]) -> Reply:
    messages = request.get("messages", [])
    query = str(messages[1].get("content", "")) if len(messages) > 1 else ""
    later = len(messages) > 2  # the root's second call: the step's observation is in
    if "ECHOKEY" in query:
        auth = request["_headers"].get("authorization", "")
        return ErrorReply(400, f"provider rejected key {auth}")
    if "P401" in query:
        return ErrorReply(401, "provider says: bad key")
    if "NOCHOICES" in query:
        return RawReply(b'{"choices": []}')
    if "SUBCALL" in query:
        return 'r = llm_query("sub")\nFINAL("sub:" + r)' if len(messages) > 1 else "leaf"
    if "P429" in query:
        return ErrorReply(429, "provider rate limit", retry_after=0)
    if "P500" in query:
        return ErrorReply(500, "provider exploded")
    if "MALFORMED" in query:
        return RawReply(b"{not json")
    if "SLOWPROVIDER" in query:
        time.sleep(2.5)
        return 'FINAL("too late")'
    if "TOOLPID" in query:
        return "FINAL(str(server_pid()))"
    if "SPIN" in query:
        return 'FINAL("recovered")' if later else SPIN_CODE
    if "CALLS" in query:
        return 'for i in range(5):\n    llm_query("sub")\nFINAL("many")' if len(messages) > 1 else "leaf"
    if len(messages) == 1:
        return "leaf"
    return ANSWER_CODE


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("serve")
    (root / "docs").mkdir()
    (root / "docs" / "a.txt").write_text("alpha TOKEN-fromdoc omega", encoding="utf-8")
    with ScriptedChatServer(_script) as provider:
        config = root / "models.toml"
        common = (
            f'model = "openai/gpt-4o-mini"\napi_base = "{provider.base_url}"\napi_key_env = "PROVIDER_KEY"\n'
        )
        common += "request_timeout = 1.0\n"
        retry = "max_retries = 1\nretry_backoff_seconds = 0\n"
        config.write_text(
            f'[models.rlm-lean]\n{common}client = "openai-compatible"\n'
            # the same model on both client paths, retrying once: for the one error table
            f'[models.{RETRY_LITELLM}]\n{common}client = "litellm"\n{retry}'
            f'[models.{RETRY_LEAN}]\n{common}client = "openai-compatible"\n{retry}'
            # a custom tool from the standard library: the server's own pid
            f'[models.rlm-tools]\n{common}tools = ["server_pid=os:getpid"]\n',
            encoding="utf-8",
        )
        flags = ["--repl-timeout", "10"]  # so a run that ends sooner was ended by the test
        flags += ["--max-concurrent", "8", "--max-queue", "56", "--max-calls", "4", "--max-seconds", "20"]
        flags += ["--max-body-bytes", str(MAX_BODY), "--max-context-chars", str(MAX_CONTEXT)]
        flags += ["--documents-root", str(root / "docs"), "--trajectory-dir", str(root / "runs")]
        flags += ["--config", str(config)]
        with serving(root, provider, *flags) as served:
            served.provider = provider
            yield served


@pytest.fixture
def server(served: Served) -> Iterator[Served]:
    """The module's server; after each test it still answers a plain request correctly."""
    yield served
    assert served.ask("after", "x TOKEN-still y") == "after|TOKEN-still"


# --- the happy paths, with both real clients ---------------------------------------------------


def test_openai_client_gets_the_answer_usage_and_the_run_record(server: Served) -> None:
    reply = server.client().chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Q1"}],
        extra_body={"rlm": {"context": "blah TOKEN-abc blah"}},
    )
    assert reply.choices[0].message.content == "Q1|TOKEN-abc"
    assert reply.usage is not None and reply.usage.total_tokens > 0
    extra = reply.model_extra["rlm"]  # type: ignore[index]
    assert extra["run_id"] == reply.id and extra["stats"]["total_tokens"] == reply.usage.total_tokens
    trajectory = httpx.get(
        server.base_url.removesuffix("/v1") + extra["trajectory"],
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    kinds = [json.loads(line)["kind"] for line in trajectory.text.splitlines()]
    assert kinds[0] == "run_start" and kinds[-1] == "run_end"
    assert [m.id for m in server.client().models.list()] == [
        "rlm-lean",
        RETRY_LITELLM,
        RETRY_LEAN,
        "rlm-tools",
        MODEL,
    ]


def test_openai_client_streams_the_answer_and_usage_and_skips_progress(server: Served) -> None:
    stream = server.client().chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Q2"}],
        extra_body={"rlm": {"context": "TOKEN-zzz"}},
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Q2|TOKEN-zzz"
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0
    # the progress lines are there for those who read the raw stream
    raw = httpx.post(
        server.base_url + "/chat/completions",
        headers={"Authorization": f"Bearer {TOKEN}"},
        json={
            "model": MODEL,
            "stream": True,
            "messages": [{"role": "user", "content": "Q3"}],
            "rlm": {"context": "TOKEN-p"},
        },
    ).text
    progress = [
        json.loads(line.split(" ", 2)[2]) for line in raw.splitlines() if line.startswith(": rlm-progress")
    ]
    assert {"model_call_start", "repl_step"} <= {p["kind"] for p in progress}
    assert raw.rstrip().endswith("data: [DONE]")


def test_litellm_uses_the_server_as_an_openai_compatible_provider(server: Served) -> None:
    import litellm

    async def both() -> tuple[Any, str]:
        common = {
            "model": f"openai/{MODEL}",
            "api_base": server.base_url,
            "api_key": TOKEN,
            "extra_body": {"rlm": {"context": "TOKEN-lite"}},
            "num_retries": 0,
        }
        plain = await litellm.acompletion(messages=[{"role": "user", "content": "L1"}], **common)
        streamed = await litellm.acompletion(
            messages=[{"role": "user", "content": "L2"}], stream=True, **common
        )
        text = "".join([c.choices[0].delta.content or "" async for c in streamed])
        return plain, text

    plain, text = asyncio.run(both())
    assert plain.choices[0].message.content == "L1|TOKEN-lite" and plain.usage.total_tokens > 0
    assert text == "L2|TOKEN-lite"


def test_context_from_documents_and_from_earlier_messages(server: Served) -> None:
    client = server.client()
    reply = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "D"}], extra_body={"rlm": {"documents": ["a.txt"]}}
    )
    assert reply.choices[0].message.content == "D|TOKEN-fromdoc"
    reply = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "system", "content": "notes: TOKEN-earlier"}, {"role": "user", "content": "E"}],
    )
    assert reply.choices[0].message.content == "E|TOKEN-earlier"
    with pytest.raises(openai.BadRequestError, match="outside"):
        client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "D"}],
            extra_body={"rlm": {"documents": ["../server.log"]}},
        )


def test_a_config_file_model_on_the_lean_client_path(server: Served) -> None:
    client = server.client()
    common: dict[str, Any] = {"model": "rlm-lean", "extra_body": {"rlm": {"context": "x TOKEN-lean y"}}}
    reply = client.chat.completions.create(messages=[{"role": "user", "content": "N"}], **common)
    assert reply.choices[0].message.content == "N|TOKEN-lean" and reply.usage.total_tokens > 0  # type: ignore[union-attr]
    stream = client.chat.completions.create(
        messages=[{"role": "user", "content": "S"}], stream=True, **common
    )
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "S|TOKEN-lean"
    for query, status, code in (("P429", 429, "provider_rate_limited"), ("MALFORMED", 502, "provider_error")):
        with pytest.raises(openai.APIStatusError) as caught:
            client.chat.completions.create(messages=[{"role": "user", "content": query}], **common)
        assert caught.value.status_code == status and caught.value.body["code"] == code  # type: ignore[index]


def test_a_models_tools_run_in_the_server_process_and_are_listed(server: Served) -> None:
    listed = {m.id: m for m in server.client().models.list().data}
    assert listed["rlm-tools"].rlm["tools"] == ["server_pid"]  # type: ignore[attr-defined]
    reply = server.client().chat.completions.create(
        model="rlm-tools",
        messages=[{"role": "user", "content": "TOOLPID"}],
        extra_body={"rlm": {"context": "c"}},
    )
    assert reply.choices[0].message.content == str(server.process.pid)


# --- load -----------------------------------------------------------------------------------------


@load_test
def test_64_concurrent_requests_each_get_their_own_answer_and_nothing_is_left_behind(server: Served) -> None:
    pid = server.process.pid

    async def wave(tag: str) -> list[tuple[str, str]]:
        async with server.aclient(timeout=120) as client:

            async def one(i: int) -> tuple[str, str]:
                context = f"{i:03d}" * 30_000 + f" TOKEN-{tag}{i} " + "z" * 10_000
                reply = await client.chat.completions.create(
                    model=MODEL,
                    messages=[{"role": "user", "content": f"q{tag}{i}"}],
                    extra_body={"rlm": {"context": context}},
                )
                return str(reply.choices[0].message.content), f"q{tag}{i}|TOKEN-{tag}{i}"

            return list(await asyncio.gather(*(one(i) for i in range(64))))

    asyncio.run(wave("warm"))
    time.sleep(0.5)
    fds, rss = non_socket_fds(pid), rss_mb(pid)
    tmp = sorted(p.name for p in (server.root / "tmp").rglob("*"))
    pairs = asyncio.run(wave("load"))
    assert [got for got, _ in pairs] == [want for _, want in pairs]
    deadline = time.monotonic() + 10
    while server.workers() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.workers() == []
    assert non_socket_fds(pid) <= fds
    assert sorted(p.name for p in (server.root / "tmp").rglob("*")) == tmp
    # 64 contexts of 100 KB crossed; keeping any of them would show as several MB
    assert rss_mb(pid) - rss < 6, (rss, rss_mb(pid))


@load_test
def test_over_the_queue_a_request_gets_429_and_disconnected_runs_are_cancelled(server: Served) -> None:
    async def flood() -> tuple[list[Any], Any]:
        async with server.aclient(timeout=60) as client:
            tasks = [
                asyncio.ensure_future(
                    client.chat.completions.create(
                        model=MODEL,
                        messages=[{"role": "user", "content": f"SPIN{i}"}],
                        extra_body={"rlm": {"context": "c"}},
                    )
                )
                for i in range(64)
            ]
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:  # until 8 run and 56 wait
                health = httpx.get(server.base_url.removesuffix("/v1") + "/health").json()
                if health["running"] + health["queued"] >= 64:
                    break
                await asyncio.sleep(0.05)
            with pytest.raises(openai.RateLimitError) as busy:
                await client.chat.completions.create(
                    model=MODEL,
                    messages=[{"role": "user", "content": "one too many"}],
                    extra_body={"rlm": {"context": "c"}},
                )
            for task in tasks:
                task.cancel()
            return await asyncio.gather(*tasks, return_exceptions=True), busy.value

    results, busy = asyncio.run(flood())
    assert all(isinstance(r, asyncio.CancelledError) for r in results)
    assert busy.status_code == 429 and busy.response.headers["retry-after"] == "1"
    assert busy.body["code"] == "server_busy"
    deadline = time.monotonic() + 8  # the runs' steps would end by themselves only at 10 s
    while server.workers() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.workers() == [], describe(server.workers())


# --- faults ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "error", "status", "code"),
    [
        ("P429", openai.RateLimitError, 429, "provider_rate_limited"),
        ("P500", openai.APIStatusError, 502, "provider_error"),
        ("MALFORMED", openai.APIStatusError, 502, "provider_error"),
        ("SLOWPROVIDER", openai.APIStatusError, 504, "provider_timeout"),
        ("CALLS", openai.UnprocessableEntityError, 422, "budget_exceeded"),
    ],
)
def test_provider_failures_and_budgets_are_openai_errors(
    server: Served, query: str, error: type[openai.APIStatusError], status: int, code: str
) -> None:
    with pytest.raises(error) as caught:
        server.ask(query, "context")
    assert caught.value.status_code == status and caught.value.body["code"] == code  # type: ignore[index]
    assert caught.value.response.headers["x-should-retry"] == "false"
    assert "Traceback" not in caught.value.response.text


def test_run_deadline_is_a_504_and_a_request_may_only_lower_limits(server: Served) -> None:
    with pytest.raises(openai.APIStatusError) as caught:
        server.ask("SLOWPROVIDER", "context", max_seconds=0.5)
    assert caught.value.status_code == 504 and caught.value.body["code"] == "run_timeout"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError, match="at most 4 per request"):
        server.ask("Q", "TOKEN-x", max_calls=50)
    assert caught.value.body["param"] == "rlm.max_seconds"  # type: ignore[index]
    with pytest.raises(openai.UnprocessableEntityError) as spent:
        server.ask("CALLS", "context", max_calls=2)
    body = spent.value.body
    assert isinstance(body, dict) and body["param"] == "rlm.max_calls"
    assert "'rlm.max_calls' (2 model calls)" in body["message"] and "max_total" not in body["message"]


def _error(caught: pytest.ExceptionInfo[openai.APIStatusError]) -> tuple[int, dict[str, Any]]:
    body = caught.value.body
    assert isinstance(body, dict), caught.value
    return caught.value.status_code, body


def _provider_calls(server: Served, marker: str) -> int:
    assert server.provider is not None
    return sum(marker in json.dumps(r.get("messages")) for r in list(server.provider.requests))


def _ask(server: Served, query: str, model: str = MODEL, **body: Any) -> Any:
    return server.client(timeout=30).chat.completions.create(
        model=model, messages=[{"role": "user", "content": query}], **body
    )


@pytest.mark.parametrize(
    ("marker", "status", "code", "attempts"),
    [
        ("P401", 502, "provider_authentication", 1),
        ("P429", 429, "provider_rate_limited", 2),
        ("P500", 502, "provider_error", 2),
        ("MALFORMED", 502, "provider_error", 2),
        ("NOCHOICES", 502, "provider_error", 2),
        # four provider timeouts in a row (~4 s): the mapping and the retries are no Python-version matter
        pytest.param("SLOWPROVIDER", 504, "provider_timeout", 2, marks=pytest.mark.once_per_ci),
    ],
)
def test_both_client_paths_give_the_same_error_and_retry_the_same_failures(
    server: Served, marker: str, status: int, code: str, attempts: int
) -> None:
    """docs/serve.md's provider-failure table, row by row, through litellm and the lean client."""
    for model in (RETRY_LITELLM, RETRY_LEAN):
        tag = f"{marker}-{model}"
        with pytest.raises(openai.APIStatusError) as caught:
            _ask(server, tag, model=model, extra_body={"rlm": {"context": "c"}})
        got, body = _error(caught)
        assert (got, body["code"]) == (status, code), (model, body)
        assert caught.value.response.headers["x-should-retry"] == "false"
        assert _provider_calls(server, tag) == attempts, model


def test_parameters_reach_the_root_model_through_litellm_or_are_refused_never_dropped(
    server: Served,
) -> None:
    reply = _ask(
        server,
        "SUBCALL-params",
        temperature=0.25,
        seed=7,
        max_tokens=500,
        user="someone",
        tools=[],
        response_format={"type": "text"},
        extra_body={"rlm": {"context": "TOKEN"}},
    )
    assert reply.choices[0].message.content == "sub:leaf"
    assert server.provider is not None
    calls = [r for r in list(server.provider.requests) if "SUBCALL-params" in json.dumps(r["messages"])]
    subs = [
        r for r in list(server.provider.requests) if r["messages"] == [{"role": "user", "content": "sub"}]
    ]
    assert calls and all((r["temperature"], r["seed"], r["max_tokens"]) == (0.25, 7, 500) for r in calls)
    assert subs and all("temperature" not in r and "seed" not in r for r in subs)
    for extra, param, code in (
        ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools", "unsupported_parameter"),
        ({"response_format": {"type": "json_object"}}, "response_format", "unsupported_parameter"),
        ({"stop": ["\n"]}, "stop", "unsupported_parameter"),
        ({"logprobs": True}, "logprobs", "unsupported_parameter"),
        ({"frobnicate": 1}, "frobnicate", "unsupported_parameter"),
        ({"temperature": 9}, "temperature", None),
        ({"max_tokens": 0}, "max_tokens", None),
    ):
        with pytest.raises(openai.BadRequestError) as refused:
            _ask(server, "QP", extra_body={"rlm": {"context": "c"}, **extra})
        assert (_error(refused)[1]["param"], _error(refused)[1]["code"]) == (param, code)


def test_a_worker_killed_mid_step_is_reported_to_the_model_and_the_run_goes_on(server: Served) -> None:
    client = server.client(timeout=60)

    async def run() -> Any:
        async with server.aclient(timeout=60) as aclient:
            task = asyncio.ensure_future(
                aclient.chat.completions.create(
                    model=MODEL,
                    messages=[{"role": "user", "content": "SPIN-kill"}],
                    extra_body={"rlm": {"context": "c"}},
                )
            )
            deadline = time.monotonic() + 20
            while not server.workers() and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.3)
            for pid in server.workers():
                os.kill(pid, signal.SIGKILL)
            return await task

    reply = asyncio.run(run())
    assert reply.choices[0].message.content == "recovered"
    del client
    trajectory = (server.root / "runs" / f"{reply.id}.jsonl").read_text()
    steps = [json.loads(line) for line in trajectory.splitlines() if '"repl_step"' in line]
    assert steps[0]["data"]["error"] is True


def test_a_client_gone_mid_stream_cancels_its_run_and_kills_its_worker(server: Served) -> None:
    with httpx.stream(
        "POST",
        server.base_url + "/chat/completions",
        headers={"Authorization": f"Bearer {TOKEN}"},
        json={
            "model": MODEL,
            "stream": True,
            "messages": [{"role": "user", "content": "SPIN-gone"}],
            "rlm": {"context": "c"},
        },
        timeout=30,
    ) as response:
        for line in response.iter_lines():
            if "model_call_end" in line:  # the step starts next; leaving the loop hangs up (httpx)
                deadline = time.monotonic() + 20
                while not server.workers() and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert server.workers()
                break
    deadline = time.monotonic() + 4  # well before the step's 10 s timeout
    while server.workers() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.workers() == []


def test_bad_requests_get_clear_openai_shaped_errors(server: Served) -> None:
    url = server.base_url + "/chat/completions"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    cases: list[tuple[dict[str, Any], int, str]] = [
        ({"content": b"{not json"}, 400, "not valid JSON"),
        ({"json": {"model": MODEL}}, 400, "'messages'"),
        (
            {"json": {"model": MODEL, "messages": [{"role": "assistant", "content": "x"}]}},
            400,
            "last message",
        ),
        ({"json": {"model": "gpt-x", "messages": [{"role": "user", "content": "x"}]}}, 404, "does not exist"),
        (
            {"json": {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "rlm": {"bogus": 1}}},
            400,
            "bogus",
        ),
        ({"content": b"x" * (MAX_BODY + 10)}, 413, "limit"),
        (
            {
                "json": {
                    "model": MODEL,
                    "messages": [{"role": "user", "content": "x"}],
                    "rlm": {"context": "c" * (MAX_CONTEXT + 1)},
                }
            },
            400,
            "at most",
        ),
    ]
    for kwargs, status, text in cases:
        response = httpx.post(url, headers=auth, timeout=30, **kwargs)
        assert response.status_code == status, (kwargs.keys(), response.text)
        error = response.json()["error"]
        assert text in error["message"] and set(error) == {"message", "type", "param", "code"}
    assert httpx.get(server.base_url + "/nowhere", headers=auth).status_code == 404
    assert httpx.get(server.base_url + "/models").status_code == 401
    assert (
        httpx.get(server.base_url + "/models", headers={"Authorization": "Bearer wrong"}).status_code == 401
    )


def test_the_provider_key_never_leaves_the_server(server: Served) -> None:
    with pytest.raises(openai.APIStatusError) as caught:
        server.ask("ECHOKEY", "context")
    assert "[redacted]" in caught.value.response.text
    assert PROVIDER_KEY not in caught.value.response.text
    assert PROVIDER_KEY not in server.log.read_text()
    for path in (server.root / "runs").glob("*.jsonl"):
        assert PROVIDER_KEY not in path.read_text() and TOKEN not in path.read_text()
