"""Custom tools through litellm to the loopback server, in the default configuration (the hardened
worker): they run in the host, only plain data crosses, and each call is recorded."""

from __future__ import annotations

import asyncio
import hashlib
import os
import secrets
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rlm_compat import RLM
from rlm_compat.events import ReplStep, ToolCall
from rlm_compat.record import read_trajectory
from rlm_compat.sandbox.isolate import process
from rlm_compat.testing import ScriptedChatServer

ServerFactory = Callable[..., ScriptedChatServer]


def _rlm(server: ScriptedChatServer, **kwargs: Any) -> RLM:
    return RLM("openai/m", api_base=server.base_url, api_key="sk-loop", **kwargs)


def _fenced(code: str) -> str:
    return f"```python\n{code}\n```"


def _steps(rlm: RLM) -> list[ReplStep]:
    assert rlm.last_run is not None
    return [e for e in rlm.last_run.trajectory if isinstance(e, ReplStep)]


def _calls(rlm: RLM) -> list[ToolCall]:
    assert rlm.last_run is not None
    return [e for e in rlm.last_run.trajectory if isinstance(e, ToolCall)]


def test_64_calls_from_one_step_run_in_the_callers_process(chat_server: ServerFactory) -> None:
    seen: list[tuple[int, int]] = []

    def where(i: int) -> list[int]:
        """The process and thread a call ran in."""
        seen.append((os.getpid(), i))
        return [os.getpid(), i * 2]

    code = "pids = set()\nfor i in range(64):\n    pid, twice = where(i)\n    assert twice == 2 * i\n    pids.add(pid)\nprint(sorted(pids))"
    server = chat_server([_fenced(code), 'FINAL("done")'])
    rlm = _rlm(server, custom_tools={"where": where})
    assert rlm.settings.repl.isolation == "process"
    assert rlm.complete("q", "ctx") == "done"
    assert _steps(rlm)[0].output.strip() == f"[{os.getpid()}]"
    assert [i for _, i in seen] == list(range(64))
    calls = _calls(rlm)
    assert len(calls) == 64 and all(c.function == "where" and c.error_type is None for c in calls)
    assert rlm.last_run is not None and rlm.last_run.stats["tool_calls"] == 64


def test_a_tools_closure_never_reaches_the_worker(
    chat_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the host's escaped worker entry, plain Python in the worker looks through every object
    it can reach for two secrets (by their digests) and reports what it found through a tool: the
    secret a tool's closure holds is not there, the one given as a value is (so the search finds
    what does cross)."""
    monkeypatch.setenv(process.ENTRY_ENV, "escaped")
    hidden, shown = secrets.token_hex(16), secrets.token_hex(16)
    reported: list[Any] = []

    def fetch(key: str) -> str:
        """Fetch with the API key."""
        return "ok" if hidden else "no"

    digests = [hashlib.sha256(s.encode()).hexdigest() for s in (hidden, shown)]
    search = f"""#escaped
import gc, hashlib, os
wanted = {digests!r}
found = set()
for obj in gc.get_objects():
    items = []
    if isinstance(obj, dict):
        items = [*obj.keys(), *obj.values()]
    elif isinstance(obj, (list, tuple, set, frozenset)):
        items = list(obj)
    elif type(obj).__name__ == "cell":
        try:
            items = [obj.cell_contents]
        except ValueError:
            pass
    elif hasattr(obj, "__dict__"):
        items = list(vars(obj).values())
    for item in items:
        if type(item) is str and hashlib.sha256(item.encode()).hexdigest() in wanted:
            found.add(wanted.index(hashlib.sha256(item.encode()).hexdigest()))
