"""A grid's records summarised: per (config, size) figures, the single-quirk ablation, markdown.

:func:`summarize` turns run records into plain data (``summary.json``, documented in
docs/research/compare.md); :func:`markdown` renders that data, so the tables and any later view
read the same numbers.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from statistics import fmean
from typing import Any

from ..base import RunRecord

__all__ = ["SUMMARY_SCHEMA", "SUMMARY_VERSION", "markdown", "summarize"]

SUMMARY_SCHEMA = "rlm_compat.compare.summary"
SUMMARY_VERSION = 1

_SCORING_GRADERS = ("oolong-numeric", "pairs-f1")
_ABLATIONS = {"upstream-without": ("upstream", "off_in_upstream"), "fixed-with": ("fixed", "on_in_fixed")}


def _figures(records: Sequence[RunRecord]) -> dict[str, Any]:
    passed = sum(r.grade.passed for r in records)
    priced = [r for r in records if r.cost_usd is not None]
    return {
        "runs": len(records),
        "passed": passed,
        "pass_rate": round(passed / len(records), 6),
        "errors": sum(r.error_type is not None for r in records),
        "mean_iterations": round(fmean(r.iterations for r in records), 6),
        "mean_calls": round(fmean(r.calls for r in records), 6),
        "mean_prompt_tokens": round(fmean(r.prompt_tokens for r in records), 6),
        "mean_completion_tokens": round(fmean(r.completion_tokens for r in records), 6),
        "mean_tokens": round(fmean(r.prompt_tokens + r.completion_tokens for r in records), 6),
        "mean_wall_seconds": round(fmean(r.wall_seconds for r in records), 6),
        "mean_score": round(fmean(r.grade.value for r in records), 6),
        "priced_runs": len(priced),
        "mean_cost_usd": round(fmean(r.cost_usd for r in priced if r.cost_usd is not None), 8)
        if priced
        else None,
    }


def summarize(
    records: Iterable[RunRecord], sizes: dict[str, int], configs: Sequence[str] = ()
) -> dict[str, Any]:
    """The summary of ``records``; ``sizes`` maps task id to context size (characters).

    ``configs`` orders the configs (those given first, then ``fixed``, ``upstream``, then any
    other found, sorted). Ablation
    rows compare ``upstream-without:q`` with ``upstream`` and ``fixed-with:q`` with ``fixed``
    over the tasks both ran, so a partial grid never compares different task sets.
    """
    records = list(records)
    found = {r.spec.config for r in records}
    given = [c for c in configs if c in found]
    given += [c for c in ("fixed", "upstream") if c in found and c not in given]
    order = given + sorted(found - set(given))
    by_config: dict[str, list[RunRecord]] = {c: [] for c in order}
    for r in records:
        by_config[r.spec.config].append(r)
    all_sizes = sorted({sizes[r.spec.task_id] for r in records})
    cells = []
    for config in order:
        for size in all_sizes:
            group = [r for r in by_config[config] if sizes[r.spec.task_id] == size]
            if group:
                cells.append({"config": config, "size": size, **_figures(group)})
    graders = sorted({f"{r.grade.grader}@{r.grade.grader_version}" for r in records})
    turns = _turns(order, by_config, sizes)
    return {
        **({"turns": turns} if turns else {}),
        "schema": SUMMARY_SCHEMA,
        "schema_version": SUMMARY_VERSION,
        "suites": sorted({r.spec.suite for r in records}),
        "models": sorted({r.spec.model for r in records}),
        "graders": graders,
        "configs": order,
        "sizes": all_sizes,
        "runs": len(records),
        "by_config": [{"config": c, **_figures(by_config[c])} for c in order],
        "cells": cells,
        "ablation": _ablation(by_config),
        "ablation_by_size": [
            {"size": size, **row}
            for size in all_sizes
            for row in _ablation(
                {c: [r for r in group if sizes[r.spec.task_id] == size] for c, group in by_config.items()}
            )
        ],
    }


def _turns(
    order: Sequence[str], by_config: dict[str, list[RunRecord]], sizes: dict[str, int]
) -> list[dict[str, Any]]:
    """Per (config, kind, size, turn): the multi-question runs' figures question by question."""
    rows = []
    for config in order:
        keys = sorted(
            {(r.spec.task_id.split("-")[0], sizes[r.spec.task_id]) for r in by_config[config] if r.turns}
        )
        for kind, size in keys:
            group = [
                r
                for r in by_config[config]
                if r.turns and r.spec.task_id.split("-")[0] == kind and sizes[r.spec.task_id] == size
            ]
            for index in range(max(len(r.turns) for r in group)):
                turns = [r.turns[index] for r in group if len(r.turns) > index]
                rows.append(
                    {
                        "config": config,
                        "kind": kind,
                        "size": size,
                        "turn": index + 1,
                        "runs": len(turns),
                        "pass_rate": round(fmean(t.grade.passed for t in turns), 6),
                        "mean_calls": round(fmean(t.calls for t in turns), 6),
                        "mean_tokens": round(fmean(t.prompt_tokens + t.completion_tokens for t in turns), 6),
                        "mean_wall_seconds": round(fmean(t.wall_seconds for t in turns), 6),
                        "mean_context_chars": round(fmean(t.context_chars for t in turns), 6),
                    }
                )
    return rows


