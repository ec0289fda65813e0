"""Escape-assumed tests of the channel: crafted frames from an escaped worker to a real parent.

Every attack of the corpus is stopped (the parent survives, in time, the step fails with a typed
error or the cap holds, and both the same runner and a new one work afterwards). Mutation checks
show that each parent-side guard is what stops its attack: with the guard switched off (in this
process: the parent is this process), the attack gets through. Through the RLM loop, an attack
fails its step and the run goes on to its real answer.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

from rlm_compat import RLM
from rlm_compat.events import ReplStep
from rlm_compat.sandbox.isolate import process, replies, wire
from rlm_compat.tools.escape_channel import CORPUS, ChannelAttack, run_attack, run_in_child
from tests.conftest import ServerFactory

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux worker processes")

BY_NAME = {attack.name: attack for attack in CORPUS}


def test_the_corpus_covers_every_class_of_the_issue() -> None:
    kinds = {attack.kind for attack in CORPUS}
    assert kinds == {"crash", "freeze", "memory", "caps", "deadline", "shape", "protocol"}
    assert len(BY_NAME) == len(CORPUS)


@pytest.mark.parametrize("attack", CORPUS, ids=lambda attack: attack.name)
def test_every_attack_is_stopped(attack: ChannelAttack) -> None:
    verdict = run_attack(attack)
    assert verdict.stopped, verdict.line()


def _limits_with(**changes: Any) -> Any:
    def limits(self: process.ProcessRunner) -> wire.WireLimits:
        return wire.WireLimits(max_bytes=self.config.limits.reply_bytes, **changes)

    return limits


def _ignore_seq(parse: Any) -> Any:
    def parse_any_turn(message: dict[str, Any], expected: tuple[str, ...], seq: int | None) -> Any:
        return parse({**message, "seq": seq}, expected, seq)

    return parse_any_turn


MUTATIONS = {
    "deep-value": lambda mp: mp.setattr(process.ProcessRunner, "_limits", _limits_with(max_depth=10**6)),
    "item-flood": lambda mp: mp.setattr(process.ProcessRunner, "_limits", _limits_with(max_items=10**9)),
    "big-int": lambda mp: mp.setattr(process.ProcessRunner, "_limits", _limits_with(max_int_bytes=10**9)),
    "final-over-cap": lambda mp: mp.setattr(replies, "check_prepared", lambda *args: None),
    "text-over-cap": lambda mp: mp.setattr(replies, "TEXT_SLACK", 10**9),
    "type-name-flood": lambda mp: mp.setattr(replies, "NAME_CHARS", 10**9),
    "non-str-keys": lambda mp: mp.setattr(replies, "_name", lambda value, what: value),
    "second-reply": lambda mp: mp.setattr(replies, "parse", _ignore_seq(replies.parse)),
}
"""Per attack, how to switch its guard off. Not mutated here: the decoder's own stack limit
(msgpack's, not ours), the constructor checks (with them off, ``deque(range(2**62), 0)`` would
freeze the test process itself: the very attack) and the deadline charge (the timeout also
counts the waits between calls, so it fires later rather than never)."""


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_with_its_guard_off_each_attack_gets_through(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    MUTATIONS[name](monkeypatch)
    verdict = run_attack(BY_NAME[name])
    assert not verdict.stopped, verdict.line()


def test_in_child_processes_a_parent_without_a_verdict_is_not_stopped() -> None:
    """The doctor runs each attack in a child process of its own (a parent that dies is a
    verdict, not the end of the audit): a child that ends without one counts as not stopped."""
    unknown = ChannelAttack("no-such-attack", "crash", "nothing", "#escaped\n", "fault")
    verdicts = run_in_child([unknown, BY_NAME["unknown-op"]])
    assert [v.stopped for v in verdicts] == [False, True], [v.line() for v in verdicts]
    assert "without a verdict (exit status 3)" in verdicts[0].how


def test_through_the_loop_an_attack_fails_its_step_and_the_run_goes_on(
    chat_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through litellm to the loopback server, with the host's escaped entry: the first reply
    floods the parent with a deep frame, the second hands FINAL an answer over the cap; both
    steps fail with typed errors the model reads, and the run ends with the third reply."""
    monkeypatch.setenv(process.ENTRY_ENV, "escaped")
    deep = BY_NAME["deep-frame"].code
    final = BY_NAME["final-over-cap"].code.replace('"x" * 50000', '"x" * 1_500_000')
    server = chat_server([f"```python\n{deep}```", f"```python\n{final}```", 'FINAL("the real answer")'])
    rlm = RLM("openai/m", api_base=server.base_url, api_key="sk-loop", isolation="process")
    assert rlm.complete("q", "ctx") == "the real answer"
    steps = [event for event in rlm.trajectory if isinstance(event, ReplStep)]
    assert "the REPL worker process sent" in steps[0].output and steps[0].error
    assert "raise" in steps[1].output  # the host refused FINAL's text: the worker read a raise
    assert len(server.requests) == 3


def test_through_the_drop_in_executor_an_attack_fails_its_step_and_env_keeps_its_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``REPLExecutor`` (state ``"env"``, every plain value copied back): a forged reply whose
    value is a tuple key 150,000 deep fails the step with a typed error naming the limit, and
    ``env`` still holds the values of the steps before it, in a new worker."""
    from rlm_compat.errors import REPLWorkerFaultError
    from rlm_compat.repl import REPLExecutor

    monkeypatch.setenv(process.ENTRY_ENV, "escaped")
    env: dict[str, Any] = {}
    with REPLExecutor(isolation="process") as executor:
        executor.execute("kept = [1, 2, 3]", env)
        with pytest.raises(REPLWorkerFaultError) as fault:
            executor.execute(BY_NAME["deep-tuple-key"].code, env)
        assert fault.value.limit == "depth"
        assert env["kept"] == [1, 2, 3]
        assert executor.execute("print(sum(kept))", env) == "6"


def test_the_parents_memory_stays_within_the_message_limits() -> None:
    """What the parent allocates for the memory attacks (traced: every Python allocation,
    msgpack's included) stays a small multiple of the message, far below what was announced."""
    import tracemalloc

    tracemalloc.start()
    try:
        for name in ("array-claim", "bytes-claim", "item-flood", "big-int"):
            tracemalloc.reset_peak()
            assert run_attack(BY_NAME[name]).stopped
            peak = tracemalloc.get_traced_memory()[1]
            assert peak < 150 << 20, f"{name}: {peak >> 20} MiB"
    finally:
        tracemalloc.stop()
