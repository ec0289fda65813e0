"""The child side of a worker start: what a fresh worker does before the entry function runs.

Shared by both start methods, so a worker forked by the fork server (:mod:`.zygote`) and one
started as a fresh interpreter (``"spawn"``) are indistinguishable to the entry: their own session,
killed with their parent, no inherited descriptors but the channel (moved to fd 3), no terminal
(0/1/2 are ``/dev/null``, so stray prints and warnings reach nobody), a private empty working
directory, a filtered environment, the static resource limits and the OS-level hardening of
:mod:`.hardening` (Landlock, seccomp, ``no_new_privs``, not dumpable).
"""

from __future__ import annotations

import dataclasses
import gc
import importlib
import json
import os
import signal
import socket
import sys
from collections.abc import Mapping
from typing import NoReturn

from ..step.repl_config import Limits
from .hardening import HardeningError, harden
from .rlimits import apply_static

__all__ = [
    "CHANNEL_FD",
    "EXIT_ENTRY_FAILED",
    "EXIT_HARDENING_FAILED",
    "EXIT_OUT_OF_MEMORY",
    "die_with_parent",
    "hold_inherited",
    "limits_to_json",
    "name_process",
    "prepare",
    "run_entry",
    "spawned_main",
    "take_inherited",
]

CHANNEL_FD = 3
EXIT_ENTRY_FAILED = 70
EXIT_HARDENING_FAILED = 71
EXIT_OUT_OF_MEMORY = 72
_PR_SET_PDEATHSIG = 1


_INHERITED: list[str | bytes] = []


def hold_inherited(value: str | bytes) -> None:
    """A template's value, for the workers it forks (see :mod:`.templates`)."""
    _INHERITED[:] = [value]


def take_inherited() -> str | bytes | None:
    """The value this worker inherited from its template (once; None when it has none)."""
    return _INHERITED.pop() if _INHERITED else None


_PR_SET_NAME = 15


def name_process(name: str) -> None:
    """This process's name as ``ps`` and ``/proc/PID/comm`` show it (Linux; at most 15 bytes):
    ``rlm-forkserver``, ``rlm-template`` or ``rlm-worker``, so a process list says which is which."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(
                _PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0
            )
        except (OSError, AttributeError):
            pass


def die_with_parent(expected_parent: int) -> None:
    """SIGKILL this process when the thread that started it ends (Linux; elsewhere nothing).

    The parent may have died before the request took effect: then exit now.
    """
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != expected_parent:
        os._exit(0)


def _open_fds() -> list[int]:
    for listing in ("/proc/self/fd", "/dev/fd"):
        try:
            return sorted(int(name) for name in os.listdir(listing))
        except (OSError, ValueError):
            continue
    return list(range(os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 256))


def _keep_only_channel(channel_fd: int) -> None:
    if channel_fd != CHANNEL_FD:
        os.dup2(channel_fd, CHANNEL_FD, inheritable=False)
        os.close(channel_fd)
    null = os.open(os.devnull, os.O_RDWR)
    for std in (0, 1, 2):
        if null != std:
            os.dup2(null, std)
    for fd in _open_fds():
        if fd > CHANNEL_FD:
            try:
                os.close(fd)
            except OSError:
                pass


def prepare(
    channel_fd: int,
    *,
    parent_pid: int,
    limits: Limits,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
) -> socket.socket:
    """Turn this process into a worker; returns its channel (fd 3)."""
    try:
        os.setsid()
    except (OSError, AttributeError):  # already a session leader ("spawn"), or Windows
        pass
    die_with_parent(parent_pid)
    name_process("rlm-worker")
    if hasattr(signal, "SIGCHLD"):
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    _keep_only_channel(channel_fd)
    if cwd is not None:
        os.chdir(cwd)
    if env is not None:
        os.environ.clear()
        os.environ.update(env)
    # A module first imported here must not write its bytecode cache: under a small file-size
    # limit CPython's unchecked short write would leave a truncated .pyc for every later import.
    sys.dont_write_bytecode = True
    apply_static(limits)
    # The OS-level layers (see .hardening): last, after the descriptors, directory, environment and
    # limits are set and before the entry (model code) runs. Fail closed.
    try:
        harden(workdir=os.getcwd(), writable=limits.file_size_bytes != 0)
    except HardeningError:
        os._exit(EXIT_HARDENING_FAILED)
    channel = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, 0, CHANNEL_FD)
    channel.setblocking(True)
    return channel


def run_entry(entry: str, channel: socket.socket) -> NoReturn:
    """Call ``module:function`` with the channel and leave without running any exit handlers."""
    try:
        module_name, _, function_name = entry.partition(":")
        function = getattr(importlib.import_module(module_name), function_name)
        function(channel)
    except BaseException:
        os._exit(EXIT_ENTRY_FAILED)
    os._exit(0)


def spawned_main(channel_fd: int, parent_pid: int, limits_json: str, entry: str) -> NoReturn:
    """The ``"spawn"`` start method's bootstrap (environment and cwd were set by the starter)."""
    try:
        limits = Limits(**json.loads(limits_json))
        channel = prepare(channel_fd, parent_pid=parent_pid, limits=limits)
    except BaseException:
        os._exit(EXIT_ENTRY_FAILED)
    gc.enable()  # off during the bootstrap's imports (see zygote.python_argv)
    run_entry(entry, channel)


def limits_to_json(limits: Limits) -> str:
    """The wire form of :class:`~rlm_compat.config.Limits` (plain ints and None)."""
    return json.dumps(dataclasses.asdict(limits))