def _ablation(by_config: dict[str, list[RunRecord]]) -> list[dict[str, Any]]:
    rows = []
    for config, group in by_config.items():
        base, _, quirk = config.partition(":")
        if base not in _ABLATIONS or "," in quirk:
            continue
        baseline_name, direction = _ABLATIONS[base]
        baseline = by_config.get(baseline_name, [])
        keys = {(r.spec.task_id, r.spec.run_index) for r in group} & {
            (r.spec.task_id, r.spec.run_index) for r in baseline
        }
        if not keys:
            continue
        mine = _figures([r for r in group if (r.spec.task_id, r.spec.run_index) in keys])
        theirs = _figures([r for r in baseline if (r.spec.task_id, r.spec.run_index) in keys])
        rows.append(
            {
                "quirk": quirk,
                "direction": direction,
                "config": config,
                "baseline": baseline_name,
                "runs": mine["runs"],
                "pass_rate": mine["pass_rate"],
                "baseline_pass_rate": theirs["pass_rate"],
                "delta_pass_rate": round(mine["pass_rate"] - theirs["pass_rate"], 6),
                "mean_iterations": mine["mean_iterations"],
                "baseline_mean_iterations": theirs["mean_iterations"],
                "delta_iterations": round(mine["mean_iterations"] - theirs["mean_iterations"], 6),
            }
        )
    return rows


