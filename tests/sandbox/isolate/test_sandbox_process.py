"""isolation="process": a persistent worker per executor, killed and replaced at the timeout."""

from __future__ import annotations

import os
import re
import signal
import time
from typing import Any

import pytest

from rlm_compat.config import ReplConfig
from rlm_compat.errors import FinalVarMissingError, REPLError, REPLSecurityError, REPLTimeoutError
from rlm_compat.repl import REPLExecutor
from rlm_compat.sandbox import host_call
from rlm_compat.sandbox.isolate.process import WorkerObject


@pytest.fixture(params=["fixed", "upstream"])
def executor(request: pytest.FixtureRequest) -> REPLExecutor:
    return REPLExecutor(timeout=1, profile=request.param, isolation="process")


def test_state_persists_and_lands_in_env(executor: REPLExecutor) -> None:
    env: dict = {"context": "Hello World", "re": re}
    assert executor.execute("x = 5 + 3\nprint(x)", env) == "8"
    assert env["x"] == 8 and env["re"] is re
    assert executor.execute("words = re.findall(r'\\w+', context)\nprint(len(words))", env) == "2"
    assert env["words"] == ["Hello", "World"]
    env["extra"] = 41
    assert executor.execute("print(extra + 1)", env) == "42"


def test_in_place_changes_come_back() -> None:
    ex = REPLExecutor(isolation="process")
    env: dict = {"items": [1]}
    ex.execute("items.append(2)", env)
    assert env["items"] == [1, 2]


def test_functions_stay_in_the_worker() -> None:
    ex = REPLExecutor(isolation="process")
    env: dict = {}
    ex.execute("def double(v):\n    return v * 2", env)
    assert isinstance(env["double"], WorkerObject) and "double" in repr(env["double"])
    assert ex.execute("double(21)", env) == "42"


def test_host_functions_run_in_the_parent() -> None:
    calls: list[tuple[str, str]] = []

    def recursive_llm(query: str, context: str) -> str:
        calls.append((query, context))
        return f"answer to {query}"

    def final_var(name: str) -> None:
        raise FinalVarMissingError(f"no variable {name!r}")

    env: dict = {"recursive_llm": host_call(recursive_llm), "FINAL_VAR": host_call(final_var)}
    ex = REPLExecutor(timeout=0.5, isolation="process")
    assert ex.execute("print(recursive_llm('q', 'ctx'))", env) == "answer to q"
    assert calls == [("q", "ctx")]
    with pytest.raises(FinalVarMissingError, match="no variable 'x'"):
        ex.execute("FINAL_VAR('x')", env)


def test_host_time_does_not_count() -> None:
    def slow() -> str:
        time.sleep(0.7)
        return "done"

    ex = REPLExecutor(timeout=0.5, isolation="process")
    assert ex.execute("print(slow())", {"slow": host_call(slow)}) == "done"


@pytest.mark.parametrize(
    "code",
    ["re.match('(a+)+$', 'a' * 40 + 'b')", "sum(range(10 ** 12))", "while True:\n    pass"],
)
def test_a_single_long_c_call_is_stopped(executor: REPLExecutor, code: str) -> None:
    env: dict = {"re": re, "keep": 1}
    start = time.monotonic()
    with pytest.raises(REPLTimeoutError):
        executor.execute(code, env)
    assert time.monotonic() - start < 1 + 20  # killed at the timeout; slack for a loaded machine
    assert executor.execute("print(keep)", env) == "1"


def test_policy_still_applies() -> None:
    ex = REPLExecutor(isolation="process")
    with pytest.raises(REPLSecurityError):
        ex.execute("import os", {})
    with pytest.raises(REPLSecurityError):
        ex.execute("re.enum", {"re": re})


def test_a_dead_worker_is_replaced_with_env_resent() -> None:
    ex = REPLExecutor(isolation="process")
    env: dict = {"n": 1}
    assert ex.execute("print(n)", env) == "1"
    pid = ex._runner.worker_pid  # type: ignore[attr-defined]
    assert pid is not None and pid != os.getpid()
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    # gone means reaped by the fork server: every thread has exited and closed the channel
    # (a zombie leader can still have threads holding it open)
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.01)
    out = ex.execute("print(n + 1)", env)
    assert out.endswith("2") and "had stopped" in out


