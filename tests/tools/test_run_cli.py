"""`rlm-compat run`: context sources, --json, exit codes, progress on a terminal and in a pipe.

Every run goes through litellm to the scripted loopback server (127.0.0.1); the stdin and terminal
tests run the real console entry point in a child process.
"""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from locations import ROOT

from rlm_compat.environments import CommandResult, EnvironmentAccessError, ExecutionEnvironment
from rlm_compat.errors import BudgetExceededError, LLMCallError, MaxDepthError, MaxIterationsError
from rlm_compat.events import ModelCallFinished
from rlm_compat.record import read_trajectory
from rlm_compat.testing import Disconnect, RawReply, ScriptedChatServer, terminal_screen
from rlm_compat.tools.cli import main
from rlm_compat.tools.run_cli import ExitCode, exit_code_for
from rlm_compat.tools.shared.run_context import ContextInputError, load_context, render_files

ServerFactory = Callable[..., ScriptedChatServer]
ROOT = ROOT


def _args(server: ScriptedChatServer, *extra: str) -> list[str]:
    return ["--model", "openai/m", "--api-base", server.base_url, "--api-key", "sk-loop", *extra]


def _child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    return env


# --- context sources ---------------------------------------------------------------------------


def test_directory_is_one_string_with_a_header_per_file(
    chat_server: ServerFactory,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    logs = tmp_path / "logs"
    (logs / "old").mkdir(parents=True)
    (logs / "app.log").write_text("ERROR one\nok\n")
    (logs / "old" / "db.log").write_text("ERROR two")
    (logs / ".hidden").write_text("ERROR hidden")
    (logs / "core.bin").write_bytes(b"\x00\x01ERROR")
    server = chat_server(
        [
            "import re\nnames = re.findall(r'^==> (.+) <==$', context, flags=re.M)\n"
            "answer = f\"{type(context).__name__} {context.count('ERROR')} {names}\"",
            "FINAL_VAR(answer)",
        ]
    )
    monkeypatch.chdir(tmp_path)
    code = main(["run", "count errors", "--context-file", "logs", *_args(server, "--progress", "off")])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.out == "str 2 ['logs/app.log', 'logs/old/db.log']\n"
    assert captured.err == "rlm-compat run: skipped 1 binary file(s): logs/core.bin\n"
    system = server.messages[0][0]["content"]
    expected = render_files([("logs/app.log", "ERROR one\nok\n"), ("logs/old/db.log", "ERROR two")])
    assert f"Size: {len(expected):,} characters" in system


def test_glob_and_repeated_sources(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.log").write_text("x")
    (tmp_path / "a" / "y.txt").write_text("y")
    (tmp_path / "z.log").write_text("z")
    bundle = load_context(["**/*.log"], cwd=str(tmp_path))
    assert [p for p, _ in bundle.files] == ["a/x.log", "z.log"]
    assert bundle.text == "==> a/x.log <==\nx\n\n==> z.log <==\nz\n"
    single = load_context(["z.log"], cwd=str(tmp_path))
    assert single.text == "z" and single.files == (("z.log", 1),)
    both = load_context(["z.log", "a/y.txt"], cwd=str(tmp_path))
    assert both.text == "==> z.log <==\nz\n\n==> a/y.txt <==\ny\n"


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: None, "does not exist"),
        (lambda p: p.write_bytes(b"\xff\xfe\x00b"), "is binary"),
        (lambda p: p.write_text("  \n"), "is empty"),
        (lambda p: p.mkdir(), "holds no file"),
    ],
    ids=["missing", "binary", "empty", "empty-directory"],
)
def test_bad_inputs_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make: Callable[[Path], object], message: str
) -> None:
    target = tmp_path / "ctx"
    make(target)
    code = main(["run", "q", "--context-file", str(target), "--model", "m", "--trajectory", "t.jsonl"])
    err = capsys.readouterr().err
    assert code == ExitCode.BAD_INPUT == 2
    assert err.count("\n") == 1 and message in err and "bad input: ContextInputError" in err
    assert not (tmp_path / "t.jsonl").exists()


