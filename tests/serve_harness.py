"""Starting ``rlm-compat serve`` as a real process for the tests, and looking at what it left.

Shared by tests/tools/serve/*: the server is a child process (``python -m rlm_compat serve``) on a
free port of 127.0.0.1, talking through litellm (or the lean client) to a scripted loopback provider
(rlm_compat.testing.ScriptedChatServer) that the test starts.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import openai

from rlm_compat.testing import ScriptedChatServer

MODEL = "rlm:openai/gpt-4o-mini"
TOKEN = "serve-test-bearer-token-0123"
PROVIDER_KEY = "sk-provider-secret-abcdef123456"


def descendants(pid: int) -> list[int]:
    """Every process under ``pid`` (from /proc's parent links)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":  # a killed worker not reaped yet is gone all the same
                children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def describe(pids: list[int]) -> list[str]:
    out = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")[:120]
        except OSError:
            continue
        out.append(f"{pid} {stat.rsplit(')', 1)[1].split()[:2]} {cmd}")
    return out


def non_socket_fds(pid: int) -> int:
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if not os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"):
                count += 1
        except OSError:
            pass
    return count


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


class Served:
    def __init__(self, process: subprocess.Popen[str], base_url: str, root: Path, log: Path) -> None:
        self.process, self.base_url, self.root, self.log = process, base_url, root, log
        self.provider: ScriptedChatServer | None = None

    def client(self, **kwargs: Any) -> openai.OpenAI:
        return openai.OpenAI(base_url=self.base_url, api_key=TOKEN, max_retries=0, **kwargs)

    def aclient(self, **kwargs: Any) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(base_url=self.base_url, api_key=TOKEN, max_retries=0, **kwargs)

    def workers(self) -> list[int]:
        """The REPL workers under the server (not its fork server, nor a context template)."""
        return [p for p in descendants(self.process.pid) if process_name(p) == "rlm-worker"]

    def forkservers(self) -> list[int]:
        return [p for p in descendants(self.process.pid) if parent(p) == self.process.pid]

    def ask(self, query: str, context: str, **extension: Any) -> str:
        reply = self.client().chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": query}],
            extra_body={"rlm": {"context": context, **extension}},
        )
        return str(reply.choices[0].message.content)


def process_name(pid: int) -> str:
    """``/proc/PID/comm`` ('' once the process is gone)."""
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except OSError:
        return -1


def wait_listening(process: subprocess.Popen[str], log: Path) -> str:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = re.search(r"listening on (http://\S+)", log.read_text())
        if found:
            return found.group(1)
        if process.poll() is not None:
            raise AssertionError(f"server exited {process.returncode}: {log.read_text()[-2000:]}")
        time.sleep(0.05)
    raise AssertionError(f"server did not start: {log.read_text()[-2000:]}")


@contextmanager
def serving(
    root: Path, provider: ScriptedChatServer, *flags: str, stop_timeout: float = 10
) -> Iterator[Served]:
    """A server process for ``provider`` with the tests' common flags plus ``flags``; SIGTERM after."""
    (root / "tmp").mkdir(exist_ok=True)
    log = root / "server.log"
    env = dict(
        os.environ,
        SERVE_TOKEN=TOKEN,
        PROVIDER_KEY=PROVIDER_KEY,
        TMPDIR=str(root / "tmp"),
        LITELLM_LOCAL_MODEL_COST_MAP="True",
    )
    argv = [sys.executable, "-m", "rlm_compat", "serve", "--port", "0", "--model", "openai/gpt-4o-mini"]
    argv += ["--api-base", provider.base_url, "--provider-key-env", "PROVIDER_KEY"]
    argv += ["--api-key-env", "SERVE_TOKEN", "--max-retries", "0", "--provider-timeout", "1", *flags]
    with open(log, "w") as log_file:
        process = subprocess.Popen(argv, stderr=log_file, text=True, env=env)
    try:
        base_url = wait_listening(process, log)
        yield Served(process, base_url, root, log)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=stop_timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
