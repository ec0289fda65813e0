"""The trajectory file: one JSON line per event, written as it happens, under a versioned schema.

Line 1 is a header (``{"schema": "rlm_compat.trajectory", "schema_version": 1, ...}``); every other
line is one :class:`~rlm_compat.events.TrajectoryEvent` as :meth:`~TrajectoryEvent.to_dict` gives
it. Each line is flushed when written, so a run that dies — the provider gone, the process killed —
leaves a valid file up to its last event. ``redact=True`` keeps the length of every text (query,
replies, code, output, answers, message contents) instead of the text itself. The JSON Schema of a
line is :func:`json_schema` (shipped as ``trajectory.schema.json``, documented in
docs/trajectory.md). :func:`recorded_calls` turns a trajectory back into the calls it made, which
:meth:`rlm_compat.clients.ReplayClient.from_trajectory` answers from.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import threading
import types
import typing
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from ..errors import ConfigurationError, TrajectoryError
from ..events import CONTENT_FIELDS, EVENT_TYPES, TrajectoryEvent

__all__ = [
    "SCHEMA_NAME",
    "SCHEMA_PATH",
    "SCHEMA_VERSION",
    "TrajectoryWriter",
    "json_schema",
    "read_trajectory",
    "read_trajectory_lines",
    "recorded_calls",
]

SCHEMA_NAME = "rlm_compat.trajectory"
SCHEMA_VERSION = 1
SCHEMA_PATH = Path(__file__).with_name("trajectory.schema.json")

_open_lock = threading.Lock()
_open_paths: set[str] = set()


class TrajectoryWriter:
    """Observer writing a run's events to ``path`` (created or truncated) as JSON lines.

    ``{run}`` in the path is replaced by the run's id, so runs of one RLM — also concurrent ones —
    each get a file. Two live runs never share a file: opening a path another writer still holds
    raises ConfigurationError instead of interleaving two runs' lines.
    """

    def __init__(self, path: str | os.PathLike[str], *, redact: bool = False, run_id: str = "") -> None:
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self.path = Path(str(path).replace("{run}", self.run_id))
        self.redact = redact
        self._lock = threading.Lock()
        key = str(self.path.absolute())
        with _open_lock:
            if key in _open_paths:
                raise ConfigurationError(
                    f"trajectory file {self.path} is being written by another run; "
                    "put {run} in trajectory_path to give every run its own file"
                )
            try:
                self._stream: IO[str] | None = self.path.open("w", encoding="utf-8", newline="\n")
            except OSError as exc:
                raise ConfigurationError(f"cannot write the trajectory file {self.path}: {exc}") from None
            _open_paths.add(key)
        self._key = key
        self._write(
            {
                "schema": SCHEMA_NAME,
                "schema_version": SCHEMA_VERSION,
                "run_id": self.run_id,
                "created_at": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                "redacted": redact,
            }
        )

    def __call__(self, event: TrajectoryEvent) -> None:
        self._write(event.to_dict(redact=self.redact))

    def close(self) -> None:
        """Close the file (later events are dropped)."""
        with self._lock:
            if self._stream is not None:
                self._stream.close()
                self._stream = None
                with _open_lock:
                    _open_paths.discard(self._key)

    def _write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=repr)
        with self._lock:
            if self._stream is not None:
                self._stream.write(line + "\n")
                self._stream.flush()


def read_trajectory(path: str | os.PathLike[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header and event records of a trajectory file (checks the schema name and version).

    A file that is not one — empty, another schema, a line that is not a JSON object (a run killed
    mid-write leaves a cut last line) — raises :class:`~rlm_compat.errors.TrajectoryError` naming
    the line.
    """
    header, numbered = read_trajectory_lines(path)
    return header, [record for _, record in numbered]


def read_trajectory_lines(
    path: str | os.PathLike[str],
) -> tuple[dict[str, Any], list[tuple[int, dict[str, Any]]]]:
    """As :func:`read_trajectory`, each event with its 1-based line number (for error messages)."""
    lines = json_lines(path)
    if not lines:
        raise TrajectoryError(f"{path}: empty file, not a trajectory")
    _, header = lines[0]
    if header.get("schema") != SCHEMA_NAME or header.get("schema_version") != SCHEMA_VERSION:
        raise TrajectoryError(
            f"{path}: line 1: header names schema {header.get('schema')!r} version "
            f"{header.get('schema_version')!r}; this rlm_compat reads {SCHEMA_NAME!r} "
            f"version {SCHEMA_VERSION}"
        )
    events = lines[1:]
    for number, record in events:
        missing = [k for k in ("kind", "node_id", "data") if k not in record]
        if missing or not isinstance(record.get("data"), dict):
            raise TrajectoryError(
                f"{path}: line {number}: not a trajectory event (missing {missing or ['data object']})"
            )
    return header, events


