"""Session state lives in the worker: what crosses back after a step, and what a kill loses.

The RLM loop runs its REPL in ``state="worker"``: the parent's ``env`` gets small plain values
and a stand-in naming the type of everything else. The drop-in's ``REPLExecutor`` keeps
upstream's contract (``env`` holds the variables) at a cost that follows what the step changed.
What a step looked into is counted by the worker (``ProcessRunner.last_checked``), never timed.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from examples import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlm_compat import RLM
from rlm_compat.clients import ScriptedClient
from rlm_compat.config import Limits
from rlm_compat.errors import REPLError
from rlm_compat.repl import REPLExecutor
from rlm_compat.sandbox.isolate.process import WorkerObject

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

CATASTROPHIC = "import re\nre.match(r'(a+)+$', 'a' * 40 + 'b')"
"""One long C call: only a kill stops it."""


def _fence(code: str) -> str:
    return f"```python\n{code}\n```"


def _checked(repl: REPLExecutor) -> tuple[str, ...]:
    return tuple(repl._runner.last_checked)  # type: ignore[attr-defined]


def test_the_rlm_loop_never_receives_the_namespace() -> None:
    """A step deriving 10 MB of state succeeds with only 256 KiB allowed back to the parent:
    the big values stay in the worker; the loop still answers FINAL_VAR and SHOW_VARS-style
    questions through names and types."""
    seen: dict[str, Any] = {}
    script = [
        _fence("lines = context.split('\\n')\nbig = 'x' * 10_000_000\ncount = len(lines)"),
        _fence("k = 1"),
        _fence("answer_text = str(count)\nFINAL_VAR('answer_text')"),
    ]
    client = ScriptedClient(script)
    rlm = RLM("scripted", client=client, limits=Limits(reply_bytes=256 << 10))
    original = REPLExecutor.execute

    def spy(self: REPLExecutor, code: str, env: dict[str, Any], **kwargs: Any) -> str:
        try:
            return original(self, code, env, **kwargs)
        finally:
            seen.update(env)
            seen["state"] = self.state

    context = "\n".join(f"line {i}" for i in range(200_000))
    REPLExecutor.execute = spy  # type: ignore[method-assign]
    try:
        assert rlm.complete("how many lines?", context) == "200000"
    finally:
        REPLExecutor.execute = original  # type: ignore[method-assign]
    assert seen["state"] == "worker"
    assert isinstance(seen["lines"], WorkerObject) and seen["lines"].type_name == "list"
    assert isinstance(seen["big"], WorkerObject) and seen["big"].type_name == "str"
    assert seen["count"] == 200_000  # a small plain value crosses (it survives a kill)
    assert "Error" not in client.calls[2].messages[-1]["content"]


def test_a_trivial_step_looks_into_nothing_whatever_the_session_holds() -> None:
    """Counted, not timed: after a step that names no mutable variable the worker looks into
    no variable's contents, in either state, with a 300k-element list in the namespace."""
    for state in ("worker", "env"):
        with REPLExecutor(timeout=30, state=state) as repl:
            env: dict[str, Any] = {"context": "a\nb\n" * 1000}
            repl.execute("lines = list(range(300_000))\nsmall = [1, 2]\nk = 0", env)
            for n in range(1, 4):
                repl.execute(f"k = {n}\nprint(len(context))", env)
                assert _checked(repl) == ("k",), state
            repl.execute("total = k + 1", env)
            assert _checked(repl) == ("total",)
            assert env["total"] == 4


def test_worker_state_never_rechecks_a_big_value_even_when_named() -> None:
    with REPLExecutor(timeout=30, state="worker") as repl:
        env: dict[str, Any] = {}
        repl.execute("lines = list(range(300_000))\nsmall = [1]", env)
        repl.execute("lines.append(1)\nsmall.append(2)", env)
        assert "lines" not in _checked(repl) and "small" in _checked(repl)
        assert env["small"] == [1, 2] and isinstance(env["lines"], WorkerObject)
        assert repl.get_variable("lines")[0] is True  # fetched on demand, plain data
        assert repl.get_variable("lines")[1][-1] == 1


def test_env_state_keeps_upstreams_contract_through_every_path_of_change() -> None:
    """The drop-in's env sees in-place changes made through a function, an alias, a container
    holding the list, and a mutation named only inside a string (a conservative re-check)."""
    with REPLExecutor(timeout=30) as repl:
        env: dict[str, Any] = {}
        repl.execute("data = [1]\nholder = {'d': data}\nalias = data\ndef add():\n    data.append(2)", env)
        repl.execute("add()", env)
        assert env["data"] == [1, 2] and env["holder"] == {"d": [1, 2]} and env["alias"] == [1, 2]
        repl.execute("holder['d'].append(3)", env)
        assert env["data"] == [1, 2, 3]
        repl.execute("alias.append(4)", env)
        assert env["data"] == [1, 2, 3, 4] and env["holder"]["d"] == [1, 2, 3, 4]
        repl.execute("x = 'data'", env)
        assert "data" in _checked(repl)  # named in a string: looked into, at worst needlessly
        repl.execute("nothing = None\nkind = int\ndef g():\n    return 1", env)
        assert env["nothing"] is None and env["kind"] is int and isinstance(env["g"], WorkerObject)