def _size(chars: int) -> str:
    for unit, scale in (("M", 1_000_000), ("k", 1_000)):
        if chars >= scale and chars % (scale // 10) == 0:
            return f"{chars / scale:g} {unit}"
    return str(chars)


def _pct(rate: float) -> str:
    return f"{100 * rate:.1f} %"


def _signed(value: float, scale: float = 1.0, suffix: str = "", digits: int = 1) -> str:
    return f"{value * scale:+.{digits}f}{suffix}"


def _scored(summary: dict[str, Any]) -> bool:
    """Whether the grid has partial scores, costs or implementations (then a table shows them)."""
    return any(
        row["priced_runs"] or str(row["config"]).startswith("impl:") for row in summary["cells"]
    ) or any(g.split("@")[0] in _SCORING_GRADERS for g in summary["graders"])


def _turn_lines(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The *By turn* section (nothing when the grid has no multi-question task)."""
    if not rows:
        return []
    lines = [
        "",
        "## By turn",
        "",
        "Multi-question tasks question by question: `session:` configs ask them in one persistent "
        "session, the others run a fresh RLM per question. Context: characters handed to the RLM "
        "with the question (a session's later turns find it in their REPL).",
        "",
        "| config | task | context | turn | runs | pass rate | mean calls | mean tokens | mean wall s "
        "| context chars sent |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| `{row['config']}` | {row['kind']} | {_size(row['size'])} | {row['turn']} | "
            f"{row['runs']} | {_pct(row['pass_rate'])} | {row['mean_calls']:.2f} | "
            f"{row['mean_tokens']:.0f} | {row['mean_wall_seconds']:.3f} | "
            f"{row['mean_context_chars']:,.0f} |"
        )
    return lines


def markdown(summary: dict[str, Any], charts: Sequence[str] = ()) -> str:
    """``summary.md``: the per-config table, the per (config, size) table, the ablation table."""
    lines = [
        "# Comparison grid",
        "",
        f"Suites: {', '.join(summary['suites']) or '-'}; models: {', '.join(summary['models']) or '-'}; "
        f"graders: {', '.join(summary['graders']) or '-'}; {summary['runs']} runs.",
        "",
        "## By config",
        "",
        "| config | runs | pass rate | errors | mean iterations | mean calls | mean tokens | mean wall s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in summary["by_config"]:
        lines.append(
            f"| `{row['config']}` | {row['runs']} | {_pct(row['pass_rate'])} | {row['errors']} | "
            f"{row['mean_iterations']:.2f} | {row['mean_calls']:.2f} | {row['mean_tokens']:.0f} | "
            f"{row['mean_wall_seconds']:.3f} |"
        )
    lines += [
        "",
        "## By config and context size",
        "",
        "| config | context | runs | pass rate | mean iterations | mean calls | mean tokens | mean wall s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in summary["cells"]:
        lines.append(
            f"| `{row['config']}` | {_size(row['size'])} | {row['runs']} | {_pct(row['pass_rate'])} | "
            f"{row['mean_iterations']:.2f} | {row['mean_calls']:.2f} | {row['mean_tokens']:.0f} | "
            f"{row['mean_wall_seconds']:.3f} |"
        )
    lines += _turn_lines(summary.get("turns") or [])
    if _scored(summary):
        lines += [
            "",
            "## Scores and cost",
            "",
            "Mean score: the graders' partial credit (OOLONG's 0.75^|y - y_hat|, OOLONG-Pairs' F1; "
            "1 or 0 for exact graders). Cost: as the implementation reported it, over priced runs.",
            "",
            "| config | context | runs | pass rate | mean score | mean iterations | mean calls "
            "| mean cost $ | errors |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for row in summary["cells"]:
            cost = "-" if row["mean_cost_usd"] is None else f"{row['mean_cost_usd']:.4f}"
            lines.append(
                f"| `{row['config']}` | {_size(row['size'])} | {row['runs']} | {_pct(row['pass_rate'])} | "
                f"{row['mean_score']:.3f} | {row['mean_iterations']:.2f} | {row['mean_calls']:.2f} | "
                f"{cost} | {row['errors']} |"
            )
    if summary["ablation"]:
        lines += [
            "",
            "## Single-quirk ablation",
            "",
            "Each quirk turned off alone from `upstream`, and turned on alone in `fixed`; deltas against "
            "that baseline over the same tasks and run indexes.",
            "",
            "| quirk | change | runs | pass rate | Δ pass rate | mean iterations | Δ iterations |",
            "|---|---|---:|---:|---:|---:|---:|",
        ]
        for row in sorted(summary["ablation"], key=lambda r: (r["direction"], r["quirk"])):
            change = "off in upstream" if row["direction"] == "off_in_upstream" else "on in fixed"
            lines.append(
                f"| `{row['quirk']}` | {change} | {row['runs']} | {_pct(row['pass_rate'])} | "
                f"{_signed(row['delta_pass_rate'], 100, ' pp')} | {row['mean_iterations']:.2f} | "
                f"{_signed(row['delta_iterations'], digits=2)} |"
            )
    if charts:
        lines += ["", "## Charts", ""]
        lines += [f"![{name}]({name})" for name in charts]
    return "\n".join(lines) + "\n"