def json_lines(path: str | os.PathLike[str]) -> list[tuple[int, dict[str, Any]]]:
    """The non-blank lines of a JSON-lines file as objects, each with its line number."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TrajectoryError(f"{path}: cannot read the file: {exc}") from None
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TrajectoryError(
                f"{path}: line {number}: truncated or corrupt JSON at column {exc.colno} ({exc.msg})"
            ) from None
        if not isinstance(record, dict):
            raise TrajectoryError(f"{path}: line {number}: a JSON {type(record).__name__}, not an object")
        records.append((number, record))
    return records


def recorded_calls(events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each answered model call of a trajectory as ``{"model", "messages", "reply"}``, in order.

    A call's full message list is rebuilt from the ``messages`` deltas of its RLM node's earlier
    calls (a leaf call's list is complete). Redacted trajectories hold no texts and cannot be
    replayed: they raise ValueError.
    """
    conversations: dict[str, list[dict[str, Any]]] = {}
    started: dict[str, dict[str, Any]] = {}
    calls: list[dict[str, Any]] = []
    for event in events:
        data = event["data"]
        if event["kind"] == "model_call_start":
            messages = [dict(m) for m in data["messages"]]
            if any(not isinstance(m.get("content"), str) for m in messages):
                raise ValueError("a redacted trajectory keeps no message texts and cannot be replayed")
            if not data["is_leaf"]:
                messages = conversations.setdefault(event["parent_id"], []) + messages
                conversations[event["parent_id"]] = messages
            started[event["node_id"]] = {"model": data["model"], "messages": messages}
        elif event["kind"] == "model_call_end" and event["node_id"] in started:
            reply = data["reply"]
            if not isinstance(reply, str):
                raise ValueError("a redacted trajectory keeps no replies and cannot be replayed")
            calls.append({**started.pop(event["node_id"]), "reply": reply})
    return calls


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of one trajectory line, derived from the event classes."""
    text_or_redacted: dict[str, Any] = {
        "oneOf": [{"type": "string"}, {"$ref": "#/$defs/redacted"}],
    }
    message = {
        "type": "object",
        "required": ["role", "content"],
        "properties": {"role": {"type": "string"}, "content": text_or_redacted},
    }
    events = []
    for kind, cls in sorted(EVENT_TYPES.items()):
        hints = typing.get_type_hints(cls)
        fields = [f.name for f in dataclasses.fields(cls) if f.name not in _ENVELOPE]
        properties = {
            name: (
                {"type": "array", "items": message}
                if name == "messages"
                else text_or_redacted
                if name in CONTENT_FIELDS
                else _json_type(hints[name])
            )
            for name in fields
        }
        data = {
            "type": "object",
            "required": fields,
            "properties": properties,
            "additionalProperties": False,
        }
        events.append(
            {
                "description": (cls.__doc__ or "").strip().splitlines()[0],
                "properties": {"kind": {"const": kind}, "data": data},
            }
        )
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://rlm-compat.invalid/schemas/trajectory-v{SCHEMA_VERSION}.json",
        "title": f"{SCHEMA_NAME} line, schema version {SCHEMA_VERSION}",
        "oneOf": [{"$ref": "#/$defs/header"}, {"$ref": "#/$defs/event"}],
        "$defs": {
            "redacted": {
                "type": "object",
                "required": ["chars"],
                "properties": {"chars": {"type": "integer", "minimum": 0}},
                "additionalProperties": False,
            },
            "header": {
                "type": "object",
                "required": ["schema", "schema_version", "run_id", "created_at", "redacted"],
                "properties": {
                    "schema": {"const": SCHEMA_NAME},
                    "schema_version": {"const": SCHEMA_VERSION},
                    "run_id": {"type": "string"},
                    "created_at": {"type": "string"},
                    "redacted": {"type": "boolean"},
                },
                "additionalProperties": False,
            },
            "event": {
                "type": "object",
                "required": ["sequence", "kind", "elapsed_seconds", "depth", "node_id", "parent_id", "data"],
                "properties": {
                    "sequence": {"type": "integer", "minimum": 1},
                    "kind": {"enum": sorted(EVENT_TYPES)},
                    "elapsed_seconds": {"type": "number", "minimum": 0},
                    "depth": {"type": "integer", "minimum": 0},
                    "node_id": {"type": "string", "pattern": "^(rlm|call)-[0-9]+$"},
                    "parent_id": {"type": "string"},
                    "data": {"type": "object"},
                },
                "additionalProperties": False,
                "oneOf": events,
            },
        },
    }


_ENVELOPE = frozenset({"sequence", "elapsed_seconds", "depth", "node_id", "parent_id"})


def _json_type(hint: Any) -> dict[str, Any]:
    """JSON Schema of a field's type hint (the event classes use only these)."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        names = [_json_type(arg)["type"] for arg in typing.get_args(hint)]
        return {"type": names}
    if hint is type(None):
        return {"type": "null"}
    simple = {str: "string", bool: "boolean", int: "integer", float: "number"}
    if hint in simple:
        return {"type": simple[hint]}
    if typing.get_origin(hint) is dict:
        return {"type": "object"}
    raise TypeError(f"no JSON Schema type for event field hint {hint!r}")
