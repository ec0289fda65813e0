"""Resource limits of a worker process: static ones at start, per-step ones before each step.

Address space and CPU time are *relative* budgets: a worker's size and CPU use after it loaded the
sandbox and received the session's data are unknown in advance, so the worker caps them per step
as "what it has now plus an allowance" (:func:`cap_address_space`, :func:`cap_cpu`). Only soft
limits move, so a later step may raise them again. Everything is a no-op where :mod:`resource`
is missing (Windows).
"""

from __future__ import annotations

import os
import signal
import sys
from typing import TYPE_CHECKING

if sys.platform != "win32":
    import resource

from ..step.repl_config import CONTEXT_ROOM

if TYPE_CHECKING:
    from ..step.repl_config import Limits

__all__ = [
    "CONTEXT_ROOM",
    "apply_static",
    "cap_address_space",
    "cap_cpu",
    "cpu_used",
    "current_address_space",
    "fast_address_space",
    "set_address_space",
    "set_cpu",
]


def _set_soft(which: int, soft: int) -> None:
    _, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY and (soft == resource.RLIM_INFINITY or soft > hard):
        soft = hard
    resource.setrlimit(which, (soft, hard))


def _set_both(which: int, value: int) -> None:
    """Soft and hard, so code in the worker cannot raise it back (lowering the hard limit is
    allowed; when the hard limit is already lower, it wins)."""
    _, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(which, (value, value))


def current_address_space() -> int | None:
    """This process's virtual size in bytes (None where it cannot be read)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        pass
    if sys.platform == "win32":
        return None
    # Elsewhere (macOS) only the peak resident size is known: a lower bound of the virtual size.
    # A cap from it is tighter than intended, never looser.
    usage = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return usage if os.uname().sysname == "Darwin" else usage * 1024


def cap_address_space(allowance_bytes: int | None) -> None:
    """Soft RLIMIT_AS = current virtual size + ``allowance_bytes`` (None: as high as the hard limit).

    One enormous allocation then fails at once with MemoryError inside the worker.
    """
    if sys.platform == "win32" or not hasattr(resource, "RLIMIT_AS"):
        return
    if allowance_bytes is None:
        _set_soft(resource.RLIMIT_AS, resource.RLIM_INFINITY)
        return
    size = current_address_space()
    if size is None:
        return
    _set_soft(resource.RLIMIT_AS, size + max(allowance_bytes, 0))


_STATM: list[int] = []


def _statm_fd() -> int:
    if not _STATM:
        _STATM.append(os.open("/proc/self/statm", os.O_RDONLY))
    return _STATM[0]


def fast_address_space() -> int | None:
    """:func:`current_address_space` from a descriptor kept open (a worker asks every step)."""
    try:
        return int(os.pread(_statm_fd(), 64, 0).split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return current_address_space()


def set_address_space(total_bytes: int) -> None:
    """Soft RLIMIT_AS = ``total_bytes`` (no-op where unsupported)."""
    if sys.platform != "win32" and hasattr(resource, "RLIMIT_AS"):
        _set_soft(resource.RLIMIT_AS, total_bytes)


def cpu_used() -> float:
    """CPU seconds this process used so far (user + system)."""
    if sys.platform == "win32":
        return 0.0
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def set_cpu(total_seconds: int) -> None:
    """Soft RLIMIT_CPU = ``total_seconds`` of this process's CPU time (no-op where unsupported)."""
    if sys.platform != "win32":
        _set_soft(resource.RLIMIT_CPU, total_seconds)


def cap_cpu(seconds: int | None) -> None:
    """Soft RLIMIT_CPU = CPU seconds used so far + ``seconds`` (None: as high as the hard limit).

    The kernel sends SIGXCPU when it is exceeded, which kills the worker: a backstop for a step
    without a wall-clock timeout.
    """
    if sys.platform == "win32":
        return
    if seconds is None:
        _set_soft(resource.RLIMIT_CPU, resource.RLIM_INFINITY)
        return
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = int(usage.ru_utime + usage.ru_stime) + 1  # the limit is whole seconds, rounded up
    _set_soft(resource.RLIMIT_CPU, used + max(seconds, 0))


def apply_static(limits: Limits) -> None:
    """The limits fixed for a worker's life: open files, file size, no core dumps.

    SIGXFSZ is ignored so a write past ``file_size_bytes`` fails with an OSError (EFBIG) that the
    code sees, instead of killing the worker.
    """
    if sys.platform == "win32":
        return
    if limits.open_files is not None:
        _set_both(resource.RLIMIT_NOFILE, limits.open_files)
    if limits.file_size_bytes is not None:
        if hasattr(signal, "SIGXFSZ"):
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        _set_both(resource.RLIMIT_FSIZE, limits.file_size_bytes)
    _set_both(resource.RLIMIT_CORE, 0)
