"""Self-contained HTML views of a run: a trajectory, a comparison directory, conformance results.

``rlm-compat view INPUT -o report.html`` (or :func:`write_view`) writes one HTML file that opens
from ``file://`` with no server and no network: a trajectory's call tree, a comparison's tables,
charts and ablation with a page per run, or the conformance matrix with filters. Needs the
``view`` extra (Jinja2, Pygments), imported only when a view is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .model import (
    Divergence,
    ReplayMarks,
    TrajectoryModel,
    ViewInputError,
    ViewMissingError,
    check_replay,
    from_events,
    read_divergence,
    replay_marks,
)
from .sources import detect, read_trajectory_model, register_reader

__all__ = [
    "Divergence",
    "ReplayMarks",
    "TrajectoryModel",
    "ViewInputError",
    "ViewMissingError",
    "detect",
    "from_events",
    "read_divergence",
    "read_trajectory_model",
    "register_reader",
    "replay_marks",
    "write_view",
]


def write_view(
    inputs: list[Path],
    out: Path,
    *,
    divergence: Path | None = None,
    replay_report: dict[str, Any] | None = None,
) -> list[Path]:
    """Write the view of ``inputs`` to ``out``; returns every file written (report first).

    One trajectory file, one ``compare`` output directory, or one or more conformance result files
    (their matrices side by side). ``divergence``: ``rlm-compat replay TRAJECTORY --json`` output
    for that trajectory, whose divergences are marked; ``replay_report``: the same report as data
    (``ReplayReport.to_dict()``, what ``rlm-compat replay --view`` passes).
    """
    if not inputs:
        raise ViewInputError("nothing to view: give a trajectory, a compare directory or conformance results")
    kinds = [detect(path) for path in inputs]
    if len(inputs) > 1 and set(kinds) != {"conformance"}:
        raise ViewInputError(
            "several inputs make one view only when all are conformance result files; got "
            + ", ".join(f"{path} ({kind})" for path, kind in zip(inputs, kinds, strict=True))
        )
    if (divergence is not None or replay_report is not None) and kinds != ["trajectory"]:
        raise ViewInputError("--divergence marks a trajectory: give one trajectory file with it")
    from .render import require

    require()
    if out.is_dir():
        raise ViewInputError(f"{out} is a directory: -o takes the HTML file to write")
    out.parent.mkdir(parents=True, exist_ok=True)
    if kinds[0] == "compare":
        from .comparison_page import write_compare

        return write_compare(inputs[0], out)
    if kinds[0] == "conformance":
        from .conformance_page import write_conformance

        return write_conformance(inputs, out)
    from .render import trajectory_page

    model = read_trajectory_model(inputs[0])
    if divergence is not None:
        model.replay = read_divergence(divergence)
        check_replay(model, model.replay, divergence)
    elif replay_report is not None:
        model.replay = replay_marks(replay_report)
        check_replay(model, model.replay, "the replay report")
    out.write_text(trajectory_page(model, source=str(inputs[0])), encoding="utf-8")
    return [out]
