"""What the parent process holds, read from /proc (for leak and harm checks in the isolation tests)."""

from __future__ import annotations

import os


def rss_mb() -> float:
    """This process's resident memory in MB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def open_fds() -> int:
    """How many file descriptors this process has open."""
    return len(os.listdir("/proc/self/fd"))
