"""Custom tools: the user's functions and data in the REPL, in the shape rlms' ``custom_tools`` takes.

``RLM(..., custom_tools={...})`` maps each name to a callable (a *tool function*), to a plain value
(a REPL variable), or to ``{"tool": callable_or_value, "description": "..."}``. rlms ships tool
functions *into* its sandboxes, pickled by value with their closures (an API key, a client). Here
a tool function never leaves the host: the REPL gets a host function of its name (as
``llm_query``), and a call from the worker is one round trip on its channel with plain data both
ways (:mod:`rlm_compat._loop.toolcalls` runs it). Only plain data ever crosses: the arguments
model code passes, the results a tool returns and the values given as variables are checked here
(:func:`plain_size`), and a tool's exception reaches model code as the same class and message,
rebuilt from plain data, its traceback kept in the host's run record.

The dict form also takes rlm_compat's own keys: ``timeout`` (seconds a call may take, else the
model's code gets :class:`~rlm_compat.errors.ToolError`), ``max_argument_bytes`` and
``max_result_bytes`` (what one call's arguments and result may weigh, counted as :func:`plain_size`
counts). Names that would shadow what the REPL itself provides are refused when the RLM is made.
"""

from __future__ import annotations

import builtins
import dataclasses
import inspect
import keyword
import math
import re
from collections.abc import Mapping
from typing import Any

from . import plain_json
from .errors import ConfigurationError

__all__ = [
    "DEFAULT_MAX_ARGUMENT_BYTES",
    "DEFAULT_MAX_RESULT_BYTES",
    "PLAIN_TYPES",
    "RESERVED_NAMES",
    "Tool",
    "parse_tools",
    "plain_size",
]

DEFAULT_MAX_ARGUMENT_BYTES = 16 << 20
"""What one call's arguments may weigh by default (:func:`plain_size`): 16 MiB."""
DEFAULT_MAX_RESULT_BYTES = 16 << 20
"""What one call's result may weigh by default: 16 MiB."""

RESERVED_NAMES = frozenset(
    {
        "context",
        "query",
        "re",
        "answer",
        "history",
        "recursive_llm",
        "llm_query",
        "llm_query_batched",
        "rlm_query",
        "rlm_query_batched",
        "FINAL",
        "FINAL_VAR",
        "SHOW_VARS",
    }
)
"""What the REPL itself provides, in some release or profile (rlms reserves the same names but
``context``'s siblings below); a tool of one of these names is refused, as are Python's builtins'
names, keywords, names starting with ``_`` and the persistent session's ``context_N`` / ``history_N``."""

_SESSION_NAME = re.compile(r"(context|history)_\d+\Z")

PLAIN_TYPES = (str, bytes, int, float, bool, type(None), list, tuple, dict, set, frozenset)
"""What crosses a tool call: these exact types (no subclasses), containers nested up to
:data:`_MAX_DEPTH` deep."""
_SCALAR = frozenset({int, float, bool, type(None)})
_SEQUENCE = frozenset({list, tuple, set, frozenset})
_MAX_DEPTH = 64
_KEYS = frozenset({"tool", "description", "timeout", "max_argument_bytes", "max_result_bytes"})


def plain_size(value: Any, limit: int | None = None, what: str = "the value") -> int:
    """The weight of plain data: the length of each ``str`` (UTF-8 bytes at most 4 a character,
    counted as its length) and ``bytes``, 8 for each other item; TypeError naming the first
    value that is not plain data, OverflowError once the weight passes ``limit``.

    Counted without making anything (no text, no copy), and it stops at ``limit``: a model passing
    a list of a million references to one long string costs the walk up to the limit, no more.
    """
    total = 0
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        kind = type(item)
        if kind is str or kind is bytes:
            total += len(item)
        elif kind in _SCALAR:
            total += 8
        elif kind in _SEQUENCE or kind is dict:
            if depth >= _MAX_DEPTH:
                raise TypeError(f"{what} is nested deeper than {_MAX_DEPTH} containers")
            total += 8
            children = [*item, *item.values()] if kind is dict else item
            pending.extend((child, depth + 1) for child in children)
        else:
            raise TypeError(
                f"{what}: a {kind.__name__} is not plain data (str, bytes, int, float, bool, None, "
                "and lists, tuples, dicts, sets of them)"
            )
        if limit is not None and total > limit:
            raise OverflowError(f"{what}: more than the limit of {limit:,} bytes")
    return total


