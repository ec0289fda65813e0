"""Ending a run: FINAL("...") / FINAL_VAR(name).

Two parsers live here. The module-level ``extract_final``, ``extract_final_var``, ``is_final`` and
``parse_response`` reproduce ysz/recursive-llm 2fb46cc on every input, quirks included, because
drop-in users call ``rlm.parser`` directly and benchmarks scored with it must not move. The fixed
parser (used by profile ``fixed``) follows Python's own string-literal rules; see docs/parser.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["extract_final", "extract_final_var", "is_final", "parse_response"]

# Upstream's order matters: triple quotes first and greedy, then single-line quotes without escapes.
_UPSTREAM_FINAL_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(r"FINAL\s*\(\s*" + body, re.DOTALL)
    for body in ('"""(.*)"""', "'''(.*)'''", '"([^"]*)"', "'([^']*)'")
)
_UPSTREAM_FINAL_VAR = re.compile(r"FINAL_VAR\s*\(\s*(\w+)\s*\)")


def extract_final(response: str) -> str | None:
    """The stripped argument of the first matching ``FINAL(<quoted>)`` form, else None."""
    for pattern in _UPSTREAM_FINAL_PATTERNS:
        found = pattern.search(response)
        if found:
            return found.group(1).strip()
    return None


def extract_final_var(response: str, env: Mapping[str, Any]) -> str | None:
    """``str(env[name])`` for the first ``FINAL_VAR(name)``, or None when absent or unbound."""
    found = _UPSTREAM_FINAL_VAR.search(response)
    if found is None or found.group(1) not in env:
        return None
    return str(env[found.group(1)])


def is_final(response: str) -> bool:
    """Upstream's plain substring test (so ``FINAL ("x")`` is extractable yet not final)."""
    return "FINAL(" in response or "FINAL_VAR(" in response


def parse_response(response: str, env: Mapping[str, Any]) -> str | None:
    """``extract_final`` first, then ``extract_final_var``; None when neither gives an answer."""
    answer = extract_final(response)
    if answer is None:
        answer = extract_final_var(response, env)
    return answer
