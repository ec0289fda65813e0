"""The conformance suite's hand-written inputs: REPL and loop cases (TOML) and parser cases.

Inputs never carry expectations: the recorder runs them against upstream and writes what happened.
Loading validates every case strictly (unknown keys, wrong types, duplicate ids are errors naming
the file and case), because a typo in an input silently recorded would be a fixture nobody meant.
The TOML layout is described in docs/conformance.md.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from ..shared.tooling_errors import ToolUsageError
from . import values

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]

__all__ = [
    "KINDS",
    "LOOP_CALLS",
    "Case",
    "InputError",
    "input_files",
    "load_all",
    "load_loop_cases",
    "load_parser_cases",
    "load_repl_cases",
]

KINDS = ("repl", "parser", "loop")
LOOP_CALLS = ("completion", "acompletion", "complete", "acomplete")
PROMPT_VERSIONS = ("2fb46cc", "cc7a826")
_ID = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_-]+)+$")
_REPL_KEYS = {"id", "description", "env", "steps", "options", "tags"}
_REPL_OPTIONS = {"timeout", "max_output_chars"}
_LOOP_KEYS = {"id", "description", "query", "context", "replies", "options", "tags"}
_LOOP_OPTIONS_TYPED: dict[str, tuple[type, ...]] = {
    "model": (str,),
    "recursive_model": (str,),
    "api_base": (str,),
    "api_key": (str,),
    "max_depth": (int,),
    "max_iterations": (int,),
    "call": (str,),
    "prompt_version": (str,),
    "call_kwargs": (dict,),
    "llm_kwargs": (dict,),
}


class InputError(ToolUsageError):
    """An input file or case is malformed; the message names the file and the case."""


@dataclass(frozen=True)
class Case:
    """One input case: ``id`` is the full dotted id (``repl.``/``loop.``/``parser.`` prefix)."""

    id: str
    kind: str
    topic: str
    data: dict[str, Any]

    def as_input(self) -> dict[str, Any]:
        """The JSON object stored under ``"input"`` in a fixture line (and sent to drivers)."""
        return {"id": self.id, "topic": self.topic, **self.data}


def _inputs_root() -> Path:
    return Path(str(resources.files(__package__ or "rlm_compat.tools.conformance"))) / "inputs"


def input_files(kind: str, root: Path | None = None) -> list[Path]:
    """The TOML files of one kind (``repl`` or ``loop``), sorted by name."""
    base = (root or _inputs_root()) / kind
    return sorted(base.glob("*.toml")) if base.is_dir() else []


def _fail(where: str, message: str) -> InputError:
    return InputError(f"{where}: {message}")


def _check_keys(where: str, table: Mapping[str, Any], allowed: set[str], required: set[str]) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise _fail(where, f"unknown key(s) {unknown}; allowed: {sorted(allowed)}")
    missing = sorted(required - set(table))
    if missing:
        raise _fail(where, f"missing key(s) {missing}")


def _check_env(where: str, env: Any) -> dict[str, Any]:
    if not isinstance(env, dict) or not all(isinstance(k, str) for k in env):
        raise _fail(where, "env must be a table of name = tagged-JSON value")
    try:
        values.decode(env)
    except values.DecodeError as exc:
        raise _fail(where, f"env: {exc}") from None
    return env


def _check_common(where: str, raw: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if not isinstance(raw.get("id"), str) or not _ID.match(raw["id"]):
        raise _fail(where, f"id {raw.get('id')!r} must be dotted lower-case words, e.g. 'topic.name'")
    if "description" in raw:
        if not isinstance(raw["description"], str):
            raise _fail(where, "description must be a string")
        out["description"] = raw["description"]
    if "tags" in raw:
        tags = raw["tags"]
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise _fail(where, "tags must be a list of strings")
        out["tags"] = sorted(set(tags))
    return out


def _repl_case(where: str, topic: str, raw: Mapping[str, Any]) -> Case:
    _check_keys(where, raw, _REPL_KEYS, {"id", "steps"})
    data = _check_common(where, raw)
    steps = raw["steps"]
    if not isinstance(steps, list) or not steps or not all(isinstance(s, str) for s in steps):
        raise _fail(where, "steps must be a non-empty list of strings")
    data["steps"] = steps
    if "env" in raw:
        data["env"] = _check_env(where, raw["env"])
    if "options" in raw:
        options = raw["options"]
        if not isinstance(options, dict):
            raise _fail(where, "options must be a table")
        _check_keys(where + " options", options, _REPL_OPTIONS, set())
        for key, value in options.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise _fail(where, f"options.{key} must be a number")
        data["options"] = options
    return Case(f"repl.{raw['id']}", "repl", topic, data)


def _loop_case(where: str, topic: str, raw: Mapping[str, Any]) -> Case:
    _check_keys(where, raw, _LOOP_KEYS, {"id", "replies"})
    data = _check_common(where, raw)
    for key in ("query", "context"):
        if key in raw:
            if not isinstance(raw[key], str):
                raise _fail(where, f"{key} must be a string")
            data[key] = raw[key]
    replies = raw["replies"]
    if not isinstance(replies, list) or not all(isinstance(r, str) for r in replies):
        raise _fail(where, "replies must be a list of strings")
    data["replies"] = replies
    options = dict(raw.get("options", {}))
    if not isinstance(raw.get("options", {}), dict):
        raise _fail(where, "options must be a table")
    for key, types in _LOOP_OPTIONS_TYPED.items():
        if key in options and (not isinstance(options[key], types) or isinstance(options[key], bool)):
            raise _fail(where, f"options.{key} must be {'/'.join(t.__name__ for t in types)}")
    extra = {k: options.pop(k) for k in sorted(set(options) - set(_LOOP_OPTIONS_TYPED))}
    if extra:  # upstream passes unknown constructor keywords on as **llm_kwargs
        options["llm_kwargs"] = {**options.get("llm_kwargs", {}), **extra}
    options.setdefault("call", "acompletion")
    options.setdefault("prompt_version", "2fb46cc")
    if options["call"] not in LOOP_CALLS:
        raise _fail(where, f"options.call must be one of {list(LOOP_CALLS)}")
    if options["prompt_version"] not in PROMPT_VERSIONS:
        raise _fail(where, f"options.prompt_version must be one of {list(PROMPT_VERSIONS)}")
    data["options"] = options
    return Case(f"loop.{raw['id']}", "loop", topic, data)


def _load_toml_cases(kind: str, files: Iterable[Path]) -> list[Case]:
    build = _repl_case if kind == "repl" else _loop_case
    cases: list[Case] = []
    seen: dict[str, str] = {}
    for path in files:
        try:
            document = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise InputError(f"{path}: {exc}") from None
        unknown = sorted(set(document) - {"case"})
        if unknown:
            raise InputError(f"{path}: unknown top-level key(s) {unknown}; use [[case]] tables")
        for number, raw in enumerate(document.get("case", []), 1):
            where = f"{path.name} case #{number} ({raw.get('id', '?')})"
            case = build(where, path.stem, raw)
            if case.id in seen:
                raise InputError(f"{where}: duplicate id {case.id} (also in {seen[case.id]})")
            seen[case.id] = path.name
            cases.append(case)
    return sorted(cases, key=lambda c: c.id)


def load_repl_cases(root: Path | None = None) -> list[Case]:
    """Every REPL case under ``inputs/repl``, sorted by id."""
    return _load_toml_cases("repl", input_files("repl", root))


def load_loop_cases(root: Path | None = None) -> list[Case]:
    """Every loop case under ``inputs/loop``, sorted by id."""
    return _load_toml_cases("loop", input_files("loop", root))


def load_parser_cases() -> list[Case]:
    """The generated parser corpus plus its edge cases (``parser_cases.py``), sorted by id."""
    from . import parser_cases  # deterministic inputs, owned by the parser's maintainers

    raw_cases: list[dict[str, Any]] = [dict(c) for c in parser_cases.all_parser_cases()]
    cases: list[Case] = []
    seen: set[str] = set()
    for raw in raw_cases:
        where = f"parser_cases {raw.get('id', '?')}"
        _check_keys(where, raw, {"id", "response", "env", "description", "tags"}, {"id", "response"})
        case_id = raw["id"]
        if not isinstance(case_id, str) or not case_id.startswith("parser.") or case_id in seen:
            raise _fail(where, "ids must be unique strings starting with 'parser.'")
        if not isinstance(raw["response"], str):
            raise _fail(where, "response must be a string")
        seen.add(case_id)
        data: dict[str, Any] = {"response": raw["response"], "env": _check_env(where, raw.get("env", {}))}
        for key in ("description", "tags"):
            if key in raw:
                data[key] = raw[key]
        topic = case_id.split(".")[1] if case_id.count(".") >= 2 else "parser"
        cases.append(Case(case_id, "parser", topic, data))
    return sorted(cases, key=lambda c: c.id)


def load_all(root: Path | None = None) -> dict[str, list[Case]]:
    """All inputs by kind."""
    return {
        "repl": load_repl_cases(root),
        "parser": load_parser_cases(),
        "loop": load_loop_cases(root),
    }
