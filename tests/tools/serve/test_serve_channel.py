"""`rlm-compat serve` keeps serving while escaped workers attack it through their channels.

A server process of its own, started with the host's test-only worker entry
(``RLM_COMPAT_TEST_WORKER_ENTRY=escaped``: a step marked as escaped runs as plain Python holding
the worker's channel, see rlm_compat/tools/escape_channel.py), talking through litellm to the
scripted loopback provider. The provider answers a query naming an attack with that attack's
code, then with a plain ``FINAL``: each attacked run fails its step and still answers; the server
answers ordinary requests during and after, and its process is the same one throughout.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import openai
import pytest

from rlm_compat.testing import Reply, ScriptedChatServer
from rlm_compat.tools.escape_channel import CORPUS

pytest.importorskip("aiohttp")
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux worker processes")

TOKEN = "serve-channel-token-0123"
ATTACKS = {attack.name: attack for attack in CORPUS}
USED = ("deep-frame", "item-flood", "final-over-cap", "second-reply", "host-call-flood")


def _script(request: dict[str, Any]) -> Reply:
    messages = request.get("messages", [])
    query = str(messages[1].get("content", "")) if len(messages) > 1 else ""
    named = re.search(r"ATTACK:(\S+)", query)
    if named and len(messages) <= 2:  # FINAL's text over the server's answer_chars (1,000,000)
        code = ATTACKS[named.group(1)].code.replace('"x" * 50000', '"x" * 1_500_000')
        return f"```python\n{code}```"
    return 'FINAL("survived " + str(len(context)))'


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("serve-channel")
    log = root / "server.log"
    with ScriptedChatServer(_script) as provider:
        env = dict(
            os.environ,
            SERVE_TOKEN=TOKEN,
            PROVIDER_KEY="sk-provider-channel",
            LITELLM_LOCAL_MODEL_COST_MAP="True",
            RLM_COMPAT_TEST_WORKER_ENTRY="escaped",
        )
        argv = [sys.executable, "-m", "rlm_compat", "serve", "--port", "0", "--model", "openai/gpt-4o-mini"]
        argv += ["--api-base", provider.base_url, "--provider-key-env", "PROVIDER_KEY"]
        argv += ["--api-key-env", "SERVE_TOKEN", "--max-retries", "0", "--repl-timeout", "2"]
        with open(log, "w") as log_file:
            process = subprocess.Popen(argv, stderr=log_file, text=True, env=env)
        try:
            yield _wait_listening(process, log)
            assert process.poll() is None, log.read_text()[-2000:]
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_listening(process: subprocess.Popen[str], log: Path) -> str:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = re.search(r"listening on (http://\S+)", log.read_text())
        if found:
            return found.group(1)
        if process.poll() is not None:
            raise AssertionError(f"server exited {process.returncode}: {log.read_text()[-2000:]}")
        time.sleep(0.05)
    raise AssertionError(f"server did not start: {log.read_text()[-2000:]}")


def _ask(base_url: str, query: str, context: str) -> str:
    client = openai.OpenAI(base_url=base_url, api_key=TOKEN, max_retries=0, timeout=60)
    reply = client.chat.completions.create(
        model="rlm:openai/gpt-4o-mini",
        messages=[{"role": "user", "content": query}],
        extra_body={"rlm": {"context": context}},
    )
    return str(reply.choices[0].message.content)


# once_per_ci: a server process and ten runs (~10 s); the channel's guards are the same code on
# every Python, and tests/tools/test_escape_channel.py runs every attack on each of them.
@pytest.mark.once_per_ci
def test_attacked_runs_answer_and_the_server_keeps_serving(base_url: str) -> None:
    """Five attacks at once beside ordinary requests: every run answers (the attacked ones after
    their failed step), and an ordinary request afterwards still does."""
    jobs = [(f"q ATTACK:{name}", "abc") for name in USED] + [("plain", "x" * n) for n in range(1, 6)]
    with ThreadPoolExecutor(len(jobs)) as pool:
        answers = list(pool.map(lambda job: _ask(base_url, *job), jobs))
    assert answers == ["survived 3"] * len(USED) + [f"survived {n}" for n in range(1, 6)]
    assert _ask(base_url, "after", "four") == "survived 4"
