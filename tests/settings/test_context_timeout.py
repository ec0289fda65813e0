"""Profile ``fixed``'s default step timeout follows the context; anything else keeps its own.

A 1 GB context's ``split`` or ``re.findall`` takes seconds on a loaded 2-core machine, so a fixed
5 s fails runs for being big. The rule (5 s + ``CONTEXT_SECONDS_PER_GB`` s per 10^9 characters
of a node's context) applies only where no one chose a timeout, in profile ``fixed``; profile
``upstream`` keeps 2fb46cc's 5 s. These runs go through litellm to the loopback server with a
10 MB context (5.3 s), and check the timeout each node's REPL was made with and what the run
record says; no step's duration is asserted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import rlm_compat.core
from rlm_compat import RLM
from rlm_compat.config import CONTEXT_SECONDS_PER_GB, ReplConfig
from rlm_compat.errors import ConfigurationError
from rlm_compat.repl import REPLExecutor
from rlm_compat.testing import ScriptedChatServer

ServerFactory = Callable[..., ScriptedChatServer]

CONTEXT = "a line of a big context\n" * 416_667  # 10,000,008 characters
GROWN = round(5 + CONTEXT_SECONDS_PER_GB * len(CONTEXT) / 1e9, 1)


@pytest.fixture
def timeouts(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The timeout of every REPL the loop makes (the real executor, its config noted)."""
    made: list[float] = []

    class Noted(REPLExecutor):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self.config.timeout)

    monkeypatch.setattr(rlm_compat.core, "REPLExecutor", Noted)
    return made


def _run(server: ScriptedChatServer, context: str = CONTEXT, **keywords: Any) -> dict[str, Any]:
    rlm = RLM("openai/m", api_base=server.base_url, api_key="sk-loop", **keywords)
    assert rlm.complete("how long?", context) == str(len(context))
    assert rlm.last_run is not None
    return dict(rlm.last_run.config)


ANSWER = "```python\nn = len(context)\nlines = context.split('\\n')\nprint(n)\n```"


def test_fixed_by_default_grows_with_the_context(chat_server: ServerFactory, timeouts: list[float]) -> None:
    config = _run(chat_server([ANSWER, "FINAL_VAR(n)"]))
    assert GROWN == 5.3 and timeouts == [GROWN]
    assert config["repl_timeout"] == GROWN
    assert config["repl_timeout_rule"] == {
        "seconds": 5.0,
        "per_gb": CONTEXT_SECONDS_PER_GB,
        "context_chars": len(CONTEXT),
    }


def test_a_small_context_keeps_five_seconds_exactly(
    chat_server: ServerFactory, timeouts: list[float]
) -> None:
    config = _run(chat_server([ANSWER, "FINAL_VAR(n)"]), context="short")
    assert timeouts == [5.0] and config["repl_timeout"] == 5.0
    assert config["repl_timeout_rule"]["context_chars"] == 5


@pytest.mark.parametrize("profile", ["upstream", "upstream-without:minimal_env"])
def test_upstream_keeps_five_seconds(chat_server: ServerFactory, timeouts: list[float], profile: str) -> None:
    config = _run(chat_server([ANSWER, "FINAL_VAR(n)"]), profile=profile)
    assert timeouts == [5.0]
    assert config["repl_timeout"] == 5.0 and config["repl_timeout_rule"] is None


@pytest.mark.parametrize("given", [5, 2.5, 120])
def test_a_timeout_the_user_gives_wins(
    chat_server: ServerFactory, timeouts: list[float], given: float
) -> None:
    config = _run(chat_server([ANSWER, "FINAL_VAR(n)"]), repl_timeout=given)
    assert timeouts == [given]
    assert config["repl_timeout"] == given and config["repl_timeout_rule"] is None


def test_no_timeout_stays_none(chat_server: ServerFactory, timeouts: list[float]) -> None:
    config = _run(chat_server([ANSWER, "FINAL_VAR(n)"]), repl_timeout=None)
    assert timeouts == [float("inf")]
    assert config["repl_timeout"] is None and config["repl_timeout_rule"] is None


def test_a_whole_repl_config_is_kept(chat_server: ServerFactory, timeouts: list[float]) -> None:
    config = _run(chat_server([ANSWER, "FINAL_VAR(n)"]), repl_config=ReplConfig(timeout=7))
    assert timeouts == [7.0] and config["repl_timeout_rule"] is None


def test_each_node_gets_the_timeout_of_its_own_context(
    chat_server: ServerFactory, timeouts: list[float]
) -> None:
    """A child RLM over a piece of the context has its own (smaller) context, so its own timeout;
    ``recursive_repl_timeout`` fixes the children's instead."""
    half = len(CONTEXT) // 2
    replies = [
        f"```python\nr = recursive_llm('part', context[:{half}])\nn = len(context)\n```",
        "```python\nn = len(context)\n```",
        "FINAL_VAR(n)",
        "FINAL_VAR(n)",
    ]
    _run(chat_server(replies))
    assert timeouts == [GROWN, round(5 + CONTEXT_SECONDS_PER_GB * half / 1e9, 1)]
    timeouts.clear()
    _run(chat_server(replies), recursive_repl_timeout=3)
    assert timeouts == [GROWN, 3.0]


def test_the_rule_itself() -> None:
    grows = ReplConfig(timeout=5, timeout_per_gb=30)
    assert grows.timeout_for(10**9) == 35.0 and grows.timeout_for(0) == 5.0
    assert grows.for_context(2 * 10**9).timeout == 65.0 and grows.for_context(10).timeout_per_gb == 0
    assert ReplConfig(timeout=5).for_context(10**9).timeout == 5.0
    assert ReplConfig(timeout=None, timeout_per_gb=30).timeout_for(10**9) == float("inf")
    for wrong in (-1, float("inf"), float("nan"), True, "30"):
        with pytest.raises(ConfigurationError, match="timeout_per_gb"):
            ReplConfig(timeout_per_gb=wrong)  # type: ignore[arg-type]
