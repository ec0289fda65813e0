"""Documents under ``--documents-root`` are read once per file version and shared by the requests
naming them while those run, then let go.

A real server on 127.0.0.1 and the openai client, but the server runs in this process (aiohttp's
runner on the test's loop, the lean client to the scripted loopback provider), so the test can count
the server's real reads (a counting wrapper around ``documents.read_version``), see which ``str``
objects its runs get, and look at its cache. Nothing waits on time: a read or a provider reply the
test must hold back waits on an event the test sets, and each wait for the server's state polls it
under a generous deadline.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import openai
import pytest

from rlm_compat.testing import Reply, ScriptedChatServer
from rlm_compat.tools.serve import ApiError, ModelRegistry, ModelSpec, ServeLimits
from rlm_compat.tools.serve import documents as documents_module
from rlm_compat.tools.serve.chat_protocol import ChatRequest
from rlm_compat.tools.serve.doc_cache import DocumentCache, Version
from rlm_compat.tools.serve.documents import (
    DocumentRefused,
    Located,
    locate_document,
    read_version,
    request_context,
)
from rlm_compat.tools.serve.pool import BlockingPool

web = pytest.importorskip("aiohttp.web")
pytestmark = pytest.mark.filterwarnings("ignore::aiohttp.web_exceptions.NotAppKeyWarning")

MODEL = "rlm:openai/gpt-4o-mini"
ANSWER_CODE = 'import re\nm = re.search(r"TOKEN-\\w+", context)\nFINAL(query + "|" + m.group(0))'
MAX_CONTEXT = 10_000
EMPTY = {"texts": 0, "contexts": 0, "holders": 0, "reading": 0, "chars": 0}


@dataclass
class Reads:
    """The server's reads of a document version, counted; held back while ``go`` is clear."""

    count: int = 0
    entered: threading.Event = field(default_factory=threading.Event)
    go: threading.Event = field(default_factory=threading.Event)

    def wrap(self, real: Callable[[Located], str | None]) -> Callable[[Located], str | None]:
        def counting(located: Located) -> str | None:
            self.count += 1
            self.entered.set()
            assert self.go.wait(60), "the test never let the read go on"
            return real(located)

        return counting


@dataclass
class Server:
    app: Any
    base_url: str
    root: Path
    reads: Reads
    hold: threading.Event
    contexts: list[str]

    @property
    def rlm_server(self) -> Any:
        return self.app["rlm_server"]

    def status(self) -> dict[str, int]:
        status: dict[str, int] = self.rlm_server.document_cache.status()
        return status

    def client(self) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(base_url=self.base_url, api_key="unused", max_retries=0)

    async def ask(self, query: str, **rlm: Any) -> str:
        reply = await self.client().chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": query}], extra_body={"rlm": rlm}
        )
        return str(reply.choices[0].message.content)

    async def refusal(self, **rlm: Any) -> dict[str, Any]:
        with pytest.raises(openai.BadRequestError) as caught:
            await self.ask("refused", **rlm)
        error: dict[str, Any] = caught.value.body  # type: ignore[assignment]
        return error  # openai hands on the body's "error" object


