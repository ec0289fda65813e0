"""REPLExecutor's lifecycle as recursive-llm 0.5.0 has it, in both isolation modes.

close() / context manager, abort() from another thread, get_variable(), execute(timeout=...),
and under the 0.5 API preset SHOW_VARS() and the ``answer`` dict.
"""

from __future__ import annotations

import threading

import pytest

from rlm_compat.errors import ConfigurationError, REPLError, REPLTimeoutError
from rlm_compat.repl import REPLExecutor

ISOLATIONS = ["inline", "process"]


@pytest.fixture(params=ISOLATIONS)
def repl(request: pytest.FixtureRequest) -> REPLExecutor:
    executor = REPLExecutor(isolation=request.param, api="0.5")
    request.addfinalizer(executor.close)
    return executor


def test_get_variable_reads_the_session(repl: REPLExecutor) -> None:
    with pytest.raises(REPLError, match="not running"):
        repl.get_variable("x")
    env: dict[str, object] = {}
    repl.execute("meaning = 6 * 7\nwords = ['a', 'b']", env)
    assert repl.get_variable("meaning") == (True, 42)
    assert repl.get_variable("words") == (True, ["a", "b"])
    assert repl.get_variable("missing") == (False, None)
    repl.execute("del meaning", env)
    assert repl.get_variable("meaning") == (False, None)
    repl.close()
    with pytest.raises(REPLError, match="not running"):
        repl.get_variable("words")


def test_function_held_only_by_a_worker_reads_as_not_found() -> None:
    with REPLExecutor(isolation="process") as repl:
        repl.execute("def f():\n    return 1", {})
        assert repl.get_variable("f") == (False, None)


def test_show_vars_lists_user_variables_only(repl: REPLExecutor) -> None:
    env: dict[str, object] = {"context": "text", "helper": lambda: "h"}
    repl.execute("n = len(context)\nitems = [n]", env)
    shown = repl.execute("SHOW_VARS()", env)
    assert "'n': 'int'" in shown and "'items': 'list'" in shown and "'context': 'str'" in shown
    assert "helper" not in shown and "len" not in shown and "SHOW_VARS" not in shown
    assert "SHOW_VARS" not in env


def test_show_vars_sees_the_step_as_it_runs(repl: REPLExecutor) -> None:
    env: dict[str, object] = {"context": "text", "helper": lambda: "h"}
    code = "before = SHOW_VARS()\nn = 1\ndef f():\n    return n\nclass K:\n    pass\nk = K()\nafter = SHOW_VARS()"
    repl.execute(code, env)
    assert env["before"] == {"context": "str"}
    assert env["after"] == {
        "context": "str",
        "before": "dict",
        "n": "int",
        "f": "function",
        "K": "type",
        "k": "K",
    }
    repl.execute("del n", env)
    assert "'n'" not in repl.execute("SHOW_VARS()", env)
    with pytest.raises(REPLError, match=r"SHOW_VARS\(\) takes no arguments"):
        repl.execute("SHOW_VARS('x')", env)


def test_show_vars_host_side_checks_a_workers_listing() -> None:
    from rlm_compat.sandbox import host_call

    shown = host_call(lambda listing: listing, "namespace")
    assert shown.prepared({"a": "int"}) == {"a": "int"}
    for bad in ({"a": 1}, {1: "int"}, ["a"], "a"):
        with pytest.raises(TypeError, match="malformed prepared arguments"):
            shown.prepared(bad)
    with pytest.raises(TypeError, match="malformed prepared arguments"):
        shown.prepared({}, {})
    assert shown() is None  # outside any step: no namespace to list, the host lists its own


def test_show_vars_exists_only_under_the_050_preset() -> None:
    with REPLExecutor(isolation="inline", api="2fb46cc") as repl, pytest.raises(REPLError, match="SHOW_VARS"):
        repl.execute("SHOW_VARS()", {})


