"""Runs over the same big context share one read-only copy: their workers are forked from a
context template that holds it (rlm_compat.sandbox.isolate.templates), while each run's namespace
stays its own. SHARED_MIN is lowered here so that 2 MB contexts are shared (the rule is the same
at 1 GB; benchmarks/shared_context_bench.py measures the memory).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from rlm_compat import RLM
from rlm_compat.config import ReplConfig
from rlm_compat.errors import REPLError
from rlm_compat.sandbox.isolate import mapped, spawn, templates
from rlm_compat.sandbox.isolate.process import ProcessRunner
from rlm_compat.testing import ScriptedChatServer

pytestmark = pytest.mark.skipif(
    not (mapped.available() and hasattr(os, "fork")), reason="templates need fork and descriptor passing"
)

CONTEXT = "".join(f"record {i}: value {i * 7 % 1000}\n" for i in range(80_000))
SUM = sum(i * 7 % 1000 for i in range(80_000))
PROGRAM = "lines = context.splitlines()\ntotal = sum(int(l.rsplit(' ', 1)[1]) for l in lines)\nprint(total)"


@pytest.fixture(autouse=True)
def small_contexts_shared(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(templates, "SHARED_MIN", 1 << 20)
    monkeypatch.setattr(templates, "LINGER", 0.3)
    spawn._state.templates.sweep(everything=True)  # an earlier test's, still lingering
    yield
    spawn._state.templates.sweep(everything=True)


def _runner() -> ProcessRunner:
    return ProcessRunner(ReplConfig(isolation="process", timeout=30), state="worker")


def _parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _gone(pid: int, within: float = 10.0) -> bool:
    """Whether ``pid`` was reaped (a zombie may still hold its descriptors: its other threads)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not os.path.exists(f"/proc/{pid}"):
            return True
        time.sleep(0.02)
    return False


def test_runs_over_one_context_are_forked_from_one_template() -> None:
    runners = [_runner() for _ in range(3)]
    try:
        for runner in runners:
            assert runner.execute(PROGRAM, {"context": CONTEXT}).strip() == str(SUM)
        (template,) = spawn._state.templates.pids()
        assert {_parent_of(r.worker_pid or 0) for r in runners} == {template}
    finally:
        for runner in runners:
            runner.close()


def test_equal_contents_share_and_other_contents_do_not() -> None:
    copy = "".join([CONTEXT[:10], CONTEXT[10:]])
    other = CONTEXT[:-2] + "x\n"
    assert copy is not CONTEXT and len(other) == len(CONTEXT)
    runners = [_runner() for _ in range(3)]
    try:
        for runner, context in zip(runners, (CONTEXT, copy, other), strict=True):
            runner.execute("n = len(context)", {"context": context})
        parents = [_parent_of(r.worker_pid or 0) for r in runners]
        assert parents[0] == parents[1] != parents[2]
        assert sorted(spawn._state.templates.pids()) == sorted({parents[0], parents[2]})
        assert runners[2].execute("print(context[-2:])", {"context": other}).strip() == "x"
    finally:
        for runner in runners:
            runner.close()


def test_a_run_that_rebinds_or_derives_changes_only_itself() -> None:
    a, b = _runner(), _runner()
    env_a, env_b = {"context": CONTEXT}, {"context": CONTEXT}
    try:
        a.execute("lines = context.splitlines()", env_a)
        b.execute("lines = context.splitlines()", env_b)
        a.execute("context = 'rebound'\nlines.clear()\nlines.append('mine')", env_a)
        assert a.execute("print(context, lines)", env_a).strip() == "rebound ['mine']"
        assert b.execute("print(len(context), len(lines))", env_b).strip() == f"{len(CONTEXT)} 80000"
        assert b.execute(PROGRAM, env_b).strip() == str(SUM)
        fresh = _runner()  # a later run over the template still gets the original
        try:
            assert fresh.execute(PROGRAM, {"context": CONTEXT}).strip() == str(SUM)
        finally:
            fresh.close()
    finally:
        a.close()
        b.close()


def test_answers_equal_the_unshared_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    programs = [
        PROGRAM,
        "print(context.count('value 7'))",
        "import re\nprint(len(re.findall(r'\\d+', context)))",
    ]
    shared = _runner()
    try:
        answers = [shared.execute(p, {"context": CONTEXT}) for p in programs]
        assert spawn._state.templates.pids()
    finally:
        shared.close()
    monkeypatch.setattr(templates, "SHARED_MIN", 1 << 40)
    alone = _runner()
    try:
        assert [alone.execute(p, {"context": CONTEXT}) for p in programs] == answers
        assert _parent_of(alone.worker_pid or 0) not in spawn._state.templates.pids()
    finally:
        alone.close()


def test_an_unused_template_is_released() -> None:
    runner = _runner()
    runner.execute("n = len(context)", {"context": CONTEXT})
    (template,) = spawn._state.templates.pids()
    runner.close()
    assert _gone(template), "the template outlived its last worker by more than LINGER"
    assert spawn._state.templates.pids() == []


