"""What ``rlm-compat view`` was given, and the readers that turn trajectory files into the view's model.

A trajectory reader takes a path and returns a :class:`~rlm_compat.view.model.TrajectoryModel`, or
``None`` when the file is not in its format; :func:`register_reader` adds one (an importer of rlms
or dspy.RLM logs registers itself there), and :func:`read_trajectory_model` asks each in turn.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from .model import TrajectoryModel, ViewInputError, from_events

__all__ = ["READERS", "detect", "read_trajectory_model", "register_reader"]

TrajectoryReader = Callable[[Path], "TrajectoryModel | None"]


def _read_rlm_compat(path: Path) -> TrajectoryModel | None:
    """rlm_compat's own JSONL (docs/trajectory.md); ``None`` if the first line is not its header."""
    from ..record.trajectory import SCHEMA_NAME, read_trajectory

    first = _first_line(path)
    if first is None or first.get("schema") != SCHEMA_NAME:
        return None
    try:
        header, events = read_trajectory(path)
    except ValueError as exc:
        raise ViewInputError(str(exc)) from None
    return from_events(header, events, title=f"trajectory {path.name}")


READERS: dict[str, TrajectoryReader] = {"rlm_compat": _read_rlm_compat}


def register_reader(name: str, reader: TrajectoryReader) -> None:
    """Add a trajectory format (tried after those already registered)."""
    READERS[name] = reader


def read_trajectory_model(path: Path) -> TrajectoryModel:
    """The first registered reader's model of ``path``; ViewInputError when no reader knows it."""
    if not path.is_file():
        raise ViewInputError(f"{path}: no such trajectory file")
    for reader in READERS.values():
        model = reader(path)
        if model is not None:
            return model
    raise ViewInputError(
        f"{path}: not a trajectory in a known format ({', '.join(READERS)}); "
        "rlm_compat's own files start with a header line naming schema 'rlm_compat.trajectory'"
    )


def _first_line(path: Path) -> dict[str, object] | None:
    try:
        with path.open(encoding="utf-8") as stream:
            line = stream.readline()
    except (OSError, UnicodeDecodeError):
        return None
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def detect(path: Path) -> str:
    """What ``path`` holds: ``"compare"`` (a directory with runs.jsonl), ``"conformance"``
    (``conformance --json`` output) or ``"trajectory"`` (any other file: the readers decide)."""
    if path.is_dir():
        if (path / "runs.jsonl").is_file():
            return "compare"
        raise ViewInputError(f"{path} is a directory without runs.jsonl: not an `rlm-compat compare` output")
    if not path.exists():
        raise ViewInputError(f"{path}: no such file or directory")
    if path.suffix == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ViewInputError(f"{path}: not readable JSON ({exc})") from None
        if isinstance(data, dict) and "implementations" in data and "python" in data:
            return "conformance"
        raise ViewInputError(
            f"{path}: a JSON file that is not `rlm-compat conformance --json` output "
            "(no 'implementations' and 'python' keys)"
        )
    return "trajectory"
