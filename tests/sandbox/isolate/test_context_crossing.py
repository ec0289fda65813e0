"""A big context crosses into the worker once per session, as a sealed memory file, and arrives
as the ordinary ``str`` (or ``bytes``) the model expects; nothing of the file outlives the step.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from process_probe import open_fds

from rlm_compat.config import Limits, ReplConfig
from rlm_compat.errors import REPLError
from rlm_compat.repl import REPLExecutor
from rlm_compat.sandbox.isolate import mapped
from rlm_compat.sandbox.isolate.channel import Channel

pytestmark = pytest.mark.skipif(not mapped.available(), reason="descriptors cannot travel over sockets here")

# non-ASCII, astral and a lone surrogate: every kind of str the encoding must carry
TEXT = ("héllo wörld 😀 \ud800 line\n" * (mapped.MAPPED_MIN // 20))[: mapped.MAPPED_MIN + 7]
DATA = bytes(range(256)) * (mapped.MAPPED_MIN // 256 + 1)


@pytest.fixture
def writes(mapped_writes: list[int]) -> list[int]:
    """The sizes of the values the parent put in memory files (the real write still runs)."""
    return mapped_writes


@pytest.fixture(params=["forkserver", "spawn"])
def executor(request: pytest.FixtureRequest) -> Iterator[REPLExecutor]:
    config = ReplConfig(isolation="process", timeout=30, start_method=request.param)
    with REPLExecutor(config=config) as ex:
        yield ex


def _worker_files(ex: REPLExecutor) -> tuple[list[str], list[str]]:
    """The worker's open descriptors and its mappings of value files."""
    pid = ex._runner.worker_pid  # type: ignore[attr-defined]
    fds = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
    with open(f"/proc/{pid}/maps") as f:
        maps = [line for line in f if "rlm-compat-value" in line]
    return fds, maps


def test_big_str_arrives_as_the_same_ordinary_str(executor: REPLExecutor, writes: list[int]) -> None:
    env: dict[str, Any] = {"context": TEXT}
    out = executor.execute("n = len(context)\nt = str(type(context))\nback = context + ''", env)
    assert out == "Code executed successfully (no output)"
    assert writes == [len(TEXT)]
    assert env["n"] == len(TEXT) and env["t"] == "<class 'str'>"
    assert env["back"] == TEXT  # came back in-band: every character survived both ways


def test_big_bytes_arrive_as_bytes(executor: REPLExecutor, writes: list[int]) -> None:
    env: dict[str, Any] = {"blob": DATA}
    executor.execute("t = str(type(blob))\nm = len(blob)\nk = blob[250:260]\nsame = blob == blob[:]", env)
    assert writes == [len(DATA)]
    assert (env["t"], env["m"], env["k"], env["same"]) == ("<class 'bytes'>", len(DATA), DATA[250:260], True)


def test_sent_once_per_session_and_again_after_a_kill(writes: list[int]) -> None:
    with REPLExecutor(isolation="process", timeout=30) as ex:
        env: dict[str, Any] = {"context": TEXT}
        for _ in range(3):
            ex.execute("n = len(context)", env)
        assert writes == [len(TEXT)]
        os.kill(ex._runner.worker_pid, signal.SIGKILL)  # type: ignore[attr-defined]
        deadline = time.monotonic() + 20
        while ex._runner._channel is not None and not ex._runner._channel.closed_by_peer():  # type: ignore[attr-defined]
            assert time.monotonic() < deadline
            time.sleep(0.01)
        out = ex.execute("m = len(context)", env)
        assert "had stopped" in out and env["m"] == len(TEXT)
        assert writes == [len(TEXT), len(TEXT)]


def test_nothing_of_the_file_outlives_the_step(executor: REPLExecutor) -> None:
    env: dict[str, Any] = {"context": TEXT}
    executor.execute("x = 1", {"warm": 1})
    before = open_fds()
    executor.execute("n = len(context)", env)
    assert open_fds() == before
    fds, maps = _worker_files(executor)
    assert maps == [] and not any("rlm-compat-value" in fd for fd in fds), (fds, maps)


def test_the_worker_cannot_change_the_file() -> None:
    fd, kind, size = mapped.write(TEXT)
    try:
        with pytest.raises(OSError):
            os.pwrite(fd, b"changed", 0)
        assert (kind, size) == ("str", len(TEXT.encode("utf-8", "surrogatepass")))
    finally:
        os.close(fd)