def test_a_template_in_use_is_kept() -> None:
    first, second = _runner(), _runner()
    env = {"context": CONTEXT}
    try:
        first.execute("n = len(context)", {"context": CONTEXT})
        second.execute("n = len(context)", env)
        (template,) = spawn._state.templates.pids()
        first.close()
        time.sleep(templates.LINGER * 3)
        assert spawn._state.templates.pids() == [template]
        assert second.execute("print(n)", env).strip() == str(len(CONTEXT))
    finally:
        first.close()
        second.close()


def test_a_killed_worker_is_replaced_from_the_same_template() -> None:
    runner = _runner()
    env = {"context": CONTEXT}
    try:
        runner.execute("lines = context.splitlines()", env)
        (template,) = spawn._state.templates.pids()
        os.kill(runner.worker_pid or 0, signal.SIGKILL)
        assert _gone(runner.worker_pid or 0)
        text = runner.execute("print(len(context))", env)  # the worker is seen gone before the step
        assert "lost with the old worker and are no longer defined: lines" in text
        assert text.strip().endswith(str(len(CONTEXT)))
        assert _parent_of(runner.worker_pid or 0) == template
    finally:
        runner.close()


def test_a_killed_template_takes_its_workers_and_a_new_one_is_made() -> None:
    runner = _runner()
    env = {"context": CONTEXT}
    try:
        runner.execute("n = len(context)", env)
        (template,) = spawn._state.templates.pids()
        worker = runner.worker_pid or 0
        os.kill(template, signal.SIGKILL)
        assert _gone(worker), "a worker outlived its template"
        text = runner.execute("print(len(context))", env)
        assert "had stopped" in text and text.strip().endswith(str(len(CONTEXT)))
        (replacement,) = spawn._state.templates.pids()
        assert replacement != template
        assert _parent_of(runner.worker_pid or 0) == replacement
    finally:
        runner.close()


def test_the_step_allowance_counts_the_inherited_context_once() -> None:
    """The inherited copy is data the host sent (the allowance grows with it), never model code's
    allocation, and the worker's start size leaves it out: a step may still allocate memory_mb."""
    config = ReplConfig(isolation="process", timeout=30)
    runner = ProcessRunner(config, state="worker")
    try:
        env = {"context": CONTEXT}
        runner.execute("n = len(context)", env)
        assert spawn._state.templates.pids()
        text = runner.execute("block = bytearray(512 << 20)\nprint(len(block))", env)
        assert text.strip() == str(512 << 20)
        with pytest.raises(REPLError, match="MemoryError"):
            runner.execute("block = bytearray(4096 << 20)", env)
    finally:
        runner.close()


def test_concurrent_rlm_runs_over_one_context_write_it_once(
    chat_server: Callable[..., ScriptedChatServer], mapped_writes: list[int]
) -> None:
    """Through the whole loop (litellm, the loopback server, the preload during the first model
    call): four concurrent runs over one context, one memory file written, one template."""

    def reply(request: dict[str, Any]) -> str:
        if len(request["messages"]) <= 2:
            return "```python\nn = context.count('\\n')\nprint(n)\n```"
        return 'FINAL_VAR("n")'

    server = chat_server(reply)

    async def run_all() -> list[str | None]:
        rlms = [RLM("openai/m", api_base=server.base_url, api_key="sk-share") for _ in range(4)]
        results = await asyncio.gather(*(rlm.acomplete_result("lines?", CONTEXT) for rlm in rlms))
        return [result.answer for result in results]

    assert asyncio.run(run_all()) == ["80000"] * 4
    assert mapped_writes == [len(CONTEXT)]
    assert len(spawn._state.templates.pids()) == 1


def test_the_run_record_says_whether_the_context_is_shared(
    chat_server: Callable[..., ScriptedChatServer],
) -> None:
    server = chat_server(lambda request: 'FINAL("done")')
    rlm = RLM("openai/m", api_base=server.base_url, api_key="sk-share")
    big, small = rlm.complete_result("q", CONTEXT), rlm.complete_result("q", "tiny")
    assert big.config["context_sharing"] == {"min_chars": 1 << 20, "shared": True}
    assert small.config["context_sharing"] == {"min_chars": 1 << 20, "shared": False}
    inline = RLM("openai/m", api_base=server.base_url, api_key="sk-share", isolation="inline")
    assert inline.complete_result("q", CONTEXT).config["context_sharing"] is None


def test_a_new_run_over_a_dead_templates_text_gets_a_new_template() -> None:
    first = _runner()
    try:
        first.execute("n = len(context)", {"context": CONTEXT})
        (template,) = spawn._state.templates.pids()
        os.kill(template, signal.SIGKILL)
        assert _gone(template)
        second = _runner()  # the parent has not noticed yet: its fork request meets the dead one
        try:
            assert second.execute(PROGRAM, {"context": CONTEXT}).strip() == str(SUM)
            (replacement,) = spawn._state.templates.pids()
            assert replacement != template and _parent_of(second.worker_pid or 0) == replacement
        finally:
            second.close()
    finally:
        first.close()
