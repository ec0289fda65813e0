"""How an ``RLM`` option is declared: its :class:`Parameter` row, its ``run`` :class:`Flag`, its check.

A keyword kept as given is a :class:`~rlm_compat.settings.Settings` field made with
:func:`option`; the checks here are small and named, each turning a given value into the kept one
or raising a ConfigurationError that names the keyword.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from .._releases import Release
from ..errors import ConfigurationError
from ..prompts import build_system_prompt

AnySettings = Any
"""What ``record`` and ``child`` hooks receive: :class:`rlm_compat.settings.Settings` (naming that
class here would make a circle with the table that declares its fields with :func:`option`)."""

__all__ = [
    "RECORD_VALUE",
    "REQUIRED",
    "Check",
    "Context",
    "Flag",
    "Parameter",
    "at_least",
    "callable_or_none",
    "integer",
    "known_prompt_version",
    "model_name",
    "option",
    "or_none",
    "positive_seconds",
    "release_default",
    "within_release_limits",
]

_T = TypeVar("_T")


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()
"""The default of a keyword that has none (``model``)."""

_NO_CONST: Any = object()


@dataclasses.dataclass(frozen=True)
class Flag:
    """How ``rlm-compat run`` offers a keyword: its help group, and a name when not the keyword's.

    ``const`` makes it a switch storing that value; ``choices`` limits its values. ``help``: the
    flag's own help where the keyword's doc would mislead (a switch that sets the keyword to False
    describes what the switch does, not what the keyword keeps).
    """

    group: str
    name: str | None = None
    const: Any = _NO_CONST
    choices: tuple[str, ...] | None = None
    required: bool = False
    help: str | None = None

    def option_string(self, keyword: str) -> str:
        return self.name or "--" + keyword.strip("_").replace("_", "-")

    @property
    def is_switch(self) -> bool:
        return self.const is not _NO_CONST


@dataclasses.dataclass(frozen=True)
class Context:
    """What a check sees besides the value: the keyword, the release, the values checked so far."""

    name: str
    release: Release
    values: Mapping[str, Any]


Check = Callable[[Any, Context], Any]
"""Validates a given value (ConfigurationError naming ``context.name``) and returns what is kept."""


@dataclasses.dataclass(frozen=True)
class Parameter:
    """One ``RLM(...)`` keyword.

    ``doc`` what it does; ``annotation`` and ``default`` the constructor's; ``release`` the
    release that brought it (None: 2fb46cc or ours); ``record`` what the run record's ``config``
    keeps (None: nothing, e.g. a credential or a callable); ``flag`` its ``rlm-compat run`` flag
    (None: none); ``positional`` one of 2fb46cc's positional parameters. For a :class:`Settings`
    field, ``check`` turns the given value into the kept one and ``child`` says what a child RLM's
    settings change to because of it.
    """

    doc: str
    annotation: str
    default: Any = None
    release: str | None = None
    record: Callable[[AnySettings], Any] | None = None
    flag: Flag | None = None
    positional: bool = False
    check: Check | None = None
    child: Callable[[AnySettings, Any], Mapping[str, Any]] | None = None

    @property
    def plain(self) -> bool:
        """Whether the keyword takes plain data (a number, text or a flag; ``profile`` takes a name
        as well as a Profile): what a config file, a command line or a server's model table sets."""
        return bool(set(_union_members(self.annotation)) & _PLAIN_TYPES)


_PLAIN_TYPES = frozenset({"int", "float", "str", "bool"})


def _union_members(annotation: str) -> list[str]:
    """The top-level members of ``A | B[C | D] | None``: ``["A", "B[C | D]", "None"]``."""
    members, depth, current = [], 0, ""
    for char in annotation:
        if char in "[(":
            depth += 1
        elif char in "])":
            depth -= 1
        if char == "|" and depth == 0:
            members.append(current.strip())
            current = ""
        else:
            current += char
    return [*members, current.strip()]


RECORD_VALUE: Any = object()
"""A row's ``record`` when the run record keeps the field's value as it is."""


def option(
    doc: str,
    annotation: str,
    default: Any = None,
    *,
    release: str | None = None,
    record: bool | Callable[[AnySettings], Any] = True,
    flag: Flag | None = None,
    positional: bool = False,
    check: Check | None = None,
    child: Callable[[AnySettings, Any], Mapping[str, Any]] | None = None,
) -> Any:
    """A :class:`Settings` field that is an ``RLM`` keyword of the same name (see :class:`Parameter`)."""
    kept = record if callable(record) else RECORD_VALUE if record else None
    parameter = Parameter(doc, annotation, default, release, kept, flag, positional, check, child)
    return dataclasses.field(metadata={"parameter": parameter})


# --- checks: each small and named; a check returns the value kept ---------------------------


def integer(value: Any, floor: int, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < floor:
        raise ConfigurationError(f"{name} must be an integer >= {floor}, not {value!r}")
    return value


def at_least(floor: int) -> Check:
    """An integer >= ``floor``."""
    return lambda value, ctx: integer(value, floor, ctx.name)


def within_release_limits(value: Any, ctx: Context) -> int:
    """An iteration or output limit: >= 0, or >= 1 where the release refuses 0 (0.5.0)."""
    return integer(value, ctx.release.least_limit, ctx.name)


def or_none(check: Check) -> Check:
    """None, or what ``check`` accepts."""
    return lambda value, ctx: None if value is None else check(value, ctx)


def release_default(read: Callable[[Release], Any], check: Check) -> Check:
    """None means the release's default (``read``); anything given goes through ``check``."""
    return lambda value, ctx: check(read(ctx.release) if value is None else value, ctx)


def positive_seconds(value: Any, ctx: Context) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or value <= 0:
        raise ConfigurationError(f"{ctx.name} must be a number of seconds > 0, not {value!r}")
    return value


def model_name(value: Any, ctx: Context) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigurationError(f"{ctx.name} must be a non-empty string such as 'gpt-4o-mini'")
    return value


def known_prompt_version(value: Any, ctx: Context) -> Any:
    build_system_prompt(0, version=value)  # ConfigurationError naming the versions there are
    return value


def callable_or_none(value: Any, ctx: Context) -> Any:
    if value is not None and not callable(value):
        raise ConfigurationError(f"{ctx.name} must be a callable (answer) -> None | reason, not {value!r}")
    return value