@dataclasses.dataclass(frozen=True)
class Tool:
    """One custom tool: a host function the REPL can call, or a plain value it holds."""

    name: str
    value: Any
    description: str | None = None
    timeout: float | None = None
    max_argument_bytes: int = DEFAULT_MAX_ARGUMENT_BYTES
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES

    @property
    def is_function(self) -> bool:
        return callable(self.value)

    @property
    def is_async(self) -> bool:
        """Whether calling it makes a coroutine (an ``async def`` function or ``__call__``)."""
        fn = self.value
        return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)

    def signature(self) -> str:
        """``name(parameters) -> annotation`` as the model is told it (``name(...)`` when unknown)."""
        try:
            try:
                signature = inspect.signature(self.value, eval_str=True)
            except Exception:  # an annotation naming what its module cannot resolve
                signature = inspect.signature(self.value)
        except (TypeError, ValueError):
            return f"{self.name}(...)"
        return f"{self.name}{signature}"

    def prompt_line(self) -> str:
        """The system prompt's line for this tool."""
        if self.is_function:
            text = self.description or _first_line(getattr(self.value, "__doc__", None)) or "a custom tool"
            return f"- {self.signature()}: {text} (a host tool: takes and returns plain data)"
        text = self.description or "custom data"
        return f"- {self.name}: {type(self.value).__name__} ({text})"

    def record(self, *, keep_value: bool) -> dict[str, Any]:
        """What the run record's ``config`` keeps of it: a value only with ``keep_value`` (the
        trajectory keeps content; replay defines it again), as tagged JSON text."""
        kept = plain_json.dumps(self.value) if keep_value and not self.is_function else None
        return {
            "name": self.name,
            "kind": "function" if self.is_function else "value",
            "description": self.description,
            "timeout": self.timeout,
            "value": kept,
        }


def _first_line(doc: str | None) -> str:
    return doc.strip().splitlines()[0].strip() if doc and doc.strip() else ""


def parse_tools(given: Mapping[str, Any] | None, keyword_name: str = "custom_tools") -> tuple[Tool, ...]:
    """``custom_tools`` as given (rlms' shapes), checked once: ConfigurationError naming the tool."""
    if given is None:
        return ()
    if not isinstance(given, Mapping):
        raise ConfigurationError(
            f"{keyword_name} must be a dict of name -> callable, value or "
            f"{{'tool': ..., 'description': ...}}, not {type(given).__name__}"
        )
    return tuple(_tool(keyword_name, name, entry) for name, entry in given.items())


def _tool(keyword_name: str, name: Any, entry: Any) -> Tool:
    where = f"{keyword_name}[{name!r}]"
    _check_name(where, name)
    options: dict[str, Any] = {}
    value = entry
    if isinstance(entry, dict) and "tool" in entry:
        unknown = set(entry) - _KEYS
        if unknown:
            known = sorted(_KEYS)
            raise ConfigurationError(f"{where} has unknown keys {sorted(map(str, unknown))}; known: {known}")
        value = entry["tool"]
        options = {key: entry[key] for key in _KEYS - {"tool"} if key in entry}
    description = options.get("description")
    if description is not None and not isinstance(description, str):
        raise ConfigurationError(f"{where}: description must be a str, not {type(description).__name__}")
    timeout = options.get("timeout")
    number = isinstance(timeout, (int, float)) and not isinstance(timeout, bool)
    if timeout is not None and (not number or not timeout > 0 or math.isinf(timeout)):
        raise ConfigurationError(f"{where}: timeout must be a number of seconds > 0, not {timeout!r}")
    limits = {}
    for key in ("max_argument_bytes", "max_result_bytes"):
        if key in options:
            limit = options[key]
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
                raise ConfigurationError(f"{where}: {key} must be an integer >= 1, not {limit!r}")
            limits[key] = limit
    if not callable(value):
        if timeout is not None or limits:
            raise ConfigurationError(
                f"{where} is a value, not a function: timeout and byte limits apply to calls"
            )
        try:
            plain_size(value, what=where)
        except TypeError as exc:
            raise ConfigurationError(
                f"{exc} (a value reaches the REPL as data: no objects, no callables inside it)"
            ) from None
    return Tool(name, value, description, None if timeout is None else float(timeout), **limits)


def _check_name(where: str, name: Any) -> None:
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        raise ConfigurationError(f"{where}: a tool's name must be a Python identifier")
    if name.startswith("_"):
        raise ConfigurationError(f"{where}: names starting with '_' are not reachable from REPL code")
    if name in RESERVED_NAMES or _SESSION_NAME.match(name):
        raise ConfigurationError(
            f"{where} would shadow the REPL's own {name!r}; reserved: {sorted(RESERVED_NAMES)}, "
            "context_N and history_N"
        )
    if hasattr(builtins, name):
        raise ConfigurationError(f"{where} would shadow Python's builtin {name!r}")
