"""``rlm-compat view``: registered into the main CLI by :func:`register`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

__all__ = ["register"]


def register(commands: Any) -> None:
    """Add ``view`` to the main CLI's subparsers."""
    p = commands.add_parser(
        "view",
        help="write a self-contained HTML view of a trajectory, a compare directory or conformance results",
        description=(
            "Write one HTML file (inline CSS and script, no network, opens from file://): the call "
            "tree of a trajectory, the tables, charts and ablation of an `rlm-compat compare` "
            "directory (with a page per run beside the report), or the filterable matrix of "
            "`rlm-compat conformance --json` results (several files: one matrix). Needs the "
            "view extra: pip install 'rlm-compat[view]'."
        ),
    )
    p.add_argument(
        "inputs",
        nargs="+",
        type=Path,
        metavar="TRAJECTORY|COMPARE_DIR|CONFORMANCE_RESULTS",
        help="a trajectory .jsonl, a compare output directory, or conformance --json files",
    )
    p.add_argument(
        "-o", "--output", type=Path, required=True, metavar="REPORT.html", help="the HTML file to write"
    )
    p.add_argument(
        "--divergence",
        type=Path,
        default=None,
        metavar="FILE.json",
        help="mark every step where a replay of this trajectory diverged: the output of "
        "`rlm-compat replay TRAJECTORY --json` (docs/view.md)",
    )
    p.set_defaults(handler=_view)


def _view(args: argparse.Namespace) -> int:
    from . import write_view

    written = write_view(list(args.inputs), args.output, divergence=args.divergence)
    extra = f" (+{len(written) - 1} run pages in {written[1].parent})" if len(written) > 1 else ""
    print(f"wrote {written[0]}{extra}", file=sys.stderr)
    return 0