async def until(condition: Callable[[], bool], what: str) -> None:
    """Poll the server's state until ``condition`` holds (the deadline only guards a hang)."""
    for _ in range(6000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never: {what}")


def _script(hold: threading.Event) -> Callable[[dict[str, Any]], Reply]:
    def script(request: dict[str, Any]) -> Reply:
        messages = request.get("messages", [])
        if len(messages) < 2:
            return "leaf"
        if "HOLD" in str(messages[1].get("content", "")):
            assert hold.wait(60), "the test never let the held run go on"
        return ANSWER_CODE

    return script


@pytest.fixture
def provider_hold() -> threading.Event:
    return threading.Event()


@pytest.fixture
def provider(provider_hold: threading.Event) -> Iterator[ScriptedChatServer]:
    with ScriptedChatServer(_script(provider_hold)) as scripted:
        yield scripted
    provider_hold.set()


@pytest.fixture
async def server(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    provider: ScriptedChatServer,
    provider_hold: threading.Event,
) -> AsyncIterator[Server]:
    """The server with ``a.txt`` in its root; its reads counted, let through unless a test says."""
    from rlm_compat.tools.serve import ServerConfig, create_app

    root = tmp_path / "docs"
    root.mkdir()
    (root / "a.txt").write_text("alpha TOKEN-v1 omega\n" * 100, encoding="utf-8")
    reads = Reads()
    reads.go.set()
    monkeypatch.setattr(documents_module, "read_version", reads.wrap(documents_module.read_version))
    monkeypatch.setenv("PROVIDER_KEY", "sk-provider-secret-abcdef123456")
    template = ModelSpec.of(
        "rlm:template",
        "template",
        client="openai-compatible",
        api_key_env="PROVIDER_KEY",
        request_timeout=60,
        api_base=provider.base_url,
        max_retries=0,
    )
    limits = ServeLimits(max_context_chars=MAX_CONTEXT, max_concurrent=4, max_queue=8, max_calls=4)
    config = ServerConfig(
        ModelRegistry(template=template, roots=["openai/gpt-4o-mini"]), limits, documents_root=str(root)
    )
    app = create_app(config)
    contexts: list[str] = []
    making = app["rlm_server"]._context

    async def recorded(*args: Any) -> str:
        context: str = await making(*args)
        contexts.append(context)
        return context

    monkeypatch.setattr(app["rlm_server"], "_context", recorded)
    runner = web.AppRunner(app, handler_cancellation=True, access_log=None, shutdown_timeout=0.25)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    try:
        yield Server(app, f"http://{host}:{port}/v1", root, reads, provider_hold, contexts)
    finally:
        provider_hold.set()
        reads.go.set()
        await runner.cleanup()


# --- through the server -------------------------------------------------------------------------


async def test_requests_at_once_share_one_read_and_one_context_object(server: Server) -> None:
    server.reads.go.clear()
    asks = [asyncio.ensure_future(server.ask(q, documents=["a.txt"])) for q in ("Q1", "Q2")]
    await until(
        lambda: server.status()["holders"] == 2 and server.reads.entered.is_set(),
        "both requests wait for the one read",
    )
    assert server.status()["reading"] == 1 and server.reads.count == 1
    server.reads.go.set()
    assert await asyncio.gather(*asks) == ["Q1|TOKEN-v1", "Q2|TOKEN-v1"]
    assert server.reads.count == 1
    first, second = server.contexts
    assert first is second and first.startswith("==> a.txt <==\nalpha TOKEN-v1")
    assert server.status() == EMPTY


async def test_a_document_changed_while_held_is_read_again_never_served_stale(server: Server) -> None:
    held = asyncio.ensure_future(server.ask("HOLD-1", documents=["a.txt"]))
    await until(lambda: server.status()["contexts"] == 1, "the first request holds its context")
    path = server.root / "a.txt"
    before = path.stat()
    path.write_text("alpha TOKEN-v2 omega\n" * 100, encoding="utf-8")  # the same size, in place
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 10**9))
    assert await server.ask("Q", documents=["a.txt"]) == "Q|TOKEN-v2"
    assert server.reads.count == 2
    assert server.status()["contexts"] == 1  # the new version was let go; the old one is still held
    server.hold.set()
    assert await held == "HOLD-1|TOKEN-v1"
    assert server.status() == EMPTY
    old, new = server.contexts
    assert old is not new and "TOKEN-v2" in new and "TOKEN-v1" not in new


async def test_streams_sessions_added_text_and_hang_ups_let_go_of_what_they_held(
    server: Server,
) -> None:
    stream = await server.client().chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "S"}],
        extra_body={"rlm": {"documents": ["a.txt"]}},
        stream=True,
    )
    assert "".join([c.choices[0].delta.content or "" async for c in stream if c.choices]) == "S|TOKEN-v1"
    await until(lambda: server.status() == EMPTY, "the stream's run let go")
    assert await server.ask("T", session="new", documents=["a.txt"]) == "T|TOKEN-v1"
    assert server.status() == EMPTY
    # with text added, the texts are what is held (the joined context is the request's own)
    held = asyncio.ensure_future(server.ask("HOLD-2", documents=["a.txt"], context="and more"))
    await until(lambda: server.status()["texts"] == 1, "the request holds the document's text")
    assert server.status()["contexts"] == 0 and server.status()["holders"] == 1
    held.cancel()  # the client hangs up: its run is cancelled, what it held let go
    await until(lambda: server.rlm_server.inflight == 0, "the hung-up run ended")
    assert server.status() == EMPTY
    assert server.reads.count == 3


async def test_a_refused_document_is_refused_alike_when_another_request_holds_it(server: Server) -> None:
    over = {"documents": ["a.txt"], "context": "x" * (MAX_CONTEXT - 1000)}
    uncached = await server.refusal(**over)
    held = asyncio.ensure_future(server.ask("HOLD-3", documents=["a.txt"]))
    await until(lambda: server.status()["contexts"] == 1, "another request holds the document")
    assert await server.refusal(**over) == uncached
    assert uncached["code"] == "context_length_exceeded"
    assert uncached["param"] == "rlm.documents[0]"
    fifo = server.root / "fifo"
    os.mkfifo(fifo)
    os.rename(fifo, server.root / "a.txt")  # what the held context was read from is a FIFO now
    refused = await server.refusal(documents=["a.txt"])
    assert "not a regular file" in refused["message"]
    assert refused["param"] == "rlm.documents[0]"
    server.hold.set()
    assert await held == "HOLD-3|TOKEN-v1"
    assert server.status() == EMPTY and server.reads.count == 1


