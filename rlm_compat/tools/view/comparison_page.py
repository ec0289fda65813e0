"""The comparison view of an ``rlm-compat compare`` output directory.

Reads ``runs.jsonl`` (one :class:`~rlm_compat.tools.research.base.RunRecord` per line), the ``*.png``
charts and ``summary.json`` when present. Tables are computed here from the records, so the view
does not depend on how ``compare`` lays out its own summary; every cell links to a page per run,
written beside the report (``<report>_runs/run-NNNN.html``): relative links that work from
``file://`` and a report that stays small however many runs the grid has.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from ..research.base import RunRecord
from .model import ViewInputError
from .render import data_uri_png, group, page, short, trajectory_page
from .sources import read_trajectory_model

__all__ = ["ABLATION_PREFIXES", "load_runs", "write_compare"]

ABLATION_PREFIXES = {"upstream-without:": "upstream", "fixed-with:": "fixed"}
"""Single-switch ablation specs and the preset each is measured against."""


def load_runs(directory: Path) -> list[RunRecord]:
    """The records of ``runs.jsonl``, with the line number of any that cannot be read."""
    records = []
    path = directory / "runs.jsonl"
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(RunRecord.from_json(json.loads(line)))
        except (ValueError, TypeError, KeyError) as exc:
            raise ViewInputError(
                f"{path}:{number}: not a RunRecord line ({type(exc).__name__}: {exc})"
            ) from None
    if not records:
        raise ViewInputError(f"{path} holds no runs")
    return records


def _rate(records: list[RunRecord]) -> float:
    return sum(r.grade.passed for r in records) / len(records)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _column(record: RunRecord, models: int) -> str:
    return record.spec.config if models == 1 else f"{record.spec.config} \u00b7 {record.spec.model}"


def _ablation(records: list[RunRecord]) -> list[dict[str, Any]]:
    """One row per (model, ablated switch) whose baseline preset ran too."""
    rows = []
    by_cell = group(records, lambda r: (r.spec.model, r.spec.config))
    for (model, config), variant in by_cell.items():
        for prefix, preset in ABLATION_PREFIXES.items():
            if not config.startswith(prefix) or (model, preset) not in by_cell:
                continue
            baseline = by_cell[(model, preset)]
            base_task = {t: _rate(rs) for t, rs in group(baseline, lambda r: r.spec.task_id).items()}
            var_task = {t: _rate(rs) for t, rs in group(variant, lambda r: r.spec.task_id).items()}
            shared = sorted(base_task.keys() & var_task.keys())
            rows.append(
                {
                    "model": model,
                    "switch": config[len(prefix) :],
                    "direction": "switched off" if preset == "upstream" else "switched on",
                    "baseline": preset,
                    "config": config,
                    "baseline_rate": _rate(baseline),
                    "rate": _rate(variant),
                    "delta": _rate(variant) - _rate(baseline),
                    "broke": [t for t in shared if var_task[t] < base_task[t]],
                    "fixed": [t for t in shared if var_task[t] > base_task[t]],
                    "runs": len(variant),
                }
            )
    return sorted(rows, key=lambda row: (row["model"], row["baseline"], -abs(row["delta"]), row["switch"]))


def write_compare(directory: Path, out: Path) -> list[Path]:
    """Write the comparison report to ``out`` and one page per run beside it; returns every file written."""
    records = load_runs(directory)
    links, written = _write_run_pages(records, directory, out)
    models = len({r.spec.model for r in records})
    failures = [
        {
            "href": links[id(r)],
            "record": dataclasses.asdict(r),
            "answer": short(r.answer),
            "run_id": r.spec.run_id,
        }
        for r in records
        if not r.grade.passed
    ]
    out.write_text(
        page(
            "compare.html.j2",
            title=f"comparison: {directory.name}",
            view_kind="compare",
            source=str(directory),
            overview=_overview(records, models),
            columns=list(dict.fromkeys(_column(r, models) for r in records)),
            tasks=list(dict.fromkeys(r.spec.task_id for r in records)),
            cells=_cells(records, models, links),
            ablation=_ablation(records),
            charts=[{"name": p.name, "uri": data_uri_png(p)} for p in sorted(directory.glob("*.png"))],
            summary=_summary(directory),
            failures=failures,
            total=len(records),
        ),
        encoding="utf-8",
    )
    return [out, *written]


def _write_run_pages(
    records: list[RunRecord], directory: Path, out: Path
) -> tuple[dict[int, str], list[Path]]:
    """One page per run in ``<report>_runs/``: the link to each record's page, and the files written."""
    runs_dir = out.with_name(out.stem + "_runs")
    runs_dir.mkdir(parents=True, exist_ok=True)
    written = []
    links: dict[int, str] = {}
    for index, record in enumerate(records, 1):
        name = f"run-{index:04d}.html"
        links[id(record)] = f"{runs_dir.name}/{name}"
        model = None
        note = ""
        if record.trajectory:
            path = directory / record.trajectory
            if path.is_file():
                model = read_trajectory_model(path)
            else:
                note = f"trajectory file {record.trajectory} not found in {directory}"
        record_data = {**record.to_json(), "note": note}
        (runs_dir / name).write_text(
            trajectory_page(
                model,
                source=str(record.trajectory or ""),
                record=record_data,
                back_link=f"../{out.name}",
                title=" \u00b7 ".join((record.spec.task_id, record.spec.config, record.spec.model))
                + f" #{record.spec.run_index}",
            ),
            encoding="utf-8",
        )
        written.append(runs_dir / name)
    return links, written


def _cells(
    records: list[RunRecord], models: int, links: dict[int, str]
) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """The task x column matrix: per cell, each run's link, verdict and hover text."""
    cells: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in records:
        cells.setdefault((r.spec.task_id, _column(r, models)), []).append(
            {
                "href": links[id(r)],
                "passed": r.grade.passed,
                "title": short(f"{r.grade.reason} | answer: {r.answer}", 200),
            }
        )
    return cells


def _overview(records: list[RunRecord], models: int) -> list[dict[str, Any]]:
    """Per column: pass rate, errors and the mean iterations, calls, tokens, time, score and cost."""
    overview = []
    for column, rs in group(records, lambda r: _column(r, models)).items():
        overview.append(
            {
                "column": column,
                "runs": len(rs),
                "passed": sum(r.grade.passed for r in rs),
                "rate": _rate(rs),
                "errors": sum(1 for r in rs if r.error_type),
                "iterations": _mean([r.iterations for r in rs]),
                "calls": _mean([r.calls for r in rs]),
                "tokens": _mean([r.prompt_tokens + r.completion_tokens for r in rs]),
                "wall": _mean([r.wall_seconds for r in rs]),
                "score": _mean([r.grade.value for r in rs]),
                "cost": _mean([r.cost_usd for r in rs if r.cost_usd is not None])
                if any(r.cost_usd is not None for r in rs)
                else None,
            }
        )
    return overview


def _summary(directory: Path) -> str | None:
    """``summary.json`` re-indented for display, if the directory has one."""
    if not (directory / "summary.json").is_file():
        return None
    try:
        return json.dumps(json.loads((directory / "summary.json").read_text(encoding="utf-8")), indent=1)
    except ValueError as exc:
        raise ViewInputError(f"{directory / 'summary.json'}: not JSON ({exc})") from None