ns["report"](sorted(found))
os._exit(0)
"""
    server = chat_server([_fenced("print(fetch('a'))"), _fenced(search), 'FINAL("x")'])
    tools = {"fetch": fetch, "report": reported.append, "TOKEN": shown}
    rlm = _rlm(server, custom_tools=tools)
    assert rlm.complete("q", "ctx") == "x"
    assert _steps(rlm)[0].output.strip() == "ok"
    assert reported == [[1]]  # the value's secret is in the worker, the closure's is not


def test_arguments_and_results_must_be_plain_data_within_limits(chat_server: ServerFactory) -> None:
    def echo(value: Any) -> Any:
        return value

    def handle() -> Any:
        return threading.Lock()

    code = (
        "for call in (lambda: echo(echo), lambda: echo('x' * 5000), lambda: handle(), lambda: echo({1: (b'a', {2.5})})):\n"
        "    try:\n        print('ok', call())\n"
        "    except Exception as exc:\n        print(type(exc).__name__, str(exc)[:90])"
    )
    tools = {"echo": {"tool": echo, "max_argument_bytes": 1000}, "handle": handle}
    for isolation in ("process", "inline"):
        rlm = _rlm(chat_server([_fenced(code), 'FINAL("x")']), custom_tools=tools, isolation=isolation)
        assert rlm.complete("q", "ctx") == "x"
        lines = _steps(rlm)[0].output.strip().splitlines()
        assert lines[0].startswith("TypeError") and "plain data" in lines[0], (isolation, lines)
        assert lines[1].startswith("ToolError") and "1,000 bytes" in lines[1], (isolation, lines)
        assert lines[2].startswith("ToolError") and "a lock is not plain" in lines[2], (isolation, lines)
        assert lines[3] == "ok {1: (b'a', {2.5})}", (isolation, lines)
        errors = [c.error_type for c in _calls(rlm)]
        assert errors[-3:] == ["ToolError", "ToolError", None]


def test_an_async_tool_and_timeouts(chat_server: ServerFactory) -> None:
    loops: list[int] = []

    async def upper(text: str) -> str:
        """Upper-case text, slowly."""
        loops.append(id(asyncio.get_running_loop()))
        await asyncio.sleep(0.01)
        return text.upper()

    async def hang() -> None:
        await asyncio.sleep(30)

    def stuck() -> None:
        threading.Event().wait(30)

    code = (
        "print(upper('abc'))\n"
        "for f in (hang, stuck):\n    try:\n        f()\n    except Exception as exc:\n"
        "        print(type(exc).__name__, 'timeout' in str(exc))\n"
        "print(upper('again'))"
    )
    server = chat_server([_fenced(code), 'FINAL("x")'])
    tools = {
        "upper": upper,
        "hang": {"tool": hang, "timeout": 0.2},
        "stuck": {"tool": stuck, "timeout": 0.2},
    }
    rlm = _rlm(server, custom_tools=tools)
    assert rlm.complete("q", "ctx") == "x"
    assert _steps(rlm)[0].output.split() == ["ABC", "ToolError", "True", "ToolError", "True", "AGAIN"]
    assert len(set(loops)) == 1  # both calls on the node's event loop


def test_a_tool_that_raises_shows_its_error_keeps_its_traceback(
    chat_server: ServerFactory, tmp_path: Path
) -> None:
    def lookup(user_id: int) -> dict[str, Any]:
        raise KeyError(f"no user {user_id}")

    caught = "try:\n    lookup(7)\nexcept KeyError as exc:\n    print('caught', exc)"
    server = chat_server([_fenced(caught), _fenced("lookup(8)"), 'FINAL("x")'])
    trajectory = tmp_path / "run.jsonl"
    rlm = _rlm(server, custom_tools={"lookup": lookup}, trajectory_path=trajectory)
    assert rlm.complete("q", "ctx") == "x"
    first, second = _steps(rlm)[:2]
    assert first.output.strip() == "caught 'no user 7'" and not first.error
    assert "KeyError: 'no user 8'" in second.output and second.error
    assert "test_toolcalls.py" not in second.output  # the host's traceback stays in the host
    calls = _calls(rlm)
    assert [c.error_type for c in calls] == ["KeyError", "KeyError"]
    assert calls[0].traceback is not None and "raise KeyError" in calls[0].traceback
    _header, events = read_trajectory(trajectory)
    recorded = [e for e in events if e["kind"] == "tool_call"]
    assert recorded[0]["data"]["traceback"] == calls[0].traceback
    assert rlm.last_run is not None and rlm.last_run.stats["tool_errors"] == 2


def test_sub_tools_reach_child_rlms_and_the_prompt_lists_each_tool(chat_server: ServerFactory) -> None:
    def root_only() -> str:
        return "root"

    def shared(x: int = 1) -> int:
        """Double x."""
        return 2 * x

    replies = [
        _fenced("print(rlm_query('sub', 'c'))"),
        _fenced("print(sorted(n for n in ('root_only', 'shared', 'LIMIT') if n in dir()))"),
        'FINAL("child")',
        'FINAL("root")',
    ]
    server = chat_server(replies)
    rlm = _rlm(
        server,
        custom_tools={"root_only": root_only, "shared": shared, "LIMIT": {"tool": 5, "description": "a cap"}},
        custom_sub_tools={"shared": shared},
    )
    assert rlm.complete("q", "ctx") == "root"
    child_steps = [s for s in _steps(rlm) if s.depth == 1]
    assert child_steps[0].output.strip() == "['shared']"
    root_prompt = server.requests[0]["messages"][0]["content"]
    child_prompt = server.requests[1]["messages"][0]["content"]
    assert "- shared(x: int = 1) -> int: Double x." in root_prompt
    assert "- LIMIT: int (a cap)" in root_prompt and "root_only()" in root_prompt
    assert "root_only" not in child_prompt and "shared(x: int = 1)" in child_prompt


def test_replay_answers_tool_calls_from_the_record(chat_server: ServerFactory, tmp_path: Path) -> None:
    from rlm_compat.tools.replay.replayer import replay
    from rlm_compat.tools.runs.steps import from_trajectory

    counter = iter(range(100))

    def tick() -> tuple[int, bytes]:
        return next(counter), b"\x00"

    def fail() -> None:
        raise ValueError("bad")

    code = "print(tick(), tick(), LIMITS)\ntry:\n    fail()\nexcept ValueError as e:\n    print(e)"
    server = chat_server([_fenced(code), 'FINAL("x")'])
    trajectory = tmp_path / "run.jsonl"
    tools = {"tick": tick, "fail": fail, "LIMITS": {"a": (1, 2)}}
    rlm = _rlm(server, custom_tools=tools, trajectory_path=trajectory)
    assert rlm.complete("q", "ctx") == "x"
    assert _steps(rlm)[0].output.strip() == "(0, b'\\x00') (1, b'\\x00') {'a': (1, 2)}\nbad"
    report = replay(from_trajectory(trajectory), context="ctx")
    assert report.identical, report.render()