def test_a_killed_step_keeps_small_values_and_names_every_lost_variable() -> None:
    with REPLExecutor(timeout=1, state="worker") as repl:
        env: dict[str, Any] = {}
        repl.execute("n = 41\nsmall = [1, 2]\nbig = list(range(100_000))\ndef f():\n    return 1", env)
        with pytest.raises(REPLError) as caught:
            repl.execute(CATASTROPHIC, env)
        message = str(caught.value)
        lost = re.search(r"lost with the old worker and are no longer defined: ([^.]+)\.", message)
        assert lost is not None, message
        assert set(lost.group(1).split(", ")) == {"big", "f"}
        assert repl.execute("print(n + 1, small)", env).strip() == "42 [1, 2]"
        with pytest.raises(REPLError, match="big"):
            repl.execute("print(len(big))", env)


def test_final_var_of_a_gigantic_rendering_is_refused_before_it_is_made() -> None:
    """A list of a million references to one 900-character string renders to 900 MB: refused
    in the worker from a count ("at least"), never built, never sent to the parent."""
    with REPLExecutor(timeout=30, state="worker") as repl:
        env: dict[str, Any] = {}
        repl.execute("c = ['y' * 900] * 1_000_000", env)
        assert isinstance(env["c"], WorkerObject)
        with pytest.raises(REPLError, match=r"at least \d+ characters long, over the limit"):
            repl.render(env, "c")
        assert repl.execute("print(len(c))", env).strip() == "1000000"


def test_limits_follow_the_context_and_still_stop_a_runaway() -> None:
    """memory_mb=16 is far below what splitting a 24 MB context takes, yet the split succeeds
    (the allowance grows with what the host sent); one huge allocation still fails at once."""
    context = ("x" * 29 + "\n") * 800_000
    for isolation in ("process", "inline"):
        with REPLExecutor(
            timeout=60, isolation=isolation, limits=Limits(memory_mb=16), state="worker"
        ) as repl:
            env: dict[str, Any] = {"context": context}
            assert repl.execute("lines = context.split('\\n')\nprint(len(lines))", env).strip() == "800001"
            if isolation == "process":
                with pytest.raises(REPLError, match=r"MemoryError|memory"):
                    repl.execute("x = bytearray(1 << 40)", env)


def test_the_snapshot_cap_sizes_only_what_the_step_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    """0.5.0's ``max_snapshot_bytes`` keeps its meaning (smallest first into ``env``), but the
    values a step left alone are not pickled again to size the snapshot (counted)."""
    import pickle as real_pickle

    from rlm_compat import repl_v050

    sized: list[int] = []

    class CountingPickle:
        HIGHEST_PROTOCOL = real_pickle.HIGHEST_PROTOCOL

        @staticmethod
        def dumps(value: Any, protocol: int | None = None) -> bytes:
            sized.append(len(value) if isinstance(value, list) else 1)
            return real_pickle.dumps(value, protocol=protocol)

    monkeypatch.setattr(repl_v050, "pickle", CountingPickle)
    with repl_v050.REPLExecutor(timeout=30, max_snapshot_bytes=10_000) as repl:
        env: dict[str, Any] = {}
        repl.execute("lines = list(range(200_000))\nsmall = [1, 2]", env)
        assert "lines" not in env and env["small"] == [1, 2]  # over the cap: withheld
        sized.clear()
        for n in range(3):
            repl.execute(f"k = {n}", env)
        assert sum(sized) <= 3 * 3  # k, and nothing the steps left alone
        repl.execute("small.append(3)", env)
        assert env["small"] == [1, 2, 3] and repl.get_variable("lines")[0] is True


_SETUP = (
    "a = [1]\nb = [2]\nd = {'a': a, 'n': 0}\nk = 0\nc = a\n"
    "def grow():\n    b.append(len(b))\nclass Box:\n    pass\nbox = Box()\nbox.items = a"
)
_MOVES = (
    "k = k + 1",
    "a.append(k)",
    "c.append(5)",
    "d['a'].append(6)",
    "d['n'] = d['n'] + 1",
    "grow()",
    "box.items.append(7)",
    "c = b",
    "c = list(c)",
    "a = [0]",
    "t = 'a'",
    "print(len(a))",
    "x = [v for v in a if v]",
    "b.sort(reverse=True)",
)


@settings(deadline=None, max_examples=examples(15), suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_MOVES), min_size=1, max_size=6))
def test_env_matches_inline_whatever_the_step_reaches(moves: list[str]) -> None:
    """The re-check a step skips is one it could not need: after every step, the worker's
    ``env`` holds what the same steps leave in an inline ``env`` (in-place changes through
    aliases, containers, a function and an instance included)."""
    envs: dict[str, dict[str, Any]] = {"inline": {}, "process": {}}
    repls = {name: REPLExecutor(timeout=30, isolation=name) for name in envs}
    try:
        for code in (_SETUP, *moves):
            for name, repl in repls.items():
                repl.execute(code, envs[name])
            inline, process = ({k: v for k, v in env.items() if k in "abcdkxt"} for env in envs.values())
            assert process == inline, code
    finally:
        for repl in repls.values():
            repl.close()


def test_the_context_crosses_during_the_first_model_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop sends the context to its worker before asking the model; the first step then
    sends nothing big (the memory file was written by the preload thread, once)."""
    import threading

    from rlm_compat.sandbox.isolate import mapped

    writers: list[str] = []
    write = mapped.write

    def spy(value: str | bytes) -> tuple[int, str, int]:
        writers.append(threading.current_thread().name)
        return write(value)

    monkeypatch.setattr(mapped, "write", spy)
    client = ScriptedClient([_fence("n = len(context)"), _fence("FINAL(str(n))")])
    context = "z" * (4 << 20)
    assert RLM("scripted", client=client).complete("q", context) == str(len(context))
    assert writers == ["rlm-preload"]