# --- the parts ----------------------------------------------------------------------------------

VERSION: Version = ("/docs/a.txt", 1, 2, 3, 4, 5)


async def _take(cache: DocumentCache, read: Callable[[], Any]) -> str | None:
    async with cache.lease() as lease:
        return await lease.text(VERSION, read)


async def test_a_failed_read_fails_every_waiter_and_is_not_kept() -> None:
    cache = DocumentCache()
    outcome: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
    calls = []

    async def read() -> str | None:
        calls.append(1)
        return await outcome

    takers = [asyncio.ensure_future(_take(cache, read)) for _ in range(2)]
    while cache.status()["holders"] < 2:
        await asyncio.sleep(0)
    outcome.set_exception(DocumentRefused("not UTF-8 text"))
    results = await asyncio.gather(*takers, return_exceptions=True)
    assert all(isinstance(r, DocumentRefused) for r in results) and len(calls) == 1
    assert cache.status() == EMPTY

    async def again() -> str | None:
        calls.append(2)
        return "text"

    assert await _take(cache, again) == "text" and calls == [1, 2]
    assert cache.status() == EMPTY


async def test_a_waiter_gone_does_not_end_the_read_for_the_others() -> None:
    cache = DocumentCache()
    outcome: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()

    async def read() -> str | None:
        return await outcome

    first, second = (asyncio.ensure_future(_take(cache, read)) for _ in range(2))
    while cache.status()["holders"] < 2:
        await asyncio.sleep(0)
    first.cancel()
    await asyncio.gather(first, return_exceptions=True)
    assert cache.status()["holders"] == 1 and cache.status()["reading"] == 1
    outcome.set_result("the text")
    assert await second == "the text"
    assert cache.status() == EMPTY


async def test_a_read_nobody_awaits_any_more_is_cancelled() -> None:
    cache = DocumentCache()
    started = asyncio.Event()

    async def read() -> str | None:
        started.set()
        await asyncio.Event().wait()
        return "never"

    alone = asyncio.ensure_future(_take(cache, read))
    await started.wait()
    (reading,) = cache._texts.values()
    alone.cancel()
    await asyncio.gather(alone, return_exceptions=True)
    assert cache.status() == EMPTY
    await asyncio.gather(reading.read, return_exceptions=True)
    assert reading.read.cancelled()


async def test_a_read_that_finds_the_file_changed_is_not_kept() -> None:
    cache = DocumentCache()

    async def changed() -> str | None:
        return None

    async with cache.lease() as lease:
        assert await lease.text(VERSION, changed) is None
        assert cache.status() == EMPTY


def test_a_file_changed_after_its_stat_is_not_read_as_that_version(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_text("one", encoding="utf-8")
    located = locate_document(tmp_path, "a.txt")
    assert read_version(located) == "one"
    info = path.stat()
    path.write_text("two", encoding="utf-8")
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns + 10**9))
    assert read_version(located) is None
    path.write_text("three", encoding="utf-8")
    assert read_version(locate_document(tmp_path, "a.txt")) == "three"


async def test_a_held_context_is_still_checked_against_each_requests_limit(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("y" * 500, encoding="utf-8")
    chat = ChatRequest("m", "q", None, ("a.txt", "a.txt"), "", False, False)
    pool = BlockingPool("documents", threads=2, backlog=8, timeout=30)
    roomy, tight = ServeLimits(max_context_chars=2000), ServeLimits(max_context_chars=800)
    cache = DocumentCache()
    async with cache.lease() as fresh:
        with pytest.raises(ApiError) as uncached:
            await request_context(chat, tmp_path, tight, pool.run, fresh)
    async with cache.lease() as one, cache.lease() as two:
        first = await request_context(chat, tmp_path, roomy, pool.run, one)
        assert await request_context(chat, tmp_path, roomy, pool.run, two) is first
        assert first == "==> a.txt <==\n" + "y" * 500 + "\n\n==> a.txt <==\n" + "y" * 500
        assert cache.status()["texts"] == 0 and cache.status()["contexts"] == 1
        with pytest.raises(ApiError) as held:
            await request_context(chat, tmp_path, tight, pool.run, two)
    assert held.value.body() == uncached.value.body()
    assert held.value.body()["error"]["param"] == "rlm.documents[1]"
    assert cache.status() == EMPTY