def test_more_values_than_one_message_maps_are_pickled(
    monkeypatch: pytest.MonkeyPatch, writes: list[int]
) -> None:
    monkeypatch.setattr(mapped, "MAX_MAPPED", 2)
    values = {f"v{i}": TEXT[i:] for i in range(4)}
    with REPLExecutor(isolation="process", timeout=30) as ex:
        env: dict[str, Any] = dict(values)
        ex.execute("sizes = [len(v0), len(v1), len(v2), len(v3)]\nok = v3 == v0[3:]", env)
    assert len(writes) == 2
    assert env["sizes"] == [len(v) for v in values.values()] and env["ok"] is True


def test_a_context_loads_whatever_the_step_allowance(writes: list[int]) -> None:
    """The host's data is not model code's allocation: a context bigger than ``memory_mb`` sent
    after the limit was first set still loads, and the allowance (``memory_mb`` plus
    ``CONTEXT_ROOM`` bytes per byte of context: 400 MB here) holds afterwards."""
    context = "y" * (48 << 20)
    with REPLExecutor(isolation="process", timeout=30, limits=Limits(memory_mb=16)) as ex:
        env: dict[str, Any] = {}
        ex.execute("x = 1", env)
        env["context"] = context
        assert ex.execute("n = len(context)", env) == "Code executed successfully (no output)"
        assert env["n"] == len(context) and writes == [len(context)]
        with pytest.raises(REPLError, match="MemoryError"):
            ex.execute("big = bytearray(1 << 30)", env)
        assert ex.execute("print(len(context))", env) == str(len(context))


def test_descriptors_never_reach_the_untrusting_side() -> None:
    """The parent's end of the channel takes no descriptor a worker might send with a message."""
    worker_end, parent_end = socket.socketpair()
    fd, _, _ = mapped.write(TEXT)
    try:
        Channel(worker_end, peer="parent").send({"op": "done"}, [fd])
        os.close(fd)
        fd = -1
        before = open_fds()
        message = Channel(parent_end, peer="worker").recv(time.monotonic() + 10)
        assert message == {"op": "done"} and open_fds() == before
    finally:
        if fd >= 0:
            os.close(fd)
        worker_end.close()
        parent_end.close()


def test_descriptors_come_with_their_message() -> None:
    parent_end, worker_end = socket.socketpair()
    fds = [mapped.write(TEXT)[0], mapped.write(DATA)[0]]
    try:
        Channel(parent_end, peer="worker").send({"op": "step", "n": 1}, fds)
        Channel(parent_end, peer="worker").send({"op": "step", "n": 2})
        receiver = Channel(worker_end, peer="parent", max_fds=4)
        first, second = receiver.recv(), receiver.recv()
        assert first["n"] == 1 and len(first["fds"]) == 2 and "fds" not in second
        assert mapped.read(first["fds"][0], "str", len(TEXT.encode("utf-8", "surrogatepass"))) == TEXT
        assert mapped.read(first["fds"][1], "bytes", len(DATA)) == DATA
    finally:
        mapped.close_all(fds)
        parent_end.close()
        worker_end.close()


def test_the_allowance_does_not_grow_with_every_resend() -> None:
    """What the host sent counts at its current size: a context replaced five times still leaves
    model code ``memory_mb`` plus ``CONTEXT_ROOM`` times one context (400 MB), not five
    contexts' worth more (2 GB)."""
    with REPLExecutor(isolation="process", timeout=30, limits=Limits(memory_mb=16)) as ex:
        env: dict[str, Any] = {}
        for i in range(5):
            env["context"] = str(i) * (48 << 20)  # a new value each time: sent again
            ex.execute("n = len(context)", env)
        with pytest.raises(REPLError, match="MemoryError"):
            ex.execute("big = bytearray(700 << 20)", env)
        assert ex.execute("print(n)", env) == str(48 << 20)


def test_the_context_bound_to_another_name_comes_back_by_name() -> None:
    """``text = context`` does not send the context back: the parent binds its own object, so a
    context bigger than what a step may send back (``reply_bytes``) keeps working."""
    with REPLExecutor(isolation="process", timeout=30, limits=Limits(reply_bytes=1 << 20)) as ex:
        env: dict[str, Any] = {"context": TEXT}
        out = ex.execute("text = context\nhead = context[:5]", env)
        assert out == "Code executed successfully (no output)"
        assert env["text"] is env["context"] and env["head"] == TEXT[:5]
        assert ex.execute("context = 'short'\nprint(len(text), context)", env) == f"{len(TEXT)} short"
        assert env["context"] == "short" and env["text"] is not env["context"]
        assert ex.execute("again = text", env) == "Code executed successfully (no output)"
        assert env["again"] == TEXT


