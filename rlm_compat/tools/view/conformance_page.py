"""The conformance view: the matrix of ``rlm-compat conformance --json`` results, filterable, each
case's recorded outcome beside what every implementation did.

Several result files (one per Python, say) make one matrix whose columns are (implementation,
Python). The recorded side comes from the fixture files the run used, read from the results'
``fixtures`` directory when it still exists, else from the fixtures shipped with rlm_compat; an
implementation's own outcome is in the results (``actual``) when it differed from the recording.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .model import ViewInputError
from .render import page, script_json

__all__ = ["conformance_payload", "write_conformance"]

_CAP = 8000


def _pretty(value: Any) -> str:
    text = json.dumps(value, indent=1, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= _CAP else text[:_CAP] + f"\n\u2026 ({len(text) - _CAP:,} more characters)"


def _fixture_root(stated: str, *, reference: bool = False) -> Path | None:
    """Where one oracle's recordings are: the directory the results name, else the shipped one."""
    from ..conformance.fixtures import default_fixtures_dir
    from ..conformance.oracle import default_reference_dir
    from ..shared.tooling_errors import ToolError

    if stated and Path(stated).is_dir():
        return Path(stated)
    try:
        return default_reference_dir() if reference else default_fixtures_dir()
    except (ToolError, OSError):
        return None


def _recorded(root: Path | None, filename: str, wanted: set[str]) -> dict[str, dict[str, Any]]:
    """``{case_id: {"texts", "input", "expected"}}`` of one fixture file (empty when it is not there)."""
    from ..conformance.fixtures import read_jsonl

    if root is None or not (root / filename).is_file():
        return {}
    found = {}
    for line in read_jsonl(root / filename):
        if line.get("id") in wanted:
            found[line["id"]] = _recording(line)
    return found


def _recording(line: dict[str, Any]) -> dict[str, Any]:
    """A fixture line for display: its code steps or model response as text, the rest as JSON."""
    given = dict(line.get("input") or {})
    texts: list[list[str]] = []
    steps = given.get("steps")
    if isinstance(steps, list) and all(isinstance(step, str) for step in steps):
        del given["steps"]
        texts = [[f"step {number}", step[:_CAP]] for number, step in enumerate(steps, 1)]
    if isinstance(given.get("response"), str):
        texts.append(["model response", given.pop("response")[:_CAP]])
    return {"texts": texts, "input": _pretty(given), "expected": _pretty(line.get("expected"))}


def conformance_payload(paths: list[Path]) -> dict[str, Any]:
    """The embedded data of the page (see the module docstring)."""
    from ..conformance.report import SYMBOLS
    from ..conformance.suite_runner import KIND_ORDER, STATUSES

    columns: list[dict[str, Any]] = []
    cases: dict[str, dict[str, str]] = {}
    cells: list[dict[str, Any]] = []
    recorded: dict[str, dict[str, dict[str, Any]]] = {}
    deviations: dict[str, str] = {}
    restrictions: dict[str, str] = {}
    for path in paths:
        try:
            report = json.loads(path.read_text(encoding="utf-8"))
            python = ".".join(str(report["python"]).split(".")[:2])
            implementations = list(report["implementations"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ViewInputError(f"{path}: not `rlm-compat conformance --json` output ({exc})") from None
        roots = {
            "upstream": _fixture_root(str(report.get("fixtures", ""))),
            "cpython": _fixture_root(str(report.get("reference_fixtures", "")), reference=True),
        }
        for entry in report.get("deviations", []):
            deviations[str(entry.get("number"))] = str(entry.get("reason", ""))
        for entry in report.get("restrictions", []):
            restrictions[str(entry.get("number"))] = f"{entry.get('reason', '')}: {entry.get('why', '')}"
        for impl in implementations:
            oracle = str(impl.get("oracle") or "upstream")
            root = roots.get(oracle)
            fixtures = {kind: str(name).split(" (")[0] for kind, name in impl.get("fixtures", {}).items()}
            results = {}
            for result in impl.get("results", []):
                cases.setdefault(
                    result["id"], {"kind": result.get("kind", ""), "topic": result.get("topic", "")}
                )
                results[result["id"]] = {k: v for k, v in result.items() if k not in ("id", "kind", "topic")}
                if "actual" in result:
                    results[result["id"]]["actual"] = _pretty(result["actual"])
            for kind, filename in fixtures.items():
                key = f"{python}/{filename}"
                wanted = {i for i, c in cases.items() if c["kind"] == kind}
                have = recorded.setdefault(key, {})
                have.update(_recorded(root, filename, wanted - have.keys()))
            columns.append(
                {
                    "name": impl.get("name", "?"),
                    "oracle": oracle,
                    "profile": str(
                        impl.get("info", {}).get("profile") or ("fixed" if oracle == "cpython" else "(none)")
                    ),
                    "python": python,
                    "gated": bool(impl.get("gated")),
                    "counts": impl.get("counts", {}),
                    "notes": impl.get("notes", []),
                    "fixtures": {kind: f"{python}/{name}" for kind, name in fixtures.items()},
                    "source": path.name,
                }
            )
            cells.append(results)
    order = {kind: i for i, kind in enumerate(KIND_ORDER)}
    ids = sorted(cases, key=lambda i: (order.get(cases[i]["kind"], 9), i))
    return {
        "statuses": list(STATUSES),
        "symbols": SYMBOLS,
        "columns": columns,
        "cases": [{"id": i, **cases[i]} for i in ids],
        "cells": cells,
        "recorded": recorded,
        "deviations": deviations,
        "restrictions": restrictions,
    }


def write_conformance(paths: list[Path], out: Path) -> list[Path]:
    """Write the conformance view of ``paths`` (result files) to ``out``."""
    payload = conformance_payload(paths)
    out.write_text(
        page(
            "conformance.html.j2",
            title="conformance: " + ", ".join(p.name for p in paths),
            view_kind="conformance",
            source=", ".join(str(p) for p in paths),
            payload=script_json(payload),
            columns=payload["columns"],
        ),
        encoding="utf-8",
    )
    return [out]