def test_unmatched_glob_and_binary_only_directory(tmp_path: Path) -> None:
    with pytest.raises(ContextInputError, match="matches no file"):
        load_context([str(tmp_path / "*.log")])
    (tmp_path / "b.dat").write_bytes(b"\x00")
    with pytest.raises(ContextInputError, match="only binary files"):
        load_context([str(tmp_path)])


@pytest.mark.once_per_ci  # a child process on a terminal or a pipe: what rich and signals do, not Python
def test_stdin_piped_plain_progress(chat_server: ServerFactory) -> None:
    server = chat_server(["n = context.count('a')", "FINAL_VAR(n)"])
    out = subprocess.run(
        [sys.executable, "-m", "rlm_compat", "run", "How many a?", "--context-file", "-", *_args(server)],
        input=b"banana",
        capture_output=True,
        env=_child_env(),
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == b"3\n"
    err = out.stderr.decode()
    assert "\x1b" not in err  # a pipe gets plain lines, no cursor movement or colour
    lines = err.splitlines()
    assert any("rlm-1 step 1  ok" in line for line in lines)
    assert "] done: 2 calls, " in lines[-1]


def test_empty_stdin_is_bad_input(chat_server: ServerFactory) -> None:
    server = chat_server([])
    out = subprocess.run(
        [sys.executable, "-m", "rlm_compat", "run", "q", "--context-file", "-", *_args(server)],
        input=b"",
        capture_output=True,
        env=_child_env(),
        timeout=120,
    )
    assert out.returncode == 2
    assert out.stdout == b""
    assert out.stderr.decode().strip() == (
        "rlm-compat run: bad input: ContextInputError: standard input (-) is empty; "
        "pipe the context in or name a file"
    )
    assert server.requests == []


# --- --json and exit codes -----------------------------------------------------------------------


def test_json_output_is_one_object(
    chat_server: ServerFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = chat_server(["n = context.count('a')", "FINAL_VAR(n)"])
    trajectory = tmp_path / "run.jsonl"
    argv = ["run", "How many a?", "--context", "banana", "--json", "--trajectory", str(trajectory)]
    code = main([*argv, *_args(server, "--max-calls", "5")])
    captured = capsys.readouterr()
    assert code == 0
    report = json.loads(captured.out)
    assert report["schema"] == "rlm_compat.run" and report["ok"] is True and report["exit_code"] == 0
    assert report["answer"] == "3" and report["error"] is None
    assert report["stats"]["llm_calls"] == 2
    assert report["stats"]["budget"]["max_calls"] == 5
    assert report["stats"]["total_tokens"] > 0
    assert report["trajectory"] == str(trajectory)
    assert report["context"] == {"chars": 6, "files": []}
    assert report["config"]["max_total_calls"] == 5
    _header, events = read_trajectory(trajectory)
    assert events[-1]["kind"] == "run_end"


def _failing_run(
    server: ScriptedChatServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, str, dict[str, object], list[dict[str, object]]]:
    trajectory = tmp_path / "partial.jsonl"
    argv = ["run", "q", "--context", "banana", "--json", "--trajectory", str(trajectory)]
    code = main([*argv, *_args(server, "--progress", "off", *extra)])
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    events = read_trajectory(trajectory)[1] if trajectory.exists() else []
    return code, captured.err, report, events


@pytest.mark.parametrize(
    ("script", "extra", "code", "kind", "error_type"),
    [
        (["x = 1", "y = 2", "FINAL('3')"], ("--max-calls", "2"), 3, "budget_exceeded", "BudgetExceededError"),
        (["print(1)", "print(2)"], ("--max-iterations", "2"), 4, "max_iterations", "MaxIterationsError"),
        ([RawReply(b"{not json")], ("--max-retries", "0"), 6, "provider_failure", "ProviderResponseError"),
        ([], (), 6, "provider_failure", "BadRequestError"),
    ],
    ids=["budget", "max-iterations", "malformed-reply", "http-400"],
)
def test_each_failure_has_its_exit_code_one_line_and_a_partial_trajectory(
    chat_server: ServerFactory,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    script: list[object],
    extra: tuple[str, ...],
    code: int,
    kind: str,
    error_type: str,
) -> None:
    server = chat_server(script)
    exit_code, err, report, events = _failing_run(server, tmp_path, capsys, *extra)
    assert exit_code == code
    assert err.count("\n") == 1, err
    assert err.startswith(f"rlm-compat run: {kind.replace('_', ' ')}: {error_type}")
    assert err.rstrip().endswith(f"(partial trajectory: {tmp_path / 'partial.jsonl'})")
    assert report["ok"] is False and report["exit_code"] == code and report["answer"] is None
    assert report["error"] == {"type": error_type, "message": report["error"]["message"], "kind": kind}  # type: ignore[index]
    assert events and events[-1]["kind"] == "run_error"
    assert events[-1]["data"]["error_type"] == error_type  # type: ignore[index]


def test_max_depth_exit_code(
    chat_server: ServerFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = chat_server(["FINAL('x')"])
    exit_code, err, report, _ = _failing_run(server, tmp_path, capsys, "--max-depth", "0")
    assert exit_code == ExitCode.MAX_DEPTH == 5
    assert err.startswith("rlm-compat run: max depth: MaxDepthError: Max recursion depth (0) exceeded")
    assert report["exit_code"] == 5
    assert server.requests == []


def test_bad_flag_value_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "q", "--context", "c", "--model", "m", "--max-calls", "0"]) == 2
    assert "max_calls must be a positive number" in capsys.readouterr().err


def test_live_progress_without_rich_is_a_usage_error_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """rich is the ``[cli]`` extra, not the library's: an install without it says what to add."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "rich" else real(name, *a)
    )
    assert main(["run", "q", "--context", "c", "--model", "m", "--progress", "live"]) == ExitCode.BAD_INPUT
    assert "pip install 'rlm-compat[cli]'" in capsys.readouterr().err


def test_exit_codes_are_distinct_and_classified() -> None:
    codes = [int(c) for c in ExitCode]
    assert len(codes) == len(set(codes))
    assert exit_code_for(BudgetExceededError("llm_calls", 1, 2)) is ExitCode.BUDGET_EXCEEDED
    assert exit_code_for(MaxIterationsError("x")) is ExitCode.MAX_ITERATIONS
    assert exit_code_for(MaxDepthError("x")) is ExitCode.MAX_DEPTH
    assert exit_code_for(LLMCallError("x")) is ExitCode.PROVIDER_FAILURE
    assert exit_code_for(RuntimeError("x")) is ExitCode.ERROR
    assert exit_code_for(KeyboardInterrupt()) is ExitCode.INTERRUPTED


# --- progress on a terminal ---------------------------------------------------------------------


def _run_in_pty(argv: list[str], watch: Callable[[bytes], None] | None = None) -> tuple[int, bytes, str]:
    """Run the CLI with stderr on a pseudo-terminal; returns exit code, stdout, raw terminal text.

    ``watch`` sees the terminal output so far after every read (to release a waiting reply).
    """
    master, slave = pty.openpty()
    env = {**_child_env(), "TERM": "xterm-256color", "COLUMNS": "140"}
    process = subprocess.Popen(
        [sys.executable, "-m", "rlm_compat", *argv], stdout=subprocess.PIPE, stderr=slave, env=env
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed its side
            break
        if not chunk:
            break
        chunks.append(chunk)
        if watch is not None:
            watch(b"".join(chunks))
    os.close(master)
    assert process.stdout is not None
    out = process.stdout.read()
    process.stdout.close()
    return process.wait(timeout=60), out, b"".join(chunks).decode("utf-8", "replace")


@pytest.mark.once_per_ci  # a child process on a terminal or a pipe: what rich and signals do, not Python
def test_live_progress_in_a_pseudo_terminal(chat_server: ServerFactory, tmp_path: Path) -> None:
    drawn = threading.Event()  # a status frame showing the waiting call reached the terminal
    replies = iter(["n = context.count('a')", "print(n)", "FINAL_VAR(n)"])

    def reply(request: dict[str, object]) -> str:
        if not drawn.is_set():
            drawn.wait(60)
        return next(replies)

    def watch(raw: bytes) -> None:
        if b"1 in flight" in raw:
            drawn.set()

    server = chat_server(reply)
    trajectory = tmp_path / "t.jsonl"
    try:
        code, out, raw = _run_in_pty(
            ["run", "How many a?", "--context", "banana", "--trajectory", str(trajectory), *_args(server)],
            watch,
        )
    finally:
        drawn.set()
    assert code == 0, raw
    assert out == b"3\n"  # the display never touches stdout
    assert "\x1b[2K" in raw and "\x1b[?25l" in raw  # redrawn in place, cursor hidden while live
    screen = terminal_screen(raw)
    assert screen[-1].startswith("done · iteration 3/30 · depth 0 · 0 in flight · 3 calls · ")
    assert " tokens · $- · " in screen[-1]
    assert any("rlm-1 step 1  ok" in line for line in screen)
    assert "iteration 1/30 · depth 0 · 1 in flight · 0 calls" in raw  # drawn while the call waited
    assert len(read_trajectory(trajectory)[1]) > 0


@pytest.mark.once_per_ci  # a child process on a terminal or a pipe: what rich and signals do, not Python
def test_live_failure_leaves_status_then_one_error_line(chat_server: ServerFactory) -> None:
    server = chat_server(["print(1)"])
    code, out, raw = _run_in_pty(["run", "q", "--context", "c", *_args(server, "--max-iterations", "1")])
    assert code == ExitCode.MAX_ITERATIONS
    assert out == b""
    screen = terminal_screen(raw)
    assert screen[-2].startswith("failed (MaxIterationsError) · iteration 1/1")
    assert screen[-1].startswith("rlm-compat run: max iterations: MaxIterationsError: ")


@pytest.mark.once_per_ci  # a child process on a terminal or a pipe: what rich and signals do, not Python
def test_interrupt_exits_130_and_leaves_the_partial_trajectory(
    chat_server: ServerFactory, tmp_path: Path
) -> None:
    release = threading.Event()

    def held(request: dict[str, object]) -> Disconnect:
        release.wait(60)
        return Disconnect()  # the client is gone by then: nothing to write to

    server = chat_server(held)
    trajectory = tmp_path / "t.jsonl"
    argv = [
        "run",
        "q",
        "--context",
        "c",
        "--trajectory",
        str(trajectory),
        *_args(server, "--progress", "off"),
    ]
    process = subprocess.Popen(
        [sys.executable, "-c", _AS_FOREGROUND, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**_child_env(), "PYTHONFAULTHANDLER": "1"},
    )
    try:
        while not server.requests and process.poll() is None:
            release.wait(0.05)
        out, err = _interrupt(process)
    finally:
        release.set()
    assert process.returncode == ExitCode.INTERRUPTED == 130, err.decode()[-4000:]
    assert out == b""
    assert err.decode().splitlines() == [
        f"rlm-compat run: interrupted: KeyboardInterrupt: (no message) (partial trajectory: {trajectory})"
    ]
    assert read_trajectory(trajectory)[1][-1]["kind"] == "run_error"


# ``python -m rlm_compat`` as a foreground command runs it, Ctrl-C acted on: a background job of a
# non-interactive shell (how CI may start the suite) inherits SIGINT ignored, and Python keeps it so
_AS_FOREGROUND = (
    "import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "runpy.run_module('rlm_compat', run_name='__main__', alter_sys=True)"
)


def _interrupt(process: subprocess.Popen[bytes]) -> tuple[bytes, bytes]:
    """Ctrl-C; a run still going 30 s later fails the test with its threads' stacks (faulthandler,
    on SIGABRT). Under CI's load a Ctrl-C the kernel gave to another thread used to be missed
    (tests/_loop/test_bridge.py)."""
    process.send_signal(signal.SIGINT)
    try:
        return process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGABRT)
        _, err = process.communicate(timeout=20)
        pytest.fail("rlm-compat run did not end after Ctrl-C; its stacks:\n" + err.decode()[-6000:])


def test_budget_flags_map_to_the_run_budget(
    chat_server: ServerFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    server = chat_server(["FINAL('ok')"])
    limits = ("--max-tokens", "5000", "--max-cost", "2.5", "--max-seconds", "120", "--progress", "off")
    assert main(["run", "q", "--context", "c", "--json", *_args(server, *limits)]) == 0
    budget = json.loads(capsys.readouterr().out)["stats"]["budget"]
    assert (budget["max_tokens"], budget["max_cost_usd"], budget["max_elapsed_seconds"]) == (5000, 2.5, 120)
    assert budget["max_calls"] is None


class _MemoryEnvironment(ExecutionEnvironment):
    """Files in a dict: shows the context is read through the environment, not the local disk."""

    def __init__(self, files: dict[str, str | BaseException]) -> None:
        self.files = files

    def run_command(self, command: str, timeout: float | None = None) -> CommandResult:
        raise EnvironmentAccessError("no commands here")

    def read_file(self, path: str) -> str:
        value = self.files.get(path)
        if value is None:
            raise EnvironmentAccessError(f"cannot read {path!r}") from IsADirectoryError(path)
        if isinstance(value, BaseException):
            try:
                raise value
            except BaseException:
                raise EnvironmentAccessError(f"cannot read {path!r}: {value}") from None
        return value

    def write_file(self, path: str, content: str) -> None:
        raise EnvironmentAccessError("read-only")

    def list_directory(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        names = {p[len(prefix) :].split("/")[0] for p in self.files if p.startswith(prefix)}
        if not names:
            try:
                raise NotADirectoryError(path)
            except NotADirectoryError:
                raise EnvironmentAccessError(f"cannot list {path!r}") from None
        return sorted(names)

    def file_exists(self, path: str) -> bool:
        return path in self.files or any(p.startswith(path.rstrip("/") + "/") for p in self.files)


def test_context_is_read_through_the_execution_environment() -> None:
    env = _MemoryEnvironment(
        {"/srv/logs/a.log": "alpha", "/srv/logs/deep/b.log": "beta", "/srv/secret": PermissionError("denied")}
    )
    bundle = load_context(["logs"], environment=env, cwd="/srv")
    assert bundle.text == "==> logs/a.log <==\nalpha\n\n==> logs/deep/b.log <==\nbeta\n"
    assert load_context(["/srv/logs/**/b.log"], environment=env, cwd="/").files == (
        ("srv/logs/deep/b.log", 4),
    )
    with pytest.raises(ContextInputError, match="cannot read context file 'secret': denied"):
        load_context(["secret"], environment=env, cwd="/srv")


def test_directory_symlinks_are_not_followed(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f.txt").write_text("text")
    (tmp_path / "d" / "up").symlink_to(tmp_path)
    bundle = load_context([str(tmp_path)], cwd=str(tmp_path))
    assert bundle.files == (("d/f.txt", 4),)


def test_run_progress_follows_depth_calls_and_iterations(chat_server: ServerFactory) -> None:
    from rlm_compat import RLM
    from rlm_compat.tools.runs.live import RunProgress

    def reply(request: dict[str, object]) -> str:
        messages = request["messages"]
        assert isinstance(messages, list)
        system = str(messages[0]["content"])
        if "Depth: 1" in system:
            return "FINAL('child answer')"
        return "x = recursive_llm('sub question', context[:3])" if len(messages) == 2 else "FINAL_VAR('x')"

    server = chat_server(reply)
    progress = RunProgress()
    seen: list[str] = []
    rlm = RLM("openai/m", api_base=server.base_url, api_key="k", max_iterations=7)
    rlm.observers.extend([progress, lambda event: seen.append(progress.status())])
    assert rlm.complete("q", "context") == "child answer"
    assert progress.calls == 3 and progress.in_flight == 0 and progress.max_depth_seen == 1
    assert any(s.startswith("iteration 1/7 · depth 1 · 1 in flight · 1 calls") for s in seen)
    # at the end, depth is the deepest reached
    assert seen[-1].startswith("done · iteration 2/7 · depth 1 · 0 in flight · 3 calls · ")
    assert progress.tokens == sum(
        e.total_tokens or 0 for e in rlm.trajectory if isinstance(e, ModelCallFinished)
    )


def test_terminal_screen_applies_redraws() -> None:
    raw = "\x1b[?25l\x1b[36m⠋\x1b[0m status 1\r\x1b[2Kstep line\r\n⠙ status 2\r\x1b[2K\x1b[32mdone\x1b[0m\r\n\x1b[?25h"
    assert terminal_screen(raw) == ["step line", "done"]
    assert terminal_screen("one\r\ntwo\r\n\x1b[1A\x1b[2Knew") == ["one", "new"]
    assert terminal_screen("one\r\ntwo\x1b[1A\rONE") == ["ONE", "two"]


def test_a_run_replays_from_its_own_context_directory(
    chat_server: ServerFactory,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # `replay --context-file` takes what `run --context-file` took (it refused a directory)
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "app.log").write_text("ERROR one\nok\n")
    (logs / "db.log").write_text("ERROR two\nERROR three\n")
    server = chat_server(["```python\nn = context.count('ERROR')\n```", "FINAL_VAR(n)"])
    monkeypatch.chdir(tmp_path)
    argv = ["run", "count errors", "--context-file", "logs", "--trajectory", "run.jsonl"]
    assert main([*argv, *_args(server, "--progress", "off")]) == 0
    assert capsys.readouterr().out == "3\n"
    assert main(["replay", "run.jsonl", "--context-file", "logs"]) == 0
    assert "identical" in capsys.readouterr().out
    # the same files under another name are another context: the replay says so, exit 2
    (tmp_path / "elsewhere").mkdir()
    for log in logs.iterdir():
        (tmp_path / "elsewhere" / log.name).write_text(log.read_text())
    assert main(["replay", "run.jsonl", "--context-file", "elsewhere"]) == 2
    assert "characters" in capsys.readouterr().err
    assert main(["replay", "run.jsonl", "--context-file", "missing-dir"]) == 2
    assert "missing-dir" in capsys.readouterr().err


def test_a_tool_from_the_command_line_runs_in_this_process(
    chat_server: ServerFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    module = f"runtools_{os.getpid()}_{id(tmp_path)}"
    (tmp_path / f"{module}.py").write_text(
        "import os\n\ndef where(tag: str) -> str:\n    '''Where it ran.'''\n    return f'{tag}:{os.getpid()}'\n",
        encoding="utf-8",
    )
    (tmp_path / f"{module}_broken.py").write_text("raise RuntimeError('boom at import')\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    server = chat_server(["FINAL(here('t'))"])
    argv = ["run", "q", "--context", "c", "--tool", f"here={module}:where", "--progress", "off"]
    assert main([*argv, *_args(server)]) == 0
    assert capsys.readouterr().out.strip() == f"t:{os.getpid()}"
    assert "- here(tag: str) -> str: Where it ran." in server.requests[0]["messages"][0]["content"]
    for bad in (
        f"{module}",
        f"{module}:nothing",
        "no_such_module_xyz:f",
        f"print={module}:where",
        f"{module}_broken:f",
    ):
        assert main(["run", "q", "--context", "c", "--tool", bad, *_args(server)]) == ExitCode.BAD_INPUT, bad
        assert "tool" in capsys.readouterr().err
