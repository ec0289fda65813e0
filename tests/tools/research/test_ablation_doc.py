"""The checked-in quirk ablation (docs/research/ablation/) stays consistent with its own records.

The summary, its markdown and the tables quoted in docs/research/quirk-ablation.md are all derived
from ``runs.jsonl``; recomputing them with the package's table code (no re-run) catches a doc or
summary edited by hand, or a table-code change that was not followed by re-rendering.
"""

from __future__ import annotations

import json
from typing import Any

from locations import ROOT

from rlm_compat.tools.research.base import RunRecord
from rlm_compat.tools.research.compare.grid import expand_configs
from rlm_compat.tools.research.compare.tables import markdown, summarize
from rlm_compat.tools.research.suites import load_suite

ROOT = ROOT
ABLATION = ROOT / "docs" / "research" / "ablation"
DOC = ROOT / "docs" / "research" / "quirk-ablation.md"


def _records() -> list[RunRecord]:
    lines = (ABLATION / "runs.jsonl").read_text(encoding="utf-8").splitlines()
    return [RunRecord.from_json(json.loads(line)) for line in lines if line.strip()]


def _summary() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((ABLATION / "summary.json").read_text(encoding="utf-8"))
    return data


def _tables(text: str) -> dict[str, list[str]]:
    """Markdown table lines grouped under their nearest preceding heading."""
    tables: dict[str, list[str]] = {}
    heading = ""
    for line in text.splitlines():
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        elif line.startswith("|"):
            tables.setdefault(heading, []).append(line)
    return tables


def test_summary_recomputes_from_the_records() -> None:
    records = _records()
    suite = load_suite("ablation")
    sizes = {spec.task_id: spec.size for spec in suite.specs}
    recomputed = summarize(records, sizes, expand_configs([], ablation=True))
    stored = _summary()
    extra = {k: stored.pop(k) for k in ("charts", "runs_file")}
    assert recomputed == stored
    assert extra == {"charts": ["pass_rate.png", "ablation.png"], "runs_file": "runs.jsonl"}
    md = (ABLATION / "summary.md").read_text(encoding="utf-8")
    assert markdown(recomputed, extra["charts"]) == md


def test_grid_meets_the_acceptance_shape() -> None:
    summary = _summary()
    records = _records()
    assert len({r.spec.run_id for r in records}) == len(records) == summary["runs"]
    kinds = {r.spec.task_id.split("-")[0] for r in records}
    assert len(kinds) >= 4
    assert len(summary["sizes"]) >= 3
    configs = set(summary["configs"])
    assert set(expand_configs([], ablation=True)) <= configs
    quirks_off = {row["quirk"] for row in summary["ablation"] if row["direction"] == "off_in_upstream"}
    quirks_on = {row["quirk"] for row in summary["ablation"] if row["direction"] == "on_in_fixed"}
    assert quirks_off == quirks_on and len(quirks_off) == (len(configs) - 2) // 2
    for chart in summary["charts"]:
        assert (ABLATION / chart).stat().st_size > 10_000


def test_doc_tables_are_quoted_from_the_summary() -> None:
    doc = DOC.read_text(encoding="utf-8")
    summary_md = (ABLATION / "summary.md").read_text(encoding="utf-8")
    source = _tables(summary_md)
    quoted = _tables(doc)
    summary_lines = set(summary_md.splitlines())
    numbers = [line for lines in quoted.values() for line in lines]
    assert numbers, "the doc quotes no table"
    for line in numbers:
        if line.startswith("| `"):
            assert line in summary_lines, f"doc row not in summary.md: {line}"
    for whole in ("By config", "Single-quirk ablation"):
        assert any(lines == source[whole] for lines in quoted.values()), (
            f"doc lacks the whole {whole!r} table"
        )
    assert "rlm-compat compare --suite ablation --ablation" in doc
    assert "![" in doc and "ablation/pass_rate.png" in doc and "ablation/ablation.png" in doc
