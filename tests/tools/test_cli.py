"""The console script: --version, --help, profiles table, run against a loopback server."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from rlm_compat import __version__
from rlm_compat.profiles import QUIRKS, UPSTREAM_OFF
from rlm_compat.testing import ScriptedChatServer
from rlm_compat.tools.cli import main

ServerFactory = Callable[..., ScriptedChatServer]


def test_version_via_module() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "rlm_compat", "--version"], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == f"rlm-compat {__version__}"


def test_help_lists_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for command in ("run", "profiles", "dropin-tests", "conformance", "record"):
        assert command in text


def test_profiles_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profiles"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 + len(QUIRKS)
    for quirk, line in zip(QUIRKS, lines[1:], strict=True):
        name, fixed, upstream, doc = line.split(maxsplit=3)
        on_in_upstream = "off" if quirk in UPSTREAM_OFF else "on"  # upstream runs in the worker too
        assert (name, fixed, upstream) == (quirk, "off", on_in_upstream)
        assert doc


def test_run_against_loopback(
    chat_server: ServerFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = chat_server(["n = context.count('a')", "FINAL_VAR(n)"])
    context = tmp_path / "ctx.txt"
    context.write_text("banana")
    code = main(
        [
            "run",
            "How many a?",
            "--context-file",
            str(context),
            "--model",
            "openai/m",
            "--api-base",
            server.base_url,
            "--api-key",
            "sk-loop",
            "--stats",
        ]
    )
    captured = capsys.readouterr()
    assert code == 0
    assert captured.out.strip() == "3"
    assert "'llm_calls': 2" in captured.err


def test_run_missing_context_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "q", "--context-file", str(tmp_path / "nope"), "--model", "m"]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_dropin_rejects_non_checkout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dropin-tests", str(tmp_path)]) == 1
    assert "does not look like a ysz/recursive-llm checkout" in capsys.readouterr().err
