"""`rlm-compat serve` keeps serving while escaped workers attack it through their channels.

A server process of its own, started with the host's test-only worker entry
(``RLM_COMPAT_TEST_WORKER_ENTRY=escaped``: a step marked as escaped runs as plain Python holding
the worker's channel, see rlm_compat/tools/escape_channel.py), talking through litellm to the
scripted loopback provider. The provider answers a query naming an attack with that attack's
code, then with a plain ``FINAL``: each attacked run fails its step and still answers; the server
answers ordinary requests during and after, and its process is the same one throughout.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from serve_harness import Served, serving

from rlm_compat.testing import Reply, ScriptedChatServer
from rlm_compat.tools.escape_channel import CORPUS

pytest.importorskip("aiohttp")
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux worker processes")

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
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("serve-channel")
    with ScriptedChatServer(_script) as provider, pytest.MonkeyPatch.context() as patch:
        patch.setenv("RLM_COMPAT_TEST_WORKER_ENTRY", "escaped")  # the host's own environment
        with serving(root, provider, "--repl-timeout", "2", stop_timeout=15) as server:
            yield server
            assert server.process.poll() is None, server.log.read_text()[-2000:]


# once_per_ci: a server process and ten runs (~10 s); the channel's guards are the same code on
# every Python, and tests/tools/test_escape_channel.py runs every attack on each of them.
@pytest.mark.once_per_ci
def test_attacked_runs_answer_and_the_server_keeps_serving(served: Served) -> None:
    """Five attacks at once beside ordinary requests: every run answers (the attacked ones after
    their failed step), and an ordinary request afterwards still does."""
    jobs = [(f"q ATTACK:{name}", "abc") for name in USED] + [("plain", "x" * n) for n in range(1, 6)]
    with ThreadPoolExecutor(len(jobs)) as pool:
        answers = list(pool.map(lambda job: served.ask(*job), jobs))
    assert answers == ["survived 3"] * len(USED) + [f"survived {n}" for n in range(1, 6)]
    assert served.ask("after", "four") == "survived 4"
