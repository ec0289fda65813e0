"""Escape-assumed tests: plain Python in a hardened worker, as if RestrictedPython were escaped.

Every program of the built-in corpus must be stopped, on this machine's kernel, by a permission
check. Mutation checks prove each program is a real attempt stopped for the right reason: with
every layer off each one *succeeds* (so none passes by failing for an unrelated cause), and with
the layers that are meant to stop it switched off, it gets through.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from rlm_compat.sandbox.isolate import hardening
from rlm_compat.tools.escape_assumed import CORPUS, Program, parse_programs, run_programs

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux hardening")

BY_NAME = {program.name: program for program in CORPUS}
ALL_LAYERS = set(hardening.LAYERS)
NEEDS_ROOT = {
    "list_root",
    "list_real_home",
    "parent_mem_file",
    "other_worker_memory",
    "ptrace_parent",
    "parent_vm_readv",
    "parent_process_madvise",  # CAP_SYS_NICE for another process's memory
}
"""Programs only root gets through with their layers off (the kernel's own checks stop a user)."""


@pytest.fixture(autouse=True)
def _fresh_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(hardening.DISABLE_ENV, raising=False)


def test_this_host_gives_every_layer() -> None:
    """CI's kernel has Landlock ABI >= 6 and libseccomp: every layer must be active by default."""
    if os.environ.get("RLM_COMPAT_CI") != "1" and hardening.landlock_abi() < 6:
        pytest.skip("an older kernel: the layers it has are tested below")
    assert set(hardening.available_layers()) == ALL_LAYERS


def test_every_program_is_stopped() -> None:
    verdicts = run_programs(CORPUS)
    lines = [v.line() for v in verdicts]
    assert all(v.stopped for v in verdicts), "\n".join(lines)
    for verdict in verdicts:
        assert set(verdict.layers) == set(hardening.available_layers())
        assert set(verdict.program.layers) & set(verdict.layers), verdict.line()


def test_a_spawned_worker_is_hardened_too() -> None:
    """The "spawn" start method: a fresh interpreter that builds its own filter and rules."""
    names = ["read_home_secret", "other_worker_files", "exec_shell", "fork", "tcp_loopback", "signal_parent"]
    verdicts = run_programs([BY_NAME[name] for name in names], start_method="spawn")
    assert all(v.stopped for v in verdicts), "\n".join(v.line() for v in verdicts)
    assert all(set(v.layers) == set(hardening.available_layers()) for v in verdicts)


def test_with_every_layer_off_every_program_gets_through(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mutation check of the whole corpus: each attempt works when nothing stops it."""
    monkeypatch.setenv(hardening.DISABLE_ENV, "all")
    verdicts = run_programs(CORPUS)
    got_through = [v for v in verdicts if not v.stopped]
    missing = {v.program.name for v in verdicts if v.stopped}
    if os.geteuid() != 0:
        missing -= NEEDS_ROOT
    assert not missing, "\n".join(v.line() for v in verdicts if v.program.name in missing)
    assert all(v.layers == () for v in got_through)


@pytest.mark.parametrize(
    ("off", "through"),
    [
        # a layer that alone stops a program: switched off, that program gets out
        (
            "landlock-fs",
            {"read_home_secret", "list_slash", "proc_root_link", "write_outside", "other_worker_files"},
        ),
        (
            "seccomp",
            {
                "fork",
                "udp_socket",
                "new_namespace",
                "dumpable_again",
                "parent_process_madvise",
                "parent_rlimit",
                "renice_parent",
                "chmod_home_secret",
            },
        ),
        # two layers stop TCP: off together, the connection is made
        ("seccomp,landlock-net", {"tcp_loopback"}),
        ("landlock-scope", {"signal_other_worker"}),
        ("landlock-scope,seccomp", {"signal_parent", "signal_host"}),
        ("seccomp,landlock-fs,landlock-net,landlock-scope", {"exec_shell"}),
    ],
)
def test_switching_a_layer_off_lets_its_programs_out(
    monkeypatch: pytest.MonkeyPatch, off: str, through: set[str]
) -> None:
    monkeypatch.setenv(hardening.DISABLE_ENV, off)
    if os.geteuid() != 0:
        through = through - NEEDS_ROOT
    verdicts = run_programs([BY_NAME[name] for name in sorted(through)])
    assert not any(v.stopped for v in verdicts), "\n".join(v.line() for v in verdicts)
    for verdict in verdicts:
        assert not set(off.split(",")) & set(verdict.layers)


def test_defence_in_depth_one_layer_off_still_stops(monkeypatch: pytest.MonkeyPatch) -> None:
    """Programs stopped by two layers stay stopped with either one off."""
    for off, names in (
        ("seccomp", ["tcp_loopback", "exec_shell", "signal_parent", "signal_host"]),
        ("landlock-net", ["tcp_loopback"]),
        ("landlock-scope", ["signal_parent", "signal_host"]),
    ):
        monkeypatch.setenv(hardening.DISABLE_ENV, off)
        verdicts = run_programs([BY_NAME[name] for name in names])
        assert all(v.stopped for v in verdicts), "\n".join(v.line() for v in verdicts)


def test_a_program_failing_otherwise_is_not_counted_as_stopped() -> None:
    programs = [
        Program("missing", "open a file that does not exist", "open('/nonexistent/x')\n"),
        Program("fine", "do nothing", "x = 1\n"),
    ]
    verdicts = run_programs(programs)
    assert [v.stopped for v in verdicts] == [False, False]
    assert "not by a permission check" in verdicts[0].how
    assert "ran to the end" in verdicts[1].how


def test_parse_programs_splits_blocks() -> None:
    text = "# read a secret\nopen('/etc/shadow').read()\n# ---\nimport os\nos.listdir('/')\n# ---\n\n"
    programs = parse_programs(text, "audit.py")
    assert [p.name for p in programs] == ["audit.py#1", "audit.py#2"]
    assert programs[0].tried == "read a secret"
    assert programs[1].code == "import os\nos.listdir('/')\n"


def test_doctor_command_runs_a_file(tmp_path: os.PathLike[str]) -> None:
    """`rlm-compat doctor --escape-assumed FILE`: one line per program, exit 1 if one got out."""
    path = os.path.join(os.fspath(tmp_path), "programs.py")
    with open(path, "w") as f:
        f.write("# list /\nimport os; os.listdir('/')\n# ---\n# compute\nx = 2 + 2\n")
    run = subprocess.run(
        [sys.executable, "-m", "rlm_compat", "doctor", "--escape-assumed", path],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    lines = [line.strip() for line in run.stdout.splitlines() if line.strip().startswith("programs.py#")]
    assert len(lines) == 2, run.stdout
    assert "stopped by landlock" in lines[0] and "NOT STOPPED" not in lines[0]
    assert "NOT STOPPED" in lines[1]
    assert "landlock-fs" in run.stdout  # the layer table comes first


def test_the_run_record_names_the_active_layers(monkeypatch: pytest.MonkeyPatch) -> None:
    from rlm_compat import RLM
    from rlm_compat.settings.run_config import run_config

    def config(isolation: str) -> dict[str, object]:
        rlm = RLM("m", isolation=isolation)
        return run_config(rlm.settings, rlm.client)

    assert config("process")["hardening"] == list(hardening.available_layers())
    assert config("inline")["hardening"] == []
    monkeypatch.setenv(hardening.DISABLE_ENV, "seccomp")
    layers = config("process")["hardening"]
    assert "seccomp" not in layers and "no_new_privs" in layers


def test_doctor_lists_the_layers(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from rlm_compat.tools.cli import main

    monkeypatch.setenv(hardening.DISABLE_ENV, "landlock-net")
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    hardening_part, _, sharing_part = out.partition("context sharing on this host:")
    rows = {line.split()[0]: line for line in hardening_part.splitlines()[1:] if line.strip()}
    assert set(rows) == ALL_LAYERS
    assert sharing_part.split()[:2] == ["templates", "active"]  # fork and descriptor passing here
    assert "switched off" in rows["landlock-net"] and " absent " in rows["landlock-net"]
    for layer in set(hardening.available_layers()):
        assert " active " in rows[layer]


def test_a_layer_that_cannot_be_set_up_fails_closed() -> None:
    """The host promised seccomp, the worker cannot build it: harden() raises, the worker would exit."""
    code = (
        "import os\n"
        "from rlm_compat.sandbox.isolate import hardening\n"
        "hardening._seccomp_module = lambda: None\n"
        "try:\n"
        "    hardening.harden(layers=('no_new_privs', 'seccomp'))\n"
        "except hardening.HardeningError:\n"
        "    os._exit(7)\n"
        "os._exit(1)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    assert run.returncode == 7, run.stderr


@pytest.mark.parametrize("off", ["", "all"])
def test_a_repl_session_runs_with_every_layer_and_with_none(
    monkeypatch: pytest.MonkeyPatch, off: str
) -> None:
    from rlm_compat import REPLExecutor

    monkeypatch.setenv(hardening.DISABLE_ENV, off)
    env: dict[str, object] = {"context": "a\nb\nc"}
    repl = REPLExecutor(isolation="process")
    try:
        code = "import re, json, datetime\nlines = context.split('\\n')\nprint(len(lines), datetime.date(2024, 1, 2))"
        assert repl.execute(code, env) == "3 2024-01-02"
        assert env["lines"] == ["a", "b", "c"]
    finally:
        repl.close()


def test_a_worker_that_could_not_harden_says_so(tmp_path: os.PathLike[str]) -> None:
    import socket

    from rlm_compat.sandbox.isolate.spawn import WorkerHandle
    from rlm_compat.sandbox.isolate.workerinit import EXIT_HARDENING_FAILED

    process = subprocess.Popen([sys.executable, "-c", f"import os; os._exit({EXIT_HARDENING_FAILED})"])
    process.wait()
    mine, theirs = socket.socketpair()
    theirs.close()
    handle = WorkerHandle(process.pid, mine, os.path.join(os.fspath(tmp_path), "w"), process=process)
    try:
        assert "could not apply its OS hardening" in handle.exit_description()
    finally:
        handle.close()
