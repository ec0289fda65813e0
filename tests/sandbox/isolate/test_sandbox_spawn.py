"""Worker processes: both start methods give the same isolated, killable, leak-free worker."""

from __future__ import annotations

import gc
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from locations import ROOT

from rlm_compat.config import Limits
from rlm_compat.environments import (
    CommandResult,
    EnvironmentAccessError,
    ExecutionEnvironment,
    LocalExecutionEnvironment,
)
from rlm_compat.sandbox.isolate import spawn
from rlm_compat.sandbox.isolate.zygote import ZygoteClient

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inspects /proc")

ENTRY = "rlm_compat.sandbox.isolate.spawn:echo_serve"
ROOT = ROOT


def _ask(handle: spawn.WorkerHandle, **request: Any) -> Any:
    spawn.send_message(handle.sock, request)
    return spawn.recv_message(handle.sock)


def _running(pid: int) -> bool:
    """A live (not zombie) process with this pid that is one of ours (not a reused pid)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, IndexError):
        return False
    return state != "Z" and b"rlm_compat.sandbox" in cmdline


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def _eventually(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


@pytest.fixture(params=["forkserver", "spawn"])
def method(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def start() -> Iterator[Callable[..., spawn.WorkerHandle]]:
    handles: list[spawn.WorkerHandle] = []

    def start_(method: str, limits: Limits | None = None, entry: str = ENTRY) -> spawn.WorkerHandle:
        handle = spawn.start_worker(limits or Limits(), method, entry)
        handles.append(handle)
        return handle

    yield start_
    for handle in handles:
        handle.close()


@pytest.fixture(scope="module", autouse=True)
def _shutdown_after_module() -> Iterator[None]:
    yield
    spawn.shutdown()


def test_ping_identity_and_descriptors(
    method: str, start: Callable[..., spawn.WorkerHandle], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "litellm", types.ModuleType("litellm"))  # a heavy __main__
    handle = start(method)
    assert _ask(handle, op="ping", n=7) == {"pong": 7}
    info = _ask(handle, op="info")
    assert info["pid"] == handle.pid != os.getpid()
    assert info["sid"] == info["pgid"] == handle.pid  # its own session
    assert info["stdio"] == ["/dev/null"] * 3
    assert info["fds"][:4] == [0, 1, 2, 3] and len(info["fds"]) <= 5  # + the listing's own fd
    assert "litellm" not in info["modules"] and "__main__" in info["modules"]
    assert info["dont_write_bytecode"] is True  # a file-size limit would truncate a .pyc it wrote
    assert handle.alive()


def test_cwd_is_empty_private_and_removed(method: str, start: Callable[..., spawn.WorkerHandle]) -> None:
    handle = start(method)
    info = _ask(handle, op="info")
    assert info["cwd_entries"] == [] and info["cwd_mode"] == 0o700
    assert info["cwd"] != os.getcwd() and os.path.isdir(info["cwd"])
    assert Path(info["cwd"]).resolve().is_relative_to(Path(tempfile.gettempdir()).resolve())
    other = start(method)
    assert _ask(other, op="info")["cwd"] != info["cwd"]
    handle.kill()
    assert not os.path.exists(info["cwd"])


def test_environment_is_filtered_per_start(
    method: str, start: Callable[..., spawn.WorkerHandle], monkeypatch: pytest.MonkeyPatch
) -> None:
    start(method)  # a fork server started earlier must not freeze an old environment
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-secret")
    monkeypatch.setenv("TZ", "UTC0-spawn-test")
    env = _ask(start(method), op="info")["env"]
    assert "OPENAI_API_KEY" not in env and "GITHUB_TOKEN" not in env
    assert "sk-test-secret" not in repr(env)
    assert env["TZ"] == "UTC0-spawn-test"
    assert env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"


def test_static_rlimits_and_failing_writes(method: str, start: Callable[..., spawn.WorkerHandle]) -> None:
    handle = start(method, Limits(open_files=32, file_size_bytes=1000))
    info = _ask(handle, op="info")
    assert info["rlimits"]["RLIMIT_NOFILE"] == [32, 32]
    assert info["rlimits"]["RLIMIT_FSIZE"] == [1000, 1000]
    assert info["rlimits"]["RLIMIT_CORE"] == [0, 0]
    assert _ask(handle, op="write", size=10) == {"result": "ok"}
    assert _ask(handle, op="write", size=5000) == {"result": "OSError: errno 27"}  # EFBIG, not SIGXFSZ
    assert _ask(handle, op="print") == {"printed": True}  # stray output goes nowhere
    assert _ask(handle, op="ping", n=1) == {"pong": 1}


def test_per_step_caps(start: Callable[..., spawn.WorkerHandle]) -> None:
    handle = start("forkserver")
    info = _ask(handle, op="cap", address_space=64 << 20, cpu=5)
    soft_as, hard_as = info["rlimits"]["RLIMIT_AS"]
    assert info["vsize"] < soft_as <= info["vsize"] + (64 << 20) + (16 << 20)
    assert _ask(handle, op="alloc", size=1 << 30) == {"result": "MemoryError"}
    assert _ask(handle, op="alloc", size=1 << 20) == {"result": 1 << 20}
    soft_cpu, _ = info["rlimits"]["RLIMIT_CPU"]
    assert 5 <= soft_cpu <= 60
    info = _ask(handle, op="cap", address_space=None, cpu=None)
    assert info["rlimits"]["RLIMIT_AS"] == [hard_as, hard_as]
    assert info["rlimits"]["RLIMIT_CPU"][0] == info["rlimits"]["RLIMIT_CPU"][1]


def test_kill_is_idempotent_and_reaps(method: str, start: Callable[..., spawn.WorkerHandle]) -> None:
    handle = start(method)
    assert _ask(handle, op="ping", n=1) == {"pong": 1}
    handle.kill()
    handle.kill()
    assert not handle.alive()
    assert not _running(handle.pid) and not _zombie(handle.pid)
    assert handle.sock.recv(1) == b""  # the worker's end is gone
    handle.close()
    handle.close()


def test_worker_exits_by_itself_when_its_channel_closes(
    method: str, start: Callable[..., spawn.WorkerHandle]
) -> None:
    handle = start(method)
    assert _ask(handle, op="ping", n=1) == {"pong": 1}
    handle.sock.close()
    assert _eventually(lambda: not handle.alive())
    assert _eventually(lambda: not _zombie(handle.pid))  # the fork server reaps it on its own


def test_a_failing_entry_only_closes_the_channel(
    method: str, start: Callable[..., spawn.WorkerHandle]
) -> None:
    handle = start(method, entry="rlm_compat.no_such_module:serve")
    handle.sock.settimeout(30)
    assert handle.sock.recv(1) == b""


def test_a_dropped_handle_is_killed_at_the_next_start(method: str) -> None:
    handle = spawn.start_worker(Limits(), method, ENTRY)
    pid = handle.pid
    # start_worker returns once the process exists: a spawned one may not have exec'd Python yet.
    assert _eventually(lambda: _running(pid))
    fd = handle.sock.detach()  # keep the channel open: the worker would not leave by itself
    del handle
    gc.collect()
    spawn.start_worker(Limits(), method, ENTRY).close()
    # the reaper thread kills and reaps it soon after the drop (not inside the next start)
    assert _eventually(lambda: not _running(pid) and not _zombie(pid))
    os.close(fd)


def test_many_threads_start_workers_at_once(method: str) -> None:
    handles: list[spawn.WorkerHandle] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    per_thread = 1 if method == "spawn" else 4  # a spawned worker is a fresh interpreter (~0.15 s)

    def run() -> None:
        try:
            for _ in range(per_thread):
                handle = spawn.start_worker(Limits(), method, ENTRY)
                with lock:
                    handles.append(handle)
                assert _ask(handle, op="ping", n=handle.pid) == {"pong": handle.pid}
        except BaseException as exc:
            with lock:
                errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert errors == []
        assert len({h.pid for h in handles}) == 16 * per_thread
        # the starting threads are gone: their workers must live on (parent-death signal)
        assert all(h.alive() for h in handles)
    finally:
        for handle in handles:
            handle.close()
    assert not any(_running(h.pid) for h in handles)


def test_fork_server_dies_when_its_control_socket_closes(tmp_path: Path) -> None:
    client = ZygoteClient(LocalExecutionEnvironment(tmp_path), spawn.DEFAULT_PRELOAD)
    parent_end, child_end = socket.socketpair()
    workdir = tmp_path / "w"
    workdir.mkdir(mode=0o700)
    worker = client.fork(child_end.fileno(), limits=Limits(), cwd=str(workdir), env={}, entry=ENTRY)
    child_end.close()
    assert client.pid is not None and _running(client.pid) and _running(worker)
    client._sock.close()  # what the kernel does when the parent dies
    process = client.process
    assert process is not None
    process.wait(timeout=10)
    assert _eventually(lambda: not _running(worker))
    parent_end.close()
    client.close()


def test_fork_server_and_workers_die_with_a_killed_parent(tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {str(ROOT)!r})
        from rlm_compat.config import Limits
        from rlm_compat.sandbox.isolate import spawn
        forked = spawn.start_worker(Limits(), "forkserver", {ENTRY!r})
        spawned = spawn.start_worker(Limits(), "spawn", {ENTRY!r})
        for h in (forked, spawned):
            spawn.send_message(h.sock, {{"op": "ping", "n": 1}})
            spawn.recv_message(h.sock)
        print(spawn._state.zygote.pid, forked.pid, spawned.pid, spawn._state.root, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    zygote, forked, spawned, root = result.stdout.split()
    for pid in (int(zygote), int(forked), int(spawned)):
        assert _eventually(lambda pid=pid: not _running(pid)), pid  # type: ignore[misc]
    # a SIGKILLed parent cannot clean up its temporary directory: remove it here
    subprocess.run(["rm", "-rf", root], check=True)


def _fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_shutdown_leaves_no_processes_files_or_descriptors(method: str) -> None:
    spawn.start_worker(Limits(), method, ENTRY).close()  # the fork server is up now
    before = _fd_count()
    cycles = 50 if method == "forkserver" else 5
    for _ in range(cycles):
        handle = spawn.start_worker(Limits(), method, ENTRY)
        handle.close()
    assert _fd_count() <= before
    kept = [spawn.start_worker(Limits(), method, ENTRY) for _ in range(3)]
    for handle in kept:
        assert _ask(handle, op="ping", n=1) == {"pong": 1}
    zygote = spawn._state.zygote
    zygote_pid = zygote.pid if zygote is not None and method == "forkserver" else None
    root = spawn._state.root
    assert root is not None and os.path.isdir(root)
    spawn.shutdown()
    spawn.shutdown()
    for handle in kept:
        assert not handle.alive()
        assert not _running(handle.pid) and not _zombie(handle.pid)
    if zygote_pid is not None:
        assert not _running(zygote_pid) and not _zombie(zygote_pid)
    # only this root: a thread an earlier test in this process left running may start a worker
    # (and so a new root) after the shutdown, which is legitimate
    assert not os.path.lexists(root)
    assert _fd_count() <= before


def test_start_method_is_checked() -> None:
    from rlm_compat.errors import ConfigurationError

    with pytest.raises(ConfigurationError):
        spawn.start_worker(Limits(), "fork")
    with pytest.raises(ConfigurationError):
        spawn.prewarm("threads")


def test_prewarm_returns_at_once_and_is_idempotent() -> None:
    spawn.shutdown()
    spawn.prewarm()
    spawn.prewarm()
    zygote = spawn._state.zygote
    handle = spawn.start_worker(Limits(), "forkserver", ENTRY)
    assert spawn._state.zygote is zygote
    assert _ask(handle, op="ping", n=2) == {"pong": 2}
    handle.close()


class _Minimal(ExecutionEnvironment):
    def run_command(self, command: str, timeout: float | None = None) -> CommandResult:
        raise NotImplementedError

    def read_file(self, path: str) -> str:
        raise NotImplementedError

    def write_file(self, path: str, content: str) -> None:
        raise NotImplementedError

    def list_directory(self, path: str) -> list[str]:
        raise NotImplementedError

    def file_exists(self, path: str) -> bool:
        raise NotImplementedError


def test_environments_without_process_support_say_so() -> None:
    with pytest.raises(EnvironmentAccessError, match="cannot start processes"):
        _Minimal().start_process(["true"])


def test_local_start_process_filters_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    local = LocalExecutionEnvironment(tmp_path)
    (tmp_path / "sub").mkdir()
    process = local.start_process(["/bin/sh", "-c", "env > env.txt; pwd > pwd.txt"], cwd="sub")
    assert process.wait(timeout=30) == 0
    assert "OPENAI_API_KEY" not in (tmp_path / "sub" / "env.txt").read_text()
    assert (tmp_path / "sub" / "pwd.txt").read_text().strip() == str(tmp_path.resolve() / "sub")
    with pytest.raises(EnvironmentAccessError):
        local.start_process(["true"], cwd="../elsewhere")


def test_a_fresh_process_leaves_no_temporary_directory(tmp_path: Path) -> None:
    """In a process of its own (no other test's threads): after shutdown(), and after a plain exit
    (atexit), no directory of that process is left in the temporary directory."""
    script = textwrap.dedent(f"""
        import glob, os, sys, tempfile
        sys.path.insert(0, {str(ROOT)!r})
        from rlm_compat.config import Limits
        from rlm_compat.sandbox.isolate import spawn
        mine = os.path.join(tempfile.gettempdir(), f"rlm-compat-{{os.getpid()}}-*")
        for method in ("forkserver", "spawn"):
            handle = spawn.start_worker(Limits(), method, {ENTRY!r})
            spawn.send_message(handle.sock, {{"op": "ping", "n": 1}})
            spawn.recv_message(handle.sock)
        assert glob.glob(mine), "a root while workers run"
        spawn.shutdown()
        assert glob.glob(mine) == [], glob.glob(mine)
        spawn.start_worker(Limits(), "forkserver", {ENTRY!r})
        print(os.getpid(), flush=True)
    """)
    env = dict(os.environ, TMPDIR=str(tmp_path))
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env
    )
    assert result.returncode == 0, result.stderr
    pid = result.stdout.split()[0]
    assert list(tmp_path.glob(f"rlm-compat-{pid}-*")) == []
