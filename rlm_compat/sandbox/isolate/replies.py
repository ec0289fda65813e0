"""What a worker may send its parent, and the parent's check of each message's shape.

:mod:`.wire` makes sure a message is a bounded tree of plain values; this module makes sure it
is the *right* tree: one of the ops the parent is waiting for, answering the request it sent
(the sequence number), with each field of the type and size the protocol says. Anything else
is a :class:`WorkerFault` (the parent replaces the worker and fails the step), never a
``KeyError`` or ``TypeError`` from deep inside the runner. Texts are only ever sliced here,
never made with ``str()`` from an object.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from ... import errors as _errors
from ...errors import RAN_AND_FAILED, REPLError, StepFailure, StepStage
from ..step.texts import Texts
from .wire import NAME_CHARS, WireLimits, decode

__all__ = [
    "NAME_LIMIT",
    "NOTE_CHARS",
    "TEXT_SLACK",
    "Call",
    "Changed",
    "Done",
    "Ready",
    "Refused",
    "Reply",
    "StepResult",
    "Synced",
    "Value",
    "WorkerFault",
    "call_arguments",
    "check_prepared",
    "parse",
    "step_text",
]

NAME_LIMIT = 10_000
"""The longest variable or host-function name a worker may send (longer: a fault)."""
TEXT_SLACK = 64 << 10
"""A step's text may be this much longer than ``max_output_chars`` (an error's message, notes);
the parent cuts what a worker sends past that."""
NOTE_CHARS = 1_000
"""A worker's note on a value it could not load is cut to this many characters."""
_ERRORS = frozenset({"REPLError", "REPLTimeoutError", "REPLSecurityError", "FinalVarMissingError"})
"""The error classes a worker may name for a failed step (anything else reads as REPLError)."""
_STAGES: dict[object, StepStage] = {"syntax": "syntax", "policy": "policy", "run": "run"}
"""A failed step's stages (:class:`~rlm_compat.errors.StepFailure`; anything else reads as a run)."""


class WorkerFault(Exception):
    """A worker's message is not what the protocol allows (``limit``: the limit it passed, if
    that is what was wrong; ``what`` says what it was)."""

    def __init__(self, what: str, limit: str | None = None) -> None:
        super().__init__(what)
        self.what = what
        self.limit = limit


@dataclasses.dataclass(slots=True)
class Ready:
    pid: int
    inherited: tuple[str, ...] = ()
    """The variables bound to the value the worker inherited from its context template."""


@dataclasses.dataclass(slots=True)
class Refused:
    protocol: int | None


@dataclasses.dataclass(slots=True)
class StepResult:
    """How the step ended in the worker: its observation, or the error class, text and
    :class:`~rlm_compat.errors.StepFailure`."""

    ok: bool
    text: str
    error: str = "REPLError"
    failure: StepFailure = RAN_AND_FAILED


@dataclasses.dataclass(slots=True)
class Changed:
    """One variable the step changed: its type name, whether it stayed in the worker (whole or
    in part), and its :mod:`.wire` encoding (empty when it stayed whole)."""

    type_name: str
    kept: bool
    data: bytes


@dataclasses.dataclass(slots=True)
class Done:
    result: StepResult
    values: dict[str, Changed]
    removed: tuple[str, ...]
    aliases: dict[str, str]
    unloadable: dict[str, str]
    checked: tuple[str, ...]


@dataclasses.dataclass(slots=True)
class Synced:
    unloadable: dict[str, str]


@dataclasses.dataclass(slots=True)
class Value:
    found: bytes | None


@dataclasses.dataclass(slots=True)
class Call:
    name: str
    payload: bytes


Reply = Ready | Refused | Done | Synced | Value | Call


def _fault(what: str) -> WorkerFault:
    return WorkerFault(f"a malformed message ({what})")


def _field(message: dict[Any, Any], key: str, kind: type) -> Any:
    value = message.get(key)
    if type(value) is not kind:
        raise _fault(f"{key!r} is not a {kind.__name__}")
    return value


def _name(value: Any, what: str) -> str:
    if type(value) is not str or not value or len(value) > NAME_LIMIT:
        raise _fault(f"{what} is not a name")
    return value


def _names(value: Any, what: str) -> tuple[str, ...]:
    if type(value) is not list:
        raise _fault(f"{what} is not a list")
    return tuple(_name(item, what) for item in value)


def _notes(value: Any, what: str) -> dict[str, str]:
    if type(value) is not dict:
        raise _fault(f"{what} is not a map")
    notes = {}
    for key, note in value.items():
        if type(note) is not str:
            raise _fault(f"a note in {what} is not a str")
        notes[_name(key, what)] = note[:NOTE_CHARS]
    return notes


def _result(value: Any) -> StepResult:
    if type(value) is not dict or type(value.get("ok")) is not bool or type(value.get("text")) is not str:
        raise _fault("the step's result is not {ok, text}")
    error = value.get("error", "REPLError")
    stage = value.get("stage")
    failure = StepFailure(
        _STAGES.get(stage, "run") if type(stage) is str else "run", directive=value.get("directive") is True
    )
    return StepResult(value["ok"], value["text"], error if error in _ERRORS else "REPLError", failure)