def test_huge_allocation_fails_in_the_worker() -> None:
    ex = REPLExecutor(timeout=5, isolation="process", memory_limit_mb=64)
    with pytest.raises(REPLError, match="MemoryError"):
        ex.execute("x = bytearray(10 ** 11)", {})
    assert ex.execute("print('alive')", {}) == "alive"


def test_blank_code() -> None:
    assert REPLExecutor(isolation="process").execute("  ", {}) == "No code to execute"


@pytest.mark.parametrize("start_method", ["forkserver", "spawn"])
def test_both_start_methods_give_the_same_session(start_method: str) -> None:
    """spawn is what macOS and Windows get; forced here so Linux CI covers it."""
    config = ReplConfig(timeout=1, start_method=start_method)
    with REPLExecutor(config=config) as ex:
        env: dict = {"context": "a b c", "re": re}
        assert ex.execute("def count():\n    return len(context.split())\nn = 41", env) == (
            "Code executed successfully (no output)"
        )
        assert ex.execute("print(count(), re.findall('b', context))", env) == "3 ['b']"
        pid = ex._runner.worker_pid  # type: ignore[attr-defined]
        assert pid is not None and pid != os.getpid()
        with pytest.raises(REPLTimeoutError, match="worker process was restarted") as info:
            ex.execute("sum(range(10 ** 12))", env)
        assert "count" in str(info.value) and "count" not in env
        assert ex.execute("print(n + 1)", env) == "42"
        assert ex._runner.worker_pid != pid  # type: ignore[attr-defined]


def test_a_host_result_the_worker_cannot_receive_is_a_clear_error() -> None:
    def make_lock() -> object:
        import threading

        return threading.Lock()

    with REPLExecutor(isolation="process") as ex:
        env: dict = {"make_lock": host_call(make_lock), "n": 1}
        with pytest.raises(
            REPLError, match=r"make_lock\(\) returned a lock, a non-serializable value that cannot be passed"
        ):
            ex.execute("lock = make_lock()", env)
        assert ex.execute("print(n)", env) == "1"


def test_a_host_value_the_worker_cannot_load_is_named() -> None:
    class Local:  # its class cannot be found in the worker
        pass

    with REPLExecutor(isolation="process") as ex:
        out = ex.execute("print('ran')", {"thing": Local()})
    assert out.startswith("ran") and "variable 'thing' could not be passed" in out


def test_a_rebinding_that_reuses_the_old_objects_address_still_comes_back() -> None:
    """The old value freed, the new one of the same size may land at its address (same ``id``):
    the worker must still see a new value, not an unchanged one (the parent kept the old)."""
    with REPLExecutor(isolation="process") as ex:
        env: dict[str, Any] = {}
        ex.execute('x = "a" * 100000\ny = 12345678901', env)
        ex.execute('x = None\nx = "b" * 100000\ny = None\ny = 12345678902', env)
        assert env["x"] == "b" * 100000 and env["y"] == 12345678902
        assert ex.execute("print(x[:3], y)", env) == "bbb 12345678902"


@pytest.mark.parametrize("isolation", ["inline", "process"])
def test_final_and_final_var_called_by_code_reach_the_host_alike(isolation: str) -> None:
    """FINAL / FINAL_VAR are prepared on the sandbox side (a bounded text, the variable's text);
    a worker sends the prepared arguments and the parent must not prepare them a second time."""
    got: list[tuple[Any, ...]] = []
    env: dict[str, Any] = {
        "FINAL": host_call(lambda text: got.append(("FINAL", text)), "answer"),
        "FINAL_VAR": host_call(lambda name, text: got.append(("FINAL_VAR", name, text)), "answer_var"),
    }
    ex = REPLExecutor(isolation=isolation)
    try:
        ex.execute('summary = "hello"\nFINAL_VAR("summary")\nFINAL_VAR(summary)\nFINAL(len(summary))', env)
    finally:
        ex.close()
    assert got == [("FINAL_VAR", "summary", "hello"), ("FINAL_VAR", "hello", None), ("FINAL", "5")]


def test_malformed_prepared_answer_arguments_are_refused() -> None:
    final_var = host_call(lambda name, text: (name, text), "answer_var")
    assert final_var.prepared("x", "text") == ("x", "text")
    for bad in [("x",), ("x", 5), ("x", "t", "u")]:
        with pytest.raises(TypeError, match="malformed prepared arguments"):
            final_var.prepared(*bad)
