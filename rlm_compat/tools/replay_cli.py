"""``rlm-compat replay``: re-execute a recorded run's code under a profile (registered by :func:`register`).

Exit status: 0 when every step gives its recorded observation, 1 when a step diverges, 2 when the
trajectory or the arguments cannot be used (the message names the file and line).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..config import ISOLATIONS
from ..errors import ConfigurationError, TrajectoryError
from .formats.arguments import FORMAT_CHOICES, context_arguments, read_context
from .shared.tooling_errors import ToolUsageError

__all__ = ["FORMAT_CHOICES", "context_arguments", "read_context", "register"]
__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add ``replay`` to the main CLI's subparsers."""
    p = subparsers.add_parser(
        "replay",
        help="re-execute a recorded run's code under a profile and show where it diverges",
        description=(
            "Serve the recorded model replies again, re-execute every REPL step in a fresh session per "
            "RLM node, and print the first step whose observation differs from the recording (node, "
            "step, code, recorded and new observation), or 'identical'. Reads rlm_compat trajectories, "
            "rlms (0.1.1) JSONL logs, dspy.RLM trajectories and verbose logs (text or notebook), "
            "LA3D/rlm event logs and eval results, fabric-rlm trajectories. Exit status: 0 identical, "
            "1 diverged, 2 unusable input."
        ),
    )
    p.add_argument("trajectory", type=Path, help="the trajectory file")
    p.add_argument(
        "--profile",
        default=None,
        help="fixed, upstream, upstream-without:<switch>, fixed-with:<switch> (default: the recording's)",
    )
    p.add_argument("--isolation", choices=ISOLATIONS, default=None, help="default: the profile's")
    p.add_argument("--all", action="store_true", help="list every divergence, not only the first")
    p.add_argument("--json", action="store_true", help="print every step's outcome as JSON instead")
    p.add_argument(
        "--format",
        choices=FORMAT_CHOICES,
        default=None,
        help="the trajectory's format (default: detected)",
    )
    p.add_argument(
        "--api", default=None, help="REPL namespace preset: 2fb46cc or 0.5 (default: the recording's)"
    )
    p.add_argument("--timeout", type=float, default=None, help="seconds per step (default: the recording's)")
    p.add_argument(
        "--view",
        type=Path,
        default=None,
        metavar="REPORT.html",
        help="also write the trajectory's HTML view with every divergence marked (needs the view extra; "
        "the same as `rlm-compat view TRAJECTORY --divergence` of this command's --json output)",
    )
    context_arguments(p)
    p.set_defaults(handler=_replay)


def _replay(args: argparse.Namespace) -> int:
    from .formats.foreign_runs import load_run
    from .replay.replayer import replay

    try:
        if args.view is not None:
            from .view.render import require

            require()  # before the replay, not after it
        run = load_run(args.trajectory, args.format)
        for notice in run.notices:
            print(f"rlm-compat replay: notice: {notice}", file=sys.stderr)
        report = replay(
            run,
            profile=args.profile,
            isolation=args.isolation,
            context=read_context(args),
            timeout=args.timeout,
            same_context=not args.no_context,
            api=args.api,
        )
    except (TrajectoryError, ConfigurationError, ToolUsageError) as exc:
        print(f"rlm-compat replay: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
    else:
        print(report.render(every=args.all))
    if args.view is not None:
        from .view import write_view

        try:
            write_view([args.trajectory], args.view, replay_report=report.to_dict())
        except ToolUsageError as exc:
            print(f"rlm-compat replay: --view: {exc}", file=sys.stderr)
            return 2
        print(f"wrote {args.view}", file=sys.stderr)
    return 0 if report.identical else 1