def test_answer_dict_publishes_once_and_can_be_withdrawn(repl: REPLExecutor) -> None:
    env: dict[str, object] = {"answer": {"content": "", "ready": False}}
    repl.execute("answer['content'] = 'done'\nanswer['ready'] = True", env)
    assert repl.pop_final_answer() == "done"
    assert repl.pop_final_answer() is None
    repl.execute("answer['content'] = 'bad'; answer['ready'] = True", env)
    repl.reset_final_answer()
    assert repl.pop_final_answer() is None
    repl.execute("answer['content'] = 'still unready'", env)
    assert repl.pop_final_answer() is None
    assert env["answer"] == {"content": "still unready", "ready": False}


def test_answer_dict_is_ignored_under_the_default_preset() -> None:
    with REPLExecutor(isolation="inline") as repl:
        env: dict[str, object] = {"answer": {"content": "", "ready": False}}
        repl.execute("answer['content'] = 'x'; answer['ready'] = True", env)
        assert repl.pop_final_answer() is None


def test_execute_timeout_shortens_one_step(repl: REPLExecutor) -> None:
    env: dict[str, object] = {}
    with pytest.raises(REPLTimeoutError, match=r"0\.2 s"):
        repl.execute("while True:\n    pass", env, timeout=0.2)
    assert repl.execute("6 * 7", env) == "42"
    for bad in (0, -1, "1", True):
        with pytest.raises(ConfigurationError, match="timeout"):
            repl.execute("1", env, timeout=bad)  # type: ignore[arg-type]


def test_abort_kills_a_running_worker_step_and_retires_the_executor() -> None:
    repl = REPLExecutor(isolation="process", timeout=60)
    try:
        started = threading.Event()
        env: dict[str, object] = {"mark": started.set}

        def kill_when_running() -> None:
            started.wait(30)
            repl.abort()

        killer = threading.Thread(target=kill_when_running)
        killer.start()
        with pytest.raises(REPLError) as info:
            repl.execute("mark()\nwhile True:\n    pass", env)
        killer.join()
        assert not isinstance(info.value, REPLTimeoutError)
        with pytest.raises(REPLError, match="aborted"):
            repl.execute("1", {})
    finally:
        repl.close()


def test_context_manager_releases_the_worker() -> None:
    with REPLExecutor(isolation="process") as repl:
        repl.execute("x = 1", {})
        runner = repl._runner
        assert getattr(runner, "worker_pid", None) is not None
    assert getattr(runner, "worker_pid", None) is None


def test_session_outlives_each_env_dict_under_the_050_preset(repl: REPLExecutor) -> None:
    first: dict[str, object] = {}
    repl.execute("meaning = 42", first)
    second: dict[str, object] = {"extra": 1}
    assert repl.execute("print(meaning + extra)", second) == "43"
    assert second["meaning"] == 42  # the session's variables are written back to the dict given
    assert "meaning" in repl.execute("SHOW_VARS()", {})
    # 2fb46cc: the dict is the session, so a new one starts afresh
    with REPLExecutor(isolation="inline") as plain:
        plain.execute("meaning = 42", {})
        with pytest.raises(REPLError, match="meaning"):
            plain.execute("meaning", {})


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_output_is_stripped_before_it_is_cut_under_the_050_preset(isolation: str) -> None:
    code = "print('  ' + 'x' * 50 + '  ')"
    with REPLExecutor(max_output_chars=10, isolation=isolation, api="0.5") as repl:
        assert repl.execute(code, {}) == "x" * 10 + "\n\n[Output truncated: 50 chars total, showing first 10]"
        assert repl.execute("print('  ab  '); print('   ')", {}) == "ab"
    with REPLExecutor(max_output_chars=10, isolation=isolation) as raw:  # 2fb46cc counts print's newline
        assert (
            raw.execute(code, {})
            == "  " + "x" * 8 + "\n\n[Output truncated: 55 chars total, showing first 10]"
        )