def _changed(value: Any) -> Changed:
    if not (
        type(value) is list
        and len(value) == 3
        and type(value[0]) is str
        and type(value[1]) is bool
        and type(value[2]) is bytes
    ):
        raise _fault("a changed variable is not (type, kept, data)")
    return Changed(value[0][:NAME_CHARS], value[1], value[2])


def _done(message: dict[Any, Any]) -> Done:
    values = _field(message, "values", dict)
    aliases = _field(message, "aliases", dict)
    return Done(
        result=_result(message.get("result")),
        values={_name(key, "a variable"): _changed(value) for key, value in values.items()},
        removed=_names(message.get("removed"), "a removed variable"),
        aliases={_name(k, "an alias"): _name(v, "an alias") for k, v in aliases.items()},
        unloadable=_notes(message.get("unloadable"), "unloadable"),
        checked=_names(message.get("checked", []), "a checked variable"),
    )


def _value(message: dict[Any, Any]) -> Value:
    found = message.get("found")
    if found is not None and type(found) is not bytes:
        raise _fault("a fetched value is not bytes")
    return Value(found)


def _ready(message: dict[Any, Any]) -> Ready:
    return Ready(_field(message, "pid", int), _names(message.get("inherited", []), "an inherited variable"))


def _refused(message: dict[Any, Any]) -> Refused:
    protocol = message.get("protocol")
    return Refused(protocol if type(protocol) is int else None)


def _synced(message: dict[Any, Any]) -> Synced:
    return Synced(_notes(message.get("unloadable"), "unloadable"))


def _call(message: dict[Any, Any]) -> Call:
    return Call(_name(message.get("name"), "a host function"), _field(message, "payload", bytes))


_PARSERS: dict[str, Callable[[dict[Any, Any]], Reply]] = {
    "ready": _ready,
    "refused": _refused,
    "done": _done,
    "synced": _synced,
    "value": _value,
    "call": _call,
}


def parse(message: dict[Any, Any], expected: tuple[str, ...], seq: int | None) -> Reply:
    """The typed reply ``message`` is, if it is one of the ``expected`` ops answering request
    ``seq`` (None: a message before any request, which carries none); :class:`WorkerFault` else."""
    op = message.get("op")
    if type(op) is not str or op not in expected:
        raise WorkerFault(
            f"an unexpected message (op {str(op)[:40]!r} where {'/'.join(expected)} belongs)"
            if type(op) is str
            else "a message without an op"
        )
    if message.get("seq") != seq:
        raise WorkerFault("a message out of turn (it answers another request)")
    return _PARSERS[op](message)


# --- what the parent holds a worker's claims to --------------------------------------------------


def call_arguments(call: Call, limits: WireLimits) -> tuple[list[Any], dict[str, Any]]:
    """A host call's ``(args, kwargs)`` (a worker sends only plain data: anything else, or a
    payload past a limit, is its fault)."""
    decoded = decode(call.payload, limits)
    if (
        type(decoded) is not list
        or len(decoded) != 2
        or type(decoded[0]) is not list
        or type(decoded[1]) is not dict
        or not all(type(key) is str for key in decoded[1])
    ):
        raise WorkerFault("a host call whose arguments are not (args, kwargs)")
    return decoded[0], decoded[1]


def check_prepared(kind: str, function: str, args: list[Any], answer_chars: int | None) -> None:
    """FINAL's text, FINAL_VAR's name and text and SHOW_VARS' listing, held to the limits in the
    parent as well: the worker made them, and a worker may lie about their size (raised to the
    model's code)."""
    if kind == "answer_var" and args and not (type(args[0]) is str and len(args[0]) <= NAME_LIMIT):
        raise TypeError(f"{function}() takes the name of a variable, a short str")
    if kind == "namespace" and args and type(args[0]) is dict:
        listing = args[0]
        if not all(type(k) is str and len(k) <= NAME_LIMIT for k in listing) or not all(
            type(v) is str and len(v) <= NAME_LIMIT for v in listing.values()
        ):
            raise TypeError(
                f"{function}(): a listing of names and type names of at most {NAME_LIMIT} characters"
            )
    texts = args[:1] if kind == "answer" else args[1:2] if kind == "answer_var" else []
    for text in texts:
        if answer_chars is not None and type(text) is str and len(text) > answer_chars:
            raise REPLError(Texts.answer_too_long(len(text), answer_chars))


def step_text(result: StepResult, op: str, max_output_chars: int, answer_chars: int | None) -> str:
    """The step's text, cut at the parent's own limit (a render's at ``answer_chars``), or its
    error raised as the class the worker named (among :data:`_ERRORS`)."""
    text = result.text
    if op == "render" and result.ok and answer_chars is not None and len(text) > answer_chars:
        raise REPLError(Texts.answer_too_long(len(text), answer_chars))
    cap = max_output_chars + TEXT_SLACK
    if len(text) > cap:
        text = text[:cap] + Texts.cut_by_parent(cap)
    if result.ok:
        return text
    raise getattr(_errors, result.error, REPLError)(text, failure=result.failure)
