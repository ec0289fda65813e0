"""LocalExecutionEnvironment: real shell, real files, filtered environment, enforced timeouts."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlm_compat.environments import (
    EnvironmentAccessError,
    ExecutionEnvironment,
    LocalExecutionEnvironment,
    filter_env_vars,
)


@pytest.fixture
def local(tmp_path: Path) -> LocalExecutionEnvironment:
    return LocalExecutionEnvironment(
        tmp_path,
        env_vars={
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path),
            "OPENAI_API_KEY": "sk-x",
            "GITHUB_TOKEN": "t",
            "LANG": "C.UTF-8",
            "MY_SETTING": "1",
        },
    )


def test_is_an_execution_environment(local: LocalExecutionEnvironment) -> None:
    assert isinstance(local, ExecutionEnvironment)


def test_secrets_never_reach_commands(local: LocalExecutionEnvironment) -> None:
    result = local.run_command("env")
    assert result.ok
    names = {line.split("=", 1)[0] for line in result.stdout.splitlines()}
    assert "OPENAI_API_KEY" not in names and "GITHUB_TOKEN" not in names and "MY_SETTING" not in names
    assert {"PATH", "HOME", "LANG"} <= names


def test_extra_allowlist_cannot_unblock_secrets(tmp_path: Path) -> None:
    env = LocalExecutionEnvironment(
        tmp_path, env_vars={"MY_SETTING": "1", "MY_API_KEY": "x"}, extra_allowed_env=["MY_*"]
    )
    assert env.env_vars == {"MY_SETTING": "1"}


@given(st.dictionaries(st.from_regex(r"[A-Z_]{1,12}", fullmatch=True), st.text(max_size=5)))
def test_filter_never_passes_sensitive_names(source: dict[str, str]) -> None:
    kept = filter_env_vars(source, extra_allowed=["*"])
    for name in kept:
        assert not any(word in name for word in ("KEY", "TOKEN", "SECRET", "PASSWORD", "AUTH"))


def test_run_command_reports_exit_and_streams(local: LocalExecutionEnvironment) -> None:
    result = local.run_command("echo out; echo err >&2; exit 3")
    assert (result.exit_code, result.stdout, result.stderr, result.ok) == (3, "out\n", "err\n", False)


def test_timeout_kills_the_process_group(local: LocalExecutionEnvironment) -> None:
    started = time.perf_counter()
    result = local.run_command("sleep 30 & sleep 30; echo never", timeout=0.5)
    assert result.timed_out and not result.ok
    assert "never" not in result.stdout
    assert time.perf_counter() - started < 10


def test_files_round_trip(local: LocalExecutionEnvironment) -> None:
    local.write_file("a/b.txt", "héllo")
    assert local.read_file("a/b.txt") == "héllo"
    assert local.file_exists("a/b.txt") and not local.file_exists("a/c.txt")
    assert local.list_directory("a") == ["b.txt"]
    assert local.run_command("cat a/b.txt").stdout == "héllo"


@pytest.mark.parametrize("path", ["../outside.txt", "/etc/passwd", "a/../../x"])
def test_paths_cannot_leave_the_working_directory(local: LocalExecutionEnvironment, path: str) -> None:
    with pytest.raises(EnvironmentAccessError, match="leaves the working directory"):
        local.read_file(path)
    assert not local.file_exists(path)


def test_missing_file_is_typed(local: LocalExecutionEnvironment) -> None:
    with pytest.raises(EnvironmentAccessError, match=r"cannot read 'nope\.txt'"):
        local.read_file("nope.txt")


def test_missing_working_directory_is_typed(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentAccessError, match="does not exist"):
        LocalExecutionEnvironment(tmp_path / "absent")