def test_the_context_changed_in_the_step_is_sent_back_not_aliased() -> None:
    with REPLExecutor(isolation="process", timeout=30) as ex:
        env: dict[str, Any] = {"context": TEXT}
        ex.execute("old = context\ncontext = context.upper()", env)
        assert env["old"] == TEXT and env["context"] == TEXT.upper()


ASCII = ("an ascii line, id=42\n" * (mapped.MAPPED_MIN // 20))[: mapped.MAPPED_MIN + 3]


def test_an_ascii_context_is_read_into_an_ordinary_str(executor: REPLExecutor, writes: list[int]) -> None:
    """The ASCII path fills a new ``str`` in place (no decoding); what the model gets behaves as
    any other ``str``: equal, hashable, ASCII, sliceable, and not the same object twice."""
    env: dict[str, Any] = {"context": ASCII}
    code = (
        "same = context == 'an ascii line, id=42\\n' * (len(context) // 21) + context[-(len(context) % 21):]\n"
        "keyed = {context: 1}[context[:] + '']\n"
        "flags = (context.isascii(), context.isprintable(), context[-3:], context.count('id=42'))\n"
    )
    assert executor.execute(code, env) == "Code executed successfully (no output)"
    assert writes == [len(ASCII)]
    assert env["same"] is True and env["keyed"] == 1
    assert env["flags"] == (True, False, ASCII[-3:], ASCII.count("id=42"))


def test_the_kind_says_ascii_and_both_fast_reads_round_trip() -> None:
    fd, kind, size = mapped.write(ASCII)
    assert (kind, size) == ("ascii", len(ASCII))
    value = mapped.read(fd, kind, size)
    assert type(value) is str and value == ASCII and hash(value) == hash(ASCII)
    fd, kind, size = mapped.write(DATA)
    value = mapped.read(fd, kind, size)
    assert (kind, type(value), value) == ("bytes", bytes, DATA)


@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="no memfd here")
def test_an_unsealed_file_is_decoded_and_checked() -> None:
    """Only a sealed file (no one can write to it) skips the ASCII check: another is decoded."""
    fd = os.memfd_create("test-unsealed")
    os.write(fd, b"abc\xe9" * 1000)
    with pytest.raises(UnicodeDecodeError):
        mapped.read(fd, "ascii", 4000)


def test_a_big_file_is_closed_beside_the_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reader's close is the last one (the parent closed its descriptor once it sent the
    message), so it frees the pages: for a big file it runs in the background, a small one is
    closed at once."""
    fd, kind, size = mapped.write(ASCII)
    inode = os.fstat(fd).st_ino
    assert mapped.read(fd, kind, size) == ASCII
    assert not _holds(fd, inode)
    monkeypatch.setattr(mapped, "BACKGROUND_CLOSE_MIN", 1)
    fd, kind, size = mapped.write(DATA)
    inode = os.fstat(fd).st_ino
    assert mapped.read(fd, kind, size) == DATA
    _until(lambda: not _holds(fd, inode))


def test_the_worker_lets_go_of_a_big_context_file() -> None:
    context = "x" * mapped.BACKGROUND_CLOSE_MIN
    with REPLExecutor(isolation="process", timeout=30) as ex:
        env: dict[str, Any] = {"context": context}
        assert ex.execute("print(len(context))", env) == str(len(context))

        def gone() -> bool:
            fds, maps = _worker_files(ex)
            return maps == [] and not any("rlm-compat-value" in fd for fd in fds)

        _until(gone)


def _until(done: Any) -> None:
    """Wait for something a background thread does (a bound on waiting, not on speed)."""
    deadline = time.monotonic() + 30
    while not done():
        assert time.monotonic() < deadline
        time.sleep(0.01)


def _holds(fd: int, inode: int) -> bool:
    """Whether ``fd`` is still that file (a closed number may be reused by another file)."""
    try:
        return os.fstat(fd).st_ino == inode
    except OSError:
        return False
