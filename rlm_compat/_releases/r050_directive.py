"""recursive-llm 0.5.0's directive rules: a response ends a run only when it *is* the directive.

0.5.0 tightened 2fb46cc's parser (which took a ``FINAL(...)`` anywhere, even inside an ``if``
branch that never ran): the whole response, surrounding whitespace aside, must be one
``FINAL(<string literal>)`` or ``FINAL_VAR(<name>)``; the literal is read as Python reads it
(escapes, triple quotes) and stripped. Anything else is code to execute.

The 0.5.0 release's FINAL rule set (:func:`resolve_final`); users import these functions as
:mod:`rlm_compat.parser_v050`, which is ``rlm.parser`` under the alias with the 0.5 preset.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from typing import Any

from ..parser import FinalResolution

__all__ = [
    "extract_final",
    "extract_final_var",
    "extract_final_var_name",
    "is_final",
    "parse_response",
    "resolve_final",
]


def _call_text(response: str, directive: str) -> str | None:
    """The text between ``<directive>(`` and the final ``)`` when the response is only that call."""
    text = response.strip()
    if not text.startswith(directive) or not text.endswith(")"):
        return None
    rest = text[len(directive) :].lstrip()
    if not rest.startswith("("):
        return None
    return rest[1:-1]


def is_final(response: str) -> bool:
    """Whether the response is one standalone ``FINAL(...)`` or ``FINAL_VAR(name)`` directive."""
    if extract_final_var_name(response) is not None:
        return True
    return _call_text(response, "FINAL") is not None


def extract_final(response: str) -> str | None:
    """The stripped string of a standalone ``FINAL("...")``; None for anything else."""
    inner = _call_text(response, "FINAL")
    if inner is None:
        return None
    try:
        value = ast.literal_eval(inner.strip())
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        return None
    return value.strip() if isinstance(value, str) else None


def extract_final_var_name(response: str) -> str | None:
    """The variable named by a standalone ``FINAL_VAR(name)``; None for anything else."""
    inner = _call_text(response, "FINAL_VAR")
    if inner is None:
        return None
    name = inner.strip()
    return name if name and all(c.isalnum() or c == "_" for c in name) else None


def extract_final_var(response: str, env: Mapping[str, Any]) -> str | None:
    """``str(env[name])`` for a standalone ``FINAL_VAR(name)`` whose variable exists, else None."""
    name = extract_final_var_name(response)
    if name is None or name not in env:
        return None
    return str(env[name])


def parse_response(response: str, env: Mapping[str, Any]) -> str | None:
    """The answer of a standalone directive: ``FINAL`` first, then ``FINAL_VAR``; else None."""
    answer = extract_final(response)
    return answer if answer is not None else extract_final_var(response, env)


def resolve_final(
    response: str, env: Mapping[str, Any], *, render: Callable[[str], str] | None = None
) -> FinalResolution:
    """The loop's view under 0.5.0's rules (same shape as :func:`rlm_compat.parser.resolve_final`).

    A standalone directive ends the run; ``FINAL_VAR`` of a name the REPL does not hold gets
    feedback naming it rather than silently counting as an ordinary step.
    """
    answer = extract_final(response)
    if answer is not None:
        return FinalResolution(answer, None)
    name = extract_final_var_name(response)
    if name is None:
        return FinalResolution(None, None)
    if name not in env:
        return FinalResolution(
            None, f"FINAL_VAR({name}) names no variable of the REPL; assign {name} first, then answer again."
        )
    text = render(name) if render is not None else str(env[name])
    return FinalResolution(text, None, method="worker_variable")
