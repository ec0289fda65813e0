"""``rlm-compat baseline``: registered into the main CLI by :func:`register`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ...shared.tooling_errors import ToolUsageError

__all__ = ["register"]


def register(commands: Any) -> None:
    """Add ``baseline`` to the main CLI's subparsers."""
    p = commands.add_parser(
        "baseline",
        help="measure the unofficial-baseline memo's facts on 2fb46cc, the peers and rlm_compat",
        description=(
            "Run every snippet of the unofficial-baseline memo (rlm_compat/tools/research/baseline_facts.py) "
            "on a ysz/recursive-llm 2fb46cc checkout under each --python, on the --peer venvs and on "
            "rlm_compat's profiles, and write the Markdown (--out) plus its JSON record (same name, "
            ".json). With --render-only, re-render the Markdown from the existing record."
        ),
    )
    p.add_argument("--upstream", type=Path, metavar="PATH", help="checkout of ysz/recursive-llm at 2fb46cc")
    p.add_argument(
        "--python",
        action="append",
        default=[],
        metavar="PY",
        help="interpreter with RestrictedPython and litellm to run 2fb46cc with (repeatable)",
    )
    p.add_argument(
        "--peer",
        action="append",
        default=[],
        metavar="NAME=PY",
        help="recursive-llm-0.5.0=PYTHON or rlms-0.1.1=PYTHON (its venv's interpreter; repeatable)",
    )
    p.add_argument(
        "--fixtures", type=Path, default=None, help="fixtures directory (default: the shipped one)"
    )
    p.add_argument("--out", type=Path, default=Path("docs/research/unofficial-baseline.md"))
    p.add_argument("--render-only", action="store_true", help="re-render the Markdown from the record")
    p.set_defaults(handler=_baseline)


def _baseline(args: argparse.Namespace) -> int:
    from ...conformance.fixtures import default_fixtures_dir
    from .baseline import collect, render

    record_path = args.out.with_suffix(".json")
    fixtures = args.fixtures or default_fixtures_dir()
    if args.render_only:
        if args.upstream or args.python or args.peer:
            raise ToolUsageError("--render-only uses the stored record; drop --upstream/--python/--peer")
        try:
            record = json.loads(record_path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ToolUsageError(f"cannot read the record {record_path}: {exc}") from None
    else:
        if args.upstream is None or not args.python:
            raise ToolUsageError("give --upstream CHECKOUT and at least one --python (or --render-only)")
        peers: dict[str, str] = {}
        for spec in args.peer:
            name, sep, python = spec.partition("=")
            if not sep or not python:
                raise ToolUsageError(f"--peer {spec!r}: give it as NAME=PYTHON")
            peers[name] = python
        # rendered from what is stored (keys sorted), exactly as --render-only and the test do
        record = json.loads(json.dumps(collect(args.upstream, args.python, peers), sort_keys=True))
        record_path.parent.mkdir(parents=True, exist_ok=True)
        record_path.write_text(
            json.dumps(record, indent=1, sort_keys=True, ensure_ascii=False) + "\n", "utf-8"
        )
    args.out.write_text(render(record, fixtures), encoding="utf-8")
    print(f"wrote {args.out} and {record_path}")
    return 0
