"""``rlm-compat quirks``: the per-quirk step cost table (registered by :func:`register`).

Exit status: 0 with the table on stdout, 2 for an unusable trajectory or argument.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ....config import ISOLATIONS
from ....errors import ConfigurationError, TrajectoryError
from ...formats.arguments import FORMAT_CHOICES, context_arguments, read_context
from ...shared.tooling_errors import ToolUsageError

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add ``quirks`` to the main CLI's subparsers."""
    p = subparsers.add_parser(
        "quirks",
        help="replay recorded model code under each single-quirk ablation; per-quirk step costs",
        description=(
            "Replay the code of recorded or imported trajectories (rlm_compat, rlms, dspy.RLM) under "
            "fixed, upstream, each upstream-without:<quirk> and each fixed-with:<quirk>, and print a "
            "markdown table of how many steps each quirk breaks (a step breaks under a profile when it "
            "errors or is not reached there but runs without error under fixed; see docs/replay.md)."
        ),
    )
    p.add_argument("trajectories", type=Path, nargs="+", help="trajectory files")
    p.add_argument("--isolation", choices=ISOLATIONS, default="inline", help="default: inline (fastest)")
    p.add_argument("--format", choices=FORMAT_CHOICES, default=None, help="default: detected")
    p.add_argument("--json", action="store_true", help="print the table's data as JSON instead")
    context_arguments(p)
    p.set_defaults(handler=_quirks)


def _quirks(args: argparse.Namespace) -> int:
    from .quirks import quirk_table

    def progress(profile: str) -> None:
        if sys.stderr.isatty():
            print(f"\rreplaying under {profile:<48}", end="", file=sys.stderr, flush=True)

    try:
        table = quirk_table(
            args.trajectories,
            context=read_context(args) if not args.no_context else None,
            isolation=args.isolation,
            format=args.format,
            progress=progress,
        )
    except (TrajectoryError, ConfigurationError, ToolUsageError) as exc:
        print(f"rlm-compat quirks: {exc}", file=sys.stderr)
        return 2
    if sys.stderr.isatty():
        print("\r" + " " * 70 + "\r", end="", file=sys.stderr)
    print(json.dumps(table.to_dict(), indent=2) if args.json else table.markdown())
    return 0
