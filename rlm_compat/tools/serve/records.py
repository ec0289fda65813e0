"""``--trajectory-dir``: one JSON-lines file per run, redacted, and the oldest removed past the limits.

Without a retention limit a long-lived server fills its disk with records nobody reads; with one, the
directory holds at most ``keep_runs`` files and ``keep_bytes`` bytes, oldest (by modification time)
removed first, checked after each write. Runs on the server's trajectory pool (blocking file work).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ...events import TrajectoryEvent

__all__ = ["DEFAULT_KEEP_BYTES", "DEFAULT_KEEP_RUNS", "TrajectoryStore"]

DEFAULT_KEEP_RUNS = 10_000
DEFAULT_KEEP_BYTES = 1 << 30

log = logging.getLogger("rlm_compat.tools.serve")


@dataclass(frozen=True)
class TrajectoryStore:
    """Where runs' trajectories go, how they are redacted, and how many are kept."""

    directory: Path
    redact: Callable[[str], str]
    redact_texts: bool = False
    keep_runs: int = DEFAULT_KEEP_RUNS
    keep_bytes: int = DEFAULT_KEEP_BYTES

    def path(self, run_id: str) -> Path:
        return self.directory / f"{run_id}.jsonl"

    def write(self, run_id: str, events: tuple[TrajectoryEvent, ...]) -> None:
        """The run's events as JSON lines, then the oldest files removed past the limits."""
        lines = [
            self.redact(json.dumps(e.to_dict(redact=self.redact_texts), ensure_ascii=False, default=repr))
            for e in events
        ]
        self.path(run_id).write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
        self.prune()

    def prune(self) -> None:
        """Remove the oldest ``*.jsonl`` files until both limits hold."""
        files: list[tuple[int, str, int]] = []
        with os.scandir(self.directory) as entries:
            for entry in entries:
                if entry.name.endswith(".jsonl") and entry.is_file(follow_symlinks=False):
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    files.append((info.st_mtime_ns, entry.name, info.st_size))
        total = sum(size for _, _, size in files)
        count = len(files)
        files.sort()
        for _, name, size in files:
            if count <= self.keep_runs and total <= self.keep_bytes:
                break
            try:
                (self.directory / name).unlink()
            except OSError as exc:
                log.warning("trajectory retention: cannot remove %s: %s", name, exc)
                continue
            count -= 1
            total -= size
