"""Comparing a result with its recorded expectation, and saying where they first differ.

Two modes. ``exact`` (rlm_compat profiles, the upstream checkout): every recorded field must be
equal — output text, error type and message, env after each step, every model call, the answer and
stats. ``semantic`` (peer implementations, whose messages and formatting differ by design): per
step only the outcome kind (output / error / hang), the printed text with upstream's placeholder
strings removed, and the user variables (names not starting with ``_``); see docs/conformance.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["MODES", "PLACEHOLDER_OUTPUTS", "compare", "parser_answer", "semantic_repl"]

MODES = ("exact", "semantic")
PLACEHOLDER_OUTPUTS = frozenset({"Code executed successfully (no output)", "No code to execute"})
_SHOW = 160


def _show(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)
    text = repr(text) if isinstance(value, str) else text
    return text if len(text) <= _SHOW else text[: _SHOW - 1] + "…"


def _first_difference(expected: Any, got: Any, path: str) -> str | None:
    """Where two JSON values first differ (dicts compared by key, lists by position)."""
    if expected == got and type(expected) is type(got):
        return None
    if isinstance(expected, dict) and isinstance(got, dict):
        # a step's outcome kind first: "expected error, got hang" says more than the env it lacks
        for key in sorted(expected.keys() | got.keys(), key=lambda k: (k != "kind", k)):
            if key not in got:
                return f"{path}.{key}: missing (expected {_show(expected[key])})"
            if key not in expected:
                return f"{path}.{key}: unexpected {_show(got[key])}"
            found = _first_difference(expected[key], got[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(expected, list) and isinstance(got, list):
        for index, (a, b) in enumerate(zip(expected, got, strict=False)):
            found = _first_difference(a, b, f"{path}[{index}]")
            if found:
                return found
        if len(expected) != len(got):
            return f"{path}: {len(got)} items, expected {len(expected)}"
        return None
    return f"{path}: expected {_show(expected)}, got {_show(got)}"


def _conform_errors(expected: Any, got: Any) -> Any:
    """``got`` with each error's ``isa`` list resolved against the recorded error.

    An error of a subclass of the recorded type conforms: drop-in code that catches upstream's
    class still catches it (rlm_compat raises e.g. REPLSecurityError, a REPLError). The message
    must still be identical.
    """
    if isinstance(got, dict):
        if "isa" in got and "type" in got:
            wanted = expected.get("type") if isinstance(expected, dict) else None
            resolved = {k: v for k, v in got.items() if k != "isa"}
            if isinstance(wanted, str) and wanted in got["isa"]:
                resolved["type"] = wanted
            return resolved
        return {
            k: _conform_errors(expected.get(k) if isinstance(expected, dict) else None, v)
            for k, v in got.items()
        }
    if isinstance(got, list):
        others = expected if isinstance(expected, list) else []
        return [_conform_errors(others[i] if i < len(others) else None, v) for i, v in enumerate(got)]
    return got


def _step_kind(step: Mapping[str, Any]) -> str:
    return "hang" if step.get("hang") else "error" if "error" in step else "output"


def semantic_repl(result: Mapping[str, Any]) -> dict[str, Any]:
    """A REPL result reduced to what peers can be compared on (see the module docstring)."""
    steps = []
    for step in result.get("steps", []):
        kind = _step_kind(step)
        reduced: dict[str, Any] = {"kind": kind}
        if kind == "output":
            text = step.get("output", "")
            reduced["output"] = "" if text in PLACEHOLDER_OUTPUTS else text.strip()
        if "env" in step:
            reduced["env"] = {k: v for k, v in step["env"].items() if not k.startswith("_")}
        steps.append(reduced)
    return {"steps": steps}


def parser_answer(result: Mapping[str, Any]) -> Any:
    """The answer a loop would end with for a parser case.

    An implementation without upstream's four functions reports it directly as ``answer``
    (docs/protocol.md); for upstream's it is ``parse_response`` when ``is_final``, else None.
    """
    if "answer" in result:
        return result["answer"]
    return result.get("parse_response") if result.get("is_final") is True else None


def compare(
    kind: str, expected: Mapping[str, Any], got: Mapping[str, Any], mode: str = "exact"
) -> str | None:
    """None when ``got`` conforms to ``expected``, else a one-line description of the first difference."""
    if mode not in MODES:
        raise ValueError(f"unknown comparison mode {mode!r}")
    got = _conform_errors(expected, got)
    if mode == "semantic":
        if kind == "repl":
            return _first_difference(semantic_repl(expected), semantic_repl(got), "")
        if kind == "parser" and set(got) != set(expected):
            found = _first_difference({"answer": parser_answer(expected)}, {"answer": parser_answer(got)}, "")
            return found.lstrip(".") if found else None
    if kind == "repl":
        expected_steps, got_steps = expected.get("steps", []), got.get("steps", [])
        for index, (a, b) in enumerate(zip(expected_steps, got_steps, strict=False)):
            if _step_kind(a) == "hang" or _step_kind(b) == "hang":
                if _step_kind(a) != _step_kind(b):
                    return f"step {index + 1}: expected {_step_kind(a)}, got {_step_kind(b)}" + (
                        f" ({_show(b.get('error', b.get('output')))})" if _step_kind(b) != "hang" else ""
                    )
                return None  # nothing after a hang was run upstream
            found = _first_difference(a, b, f"step {index + 1}")
            if found:
                return found.replace(f"step {index + 1}.", f"step {index + 1} ", 1)
        if len(expected_steps) != len(got_steps):
            return f"{len(got_steps)} steps recorded, expected {len(expected_steps)}"
        return None
    found = _first_difference(dict(expected), dict(got), "")
    return found.lstrip(".") if found else None
