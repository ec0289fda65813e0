"""What ``rlm-compat view`` was given, and the readers that turn trajectory files into the view's model.

A trajectory reader takes a path and returns a :class:`~rlm_compat.tools.view.model.TrajectoryModel`, or
``None`` when the file is not in its format; :func:`register_reader` adds one, and
:func:`read_trajectory_model` asks each in turn. ``rlms`` logs and dspy.RLM trajectories come
registered: read by the same importer as ``rlm-compat replay`` (:mod:`rlm_compat.tools.view.recorded`).
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
    from ...record.trajectory import SCHEMA_NAME, read_trajectory

    first = _first_line(path)
    if first is None or first.get("schema") != SCHEMA_NAME:
        return None
    try:
        header, events = read_trajectory(path)
    except ValueError as exc:
        raise ViewInputError(str(exc)) from None
    return from_events(header, events, title=f"trajectory {path.name}")


def _read_rlms(path: Path) -> TrajectoryModel | None:
    """``rlms``' JSONL logs, read by the importer ``rlm-compat replay`` uses (tools/formats/)."""
    from .recorded import read_rlms

    return read_rlms(path)


def _read_dspy(path: Path) -> TrajectoryModel | None:
    """dspy.RLM trajectories, read by the importer ``rlm-compat replay`` uses (tools/formats/)."""
    from .recorded import read_dspy

    return read_dspy(path)


READERS: dict[str, TrajectoryReader] = {
    "rlm_compat": _read_rlm_compat,
    "rlms": _read_rlms,
    "dspy": _read_dspy,
}


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
        "rlm_compat's own files start with a header line naming schema 'rlm_compat.trajectory', "
        "rlms logs with a type metadata/iteration line, dspy.RLM's are code/output entries"
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
        if isinstance(data, list) or (
            isinstance(data, dict) and ("trajectory" in data or "repl_trajectory" in data)
        ):
            return "trajectory"  # a dspy.RLM trajectory or prediction; its reader decides
        raise ViewInputError(
            f"{path}: a JSON file that is not `rlm-compat conformance --json` output "
            "(no 'implementations' and 'python' keys) nor a dspy.RLM trajectory (a list of entries, "
            "or an object with 'trajectory')"
        )
    return "trajectory"
