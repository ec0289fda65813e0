"""The driver protocol, against a small stand-in implementation written here (no upstream needed).

The stand-in has upstream's shape (``rlm.repl.REPLExecutor``, ``rlm.parser``, ``rlm.core.RLM``
calling ``rlm.core.litellm.acompletion``) and misbehaves on request: hangs, kills its process,
prints to the real stdout.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rlm_compat.tools.conformance.protocol import DRIVER_PATH, DriverProcess, driver_environment

_FILES = {
    "__init__.py": "from .core import RLM\n",
    "repl.py": """
        import os

        class REPLError(Exception):
            pass

        class REPLExecutor:
            def __init__(self, timeout=5, max_output_chars=2000):
                if max_output_chars < 0:
                    raise ValueError("max_output_chars must be >= 0")

            def execute(self, code, env):
                if code == "hang":
                    while True:
                        pass
                if code == "crash":
                    os._exit(3)
                if code == "noise":
                    print("garbage on stdout")
                    os.write(1, b"more garbage\\n")
                if code == "boom":
                    raise REPLError(f"boom at {hex(id(env))}")
                env["n"] = env.get("n", 0) + 1
                return f"ran {code}"
    """,
    "parser.py": """
        def extract_final(r):
            return r[6:-1] if r.startswith("FINAL(") else None

        def extract_final_var(r, env):
            return str(env[r]) if r in env else None

        def is_final(r):
            return "FINAL(" in r

        def parse_response(r, env):
            return extract_final(r) or extract_final_var(r, env)
    """,
    "core.py": """
        import asyncio
        import types

        litellm = types.SimpleNamespace(acompletion=None)

        class RLM:
            def __init__(self, model, max_iterations=2, **llm_kwargs):
                self.model, self.max_iterations, self.llm_kwargs = model, max_iterations, llm_kwargs
                self.calls = 0

            async def acompletion(self, query="", context=""):
                messages = [{"role": "user", "content": query + context}]
                for _ in range(self.max_iterations):
                    self.calls += 1
                    reply = await litellm.acompletion(model=self.model, messages=messages, **self.llm_kwargs)
                    text = reply.choices[0].message.content
                    if text.startswith("FINAL:"):
                        return text[6:]
                    messages.append({"role": "assistant", "content": text})
                raise RuntimeError("no final answer")

            def completion(self, query="", context=""):
                return asyncio.run(self.acompletion(query, context))

            @property
            def stats(self):
                return {"llm_calls": self.calls, "iterations": self.calls, "depth": 0}
    """,
}


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> DriverProcess:
    src = tmp_path_factory.mktemp("impl") / "src"
    (src / "rlm").mkdir(parents=True)
    for name, text in _FILES.items():
        (src / "rlm" / name).write_text(textwrap.dedent(text))
    process = DriverProcess(sys.executable, "ysz", paths=[str(src)], label="stand-in", step_limit=1.0)
    process.start()
    yield process
    process.stop()


def _repl(driver: DriverProcess, *steps: str, **options: float) -> dict:
    case = {"id": "repl.t.x", "steps": list(steps), "env": {"t": {"$tuple": [1]}}, "options": options}
    return driver.run("repl", [case])[0]


def test_start_describes_the_implementation(driver: DriverProcess) -> None:
    info = driver.info
    assert info["implementation"] == "ysz/recursive-llm" and info["version"] == "stand-in"
    assert info["python"] == ".".join(map(str, sys.version_info[:3]))
    assert set(info["files"]) == set(_FILES)
    assert sorted(info["kinds"]) == ["loop", "parser", "repl"]


def test_each_case_gets_a_fresh_executor_and_env(driver: DriverProcess) -> None:
    for _ in range(2):
        result = _repl(driver, "a", "b")["result"]
        assert result == {
            "steps": [
                {"output": "ran a", "env": {"t": {"$tuple": [1]}, "n": 1}},
                {"output": "ran b", "env": {"t": {"$tuple": [1]}, "n": 2}},
            ]
        }


def test_hang_is_recorded_and_stops_the_case(driver: DriverProcess) -> None:
    started = time.monotonic()
    result = _repl(driver, "a", "hang", "never")["result"]
    assert result["steps"][1:] == [{"hang": True}]
    assert time.monotonic() - started < 5
    assert _repl(driver, "after")["result"]["steps"][0]["output"] == "ran after"


def test_errors_are_recorded_with_addresses_normalised(driver: DriverProcess) -> None:
    step = _repl(driver, "boom")["result"]["steps"][0]
    assert step["error"] == {"type": "REPLError", "message": "boom at 0x?"}


def test_a_refused_option_is_a_step_error(driver: DriverProcess) -> None:
    step = _repl(driver, "a", max_output_chars=-1)["result"]["steps"]
    assert step == [
        {
            "error": {"type": "ValueError", "message": "max_output_chars must be >= 0"},
            "env": {"t": {"$tuple": [1]}},
        }
    ]


def test_a_dying_case_is_a_failure_not_a_result(driver: DriverProcess) -> None:
    reply = _repl(driver, "a", "crash")
    assert reply["failure"] == "exited with status 3"
    assert _repl(driver, "a")["result"]["steps"][0]["output"] == "ran a"


def test_stray_output_cannot_corrupt_the_protocol(driver: DriverProcess) -> None:
    assert _repl(driver, "noise")["result"]["steps"][0]["output"] == "ran noise"
    # stderr is read by its own thread: the reply on stdout can arrive before that thread has run
    deadline = time.monotonic() + 30
    while "garbage" not in driver.stderr_tail() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert "garbage" in driver.stderr_tail()


def test_parser_cases_run_in_batches(driver: DriverProcess) -> None:
    cases = [
        {"id": f"parser.t.{i}", "response": r, "env": {"v": 7}}
        for i, r in enumerate(["FINAL(x)", "v", "none"])
    ]
    results = [r["result"] for r in driver.run("parser", cases)]
    assert [r["parse_response"] for r in results] == ["x", "7", None]
    assert [r["is_final"] for r in results] == [True, False, False]


def test_loop_calls_are_captured_and_a_short_script_raises(driver: DriverProcess) -> None:
    case = {
        "id": "loop.t.x",
        "query": "q",
        "context": "c",
        "replies": ["thinking", "FINAL:42"],
        "options": {"call": "completion", "llm_kwargs": {"temperature": 0}},
    }
    result = driver.run("loop", [case])[0]["result"]
    assert result["answer"] == "42" and result["stats"]["llm_calls"] == 2
    assert result["calls"][1] == {
        "model": "test-model",
        "messages": [{"role": "user", "content": "qc"}, {"role": "assistant", "content": "thinking"}],
        "kwargs": {"temperature": 0},
    }
    short = driver.run("loop", [{**case, "replies": ["thinking"], "options": {"call": "acompletion"}}])
    assert short[0]["result"]["error"] == {
        "type": "RuntimeError",
        "message": "scripted model has no reply left: call 2, 1 scripted",
    }


def test_a_message_the_driver_cannot_act_on_is_refused_and_the_run_goes_on(driver: DriverProcess) -> None:
    failed = driver.run("nonsense", [{"id": "x.y.z"}])
    assert failed[0]["failure"] == "refused the case: ProtocolViolation: unknown case kind 'nonsense'"
    assert _repl(driver, "a")["result"]["steps"][0]["output"] == "ran a"


def test_the_script_finds_its_modules_by_path_with_rlm_compat_unimportable(tmp_path: Path) -> None:
    """``python -I -S driver.py``: no site-packages (so no rlm_compat) and, on 3.11+, not even the
    script's directory on ``sys.path``; the driver's sibling modules still load, by path, under
    their standalone package name, and nothing named ``rlm_compat`` is imported."""
    probe = (
        "import importlib.util, sys\n"
        "print(importlib.util.find_spec('rlm_compat'))\n"
        "print(sorted(m for m in sys.modules if 'rlm_compat' in m))"
    )
    messages = [
        {"type": "hello", "protocol": 1},
        {"type": "case", "kind": "repl", "case": {"id": "repl.t.probe", "steps": [probe]}},
        {"type": "bye"},
    ]
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(DRIVER_PATH), "--backend", "cpython-reference"],
        input="".join(json.dumps(m) + "\n" for m in messages),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=driver_environment(str(tmp_path)),
    )
    assert done.returncode == 0, done.stderr
    hello, result = (json.loads(line) for line in done.stdout.splitlines())
    assert hello["implementation"] == "cpython-reference", hello
    step = result["result"]["steps"][0]
    spec, loaded = step["output"].split("\n")
    assert spec == "None"
    standalone = "_rlm_compat_standalone.tools.conformance"
    assert set(ast.literal_eval(loaded)) >= {
        f"{standalone}.{m}" for m in ("case_runs", "peer_backends", "reference")
    }
    assert not [m for m in ast.literal_eval(loaded) if m.split(".")[0] == "rlm_compat"]
