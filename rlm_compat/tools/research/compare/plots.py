"""PNG charts of a grid's summary: pass rate by config and context size, the ablation bars, and
(for grids with implementations or priced runs) iterations, calls and cost by config.

Drawn with matplotlib's object API on the Agg canvas (no pyplot, no display, no global state),
from the same summary data as the markdown tables. matplotlib is the optional ``research`` extra.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...shared.tooling_errors import ToolUsageError

__all__ = ["ABLATION_CHART", "COST_CHART", "PASS_RATE_CHART", "write_charts"]

PASS_RATE_CHART = "pass_rate.png"
ABLATION_CHART = "ablation.png"
COST_CHART = "cost_iterations.png"


def _figure(width: float, height: float) -> Any:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise ToolUsageError(
            "charts need matplotlib: pip install 'rlm-compat[research]' (or pass --no-charts)"
        ) from None
    figure = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _size_label(chars: int) -> str:
    for unit, scale in (("M", 1_000_000), ("k", 1_000)):
        if chars >= scale:
            return f"{chars / scale:g} {unit}"
    return f"{chars}"


def pass_rate_chart(summary: dict[str, Any], path: Path) -> None:
    """Grouped bars: one group per config, one bar per context size, length = pass rate.

    Up to eight configs the bars stand side by side; an ablation grid's dozens of configs get
    horizontal bars, one row per config, so every label stays readable."""
    configs, sizes = summary["configs"], summary["sizes"]
    rates = {(c["config"], c["size"]): c["pass_rate"] for c in summary["cells"]}
    groups = max(1, len(sizes))
    width = 0.8 / groups
    upright = len(configs) <= 8
    if upright:
        figure = _figure(max(6.0, 0.35 * len(configs) * groups + 4), 4.5)
    else:
        figure = _figure(9, 0.22 * len(configs) * max(1.5, 0.6 * groups) + 1.5)
    axes = figure.add_subplot()
    for i, size in enumerate(sizes):
        positions = [k + (i - (groups - 1) / 2) * width for k in range(len(configs))]
        values = [100 * rates.get((config, size), 0.0) for config in configs]
        label = f"{_size_label(size)} chars"
        if upright:
            axes.bar(positions, values, width=width, label=label)
        else:
            axes.barh(positions, values, height=width, label=label)
    if upright:
        slanted = len(configs) > 2 or any(len(c) > 12 for c in configs)
        axes.set_xticks(
            range(len(configs)), configs, rotation=35 if slanted else 0, ha="right" if slanted else "center"
        )
        axes.set_ylabel("pass rate (%)")
        axes.set_ylim(0, 105)
    else:
        axes.set_yticks(range(len(configs)), configs)
        axes.invert_yaxis()
        axes.set_xlabel("pass rate (%)")
        axes.set_xlim(0, 105)
    axes.set_title("Pass rate by config and context size")
    axes.legend(title="context", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    figure.savefig(path, format="png")


def ablation_chart(summary: dict[str, Any], path: Path) -> None:
    """Bars per quirk: Δ pass rate (top) and Δ mean iterations (bottom), for each quirk turned off
    alone in upstream (left) and turned on alone in fixed (right); a zero delta shows as a dot."""
    panels = [
        ("off_in_upstream", "turned off alone (vs upstream)"),
        ("on_in_fixed", "turned on alone (vs fixed)"),
    ]
    metrics = [
        ("delta_pass_rate", 100.0, "Δ pass rate (pp)", 5.0),
        ("delta_iterations", 1.0, "Δ iterations", 0.5),
    ]
    rows = summary["ablation"]
    per_panel = max(1, *(sum(r["direction"] == d for r in rows) for d, _ in panels))
    figure = _figure(12, 2 * (0.3 * per_panel + 1.2))
    for m, (key, scale, label, floor) in enumerate(metrics):
        for p, (direction, title) in enumerate(panels):
            axes = figure.add_subplot(len(metrics), len(panels), m * len(panels) + p + 1)
            mine = sorted((r for r in rows if r["direction"] == direction), key=lambda r: r["quirk"])
            values = [scale * r[key] for r in mine]
            better = 1.0 if key == "delta_pass_rate" else -1.0  # fewer iterations is better
            colours = ["tab:gray" if v == 0 else "tab:green" if v * better > 0 else "tab:red" for v in values]
            ys = range(len(mine))
            axes.barh(ys, values, color=colours)
            axes.scatter(
                [0.0] * sum(v == 0 for v in values),
                [y for y, v in zip(ys, values, strict=True) if v == 0],
                color="tab:gray",
                s=12,
            )
            axes.set_yticks(ys, [r["quirk"] for r in mine])
            axes.invert_yaxis()  # alphabetical from the top
            limit = max([floor, *(abs(v) for v in values)]) * 1.15
            axes.set_xlim(-limit, limit)
            axes.axvline(0, color="black", linewidth=0.8)
            axes.set_xlabel(label)
            axes.set_title(f"quirk {title}")
            if not mine:
                axes.text(0.5, 0.5, "no runs", transform=axes.transAxes, ha="center")
    figure.savefig(path, format="png")


def cost_chart(summary: dict[str, Any], path: Path) -> None:
    """Three panels per config (implementations included), one bar per context size: mean
    iterations, mean model calls, and mean cost in USD (mean tokens where no run was priced, as
    with the scripted endpoint)."""
    configs, sizes = summary["configs"], summary["sizes"]
    cells = {(c["config"], c["size"]): c for c in summary["cells"]}
    priced = any(c["priced_runs"] for c in summary["cells"])
    panels = [
        ("mean_iterations", "mean iterations"),
        ("mean_calls", "mean model calls"),
        (
            "mean_cost_usd" if priced else "mean_tokens",
            "mean cost (USD)" if priced else "mean tokens (unpriced)",
        ),
    ]
    groups = max(1, len(sizes))
    width = 0.8 / groups
    figure = _figure(max(10.0, 1.2 * len(configs) * 3 + 3), 4.2)
    for p, (key, label) in enumerate(panels):
        axes = figure.add_subplot(1, len(panels), p + 1)
        for i, size in enumerate(sizes):
            positions = [k + (i - (groups - 1) / 2) * width for k in range(len(configs))]
            values = [float(cells.get((c, size), {}).get(key) or 0.0) for c in configs]
            axes.bar(positions, values, width=width, label=f"{_size_label(size)} chars")
        axes.set_xticks(range(len(configs)), configs, rotation=35, ha="right")
        axes.set_title(label)
    axes.legend(title="context", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    figure.savefig(path, format="png")


def write_charts(summary: dict[str, Any], out: Path) -> list[str]:
    """Write the charts the summary has data for into ``out``; their file names, in order."""
    written = []
    if summary["cells"]:
        pass_rate_chart(summary, out / PASS_RATE_CHART)
        written.append(PASS_RATE_CHART)
    if summary["ablation"]:
        ablation_chart(summary, out / ABLATION_CHART)
        written.append(ABLATION_CHART)
    if any(str(c).startswith("impl:") for c in summary["configs"]) or any(
        c["priced_runs"] for c in summary["cells"]
    ):
        cost_chart(summary, out / COST_CHART)
        written.append(COST_CHART)
    return written
