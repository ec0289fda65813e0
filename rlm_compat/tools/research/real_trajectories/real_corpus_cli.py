"""``rlm-compat real-corpus``: implementations and quirks on real model code (registered by :func:`register`).

Exit status: 0 with the page written (or printed), 2 for an unusable corpus or implementation.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ....errors import ConfigurationError
from ...shared.tooling_errors import ToolUsageError

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add ``real-corpus`` to the main CLI's subparsers."""
    p = subparsers.add_parser(
        "real-corpus",
        help="run the corpus of real model code through implementations and quirks; the markdown page",
        description=(
            "Replay every code step of real_corpus/steps.jsonl (real models' code, with provenance) in "
            "plain CPython, rlm_compat fixed and upstream, and every --impl given (a conformance "
            "implementation: ysz-2fb46cc=PYTHON with --upstream CHECKOUT, recursive-llm-0.5.0=PYTHON, "
            "rlms-0.1.1=PYTHON, or NAME=COMMAND speaking docs/protocol.md); judge each step against "
            "CPython; measure each upstream quirk alone (docs/research/real-trajectories.md)."
        ),
    )
    p.add_argument("--corpus", type=Path, default=None, help="default: real_corpus/steps.jsonl")
    p.add_argument(
        "--impl", action="append", default=[], metavar="SPEC", help="another implementation (repeatable)"
    )
    p.add_argument(
        "--upstream", type=Path, default=None, help="the ysz/recursive-llm checkout, for ysz-2fb46cc"
    )
    p.add_argument("--no-quirks", action="store_true", help="skip the per-quirk runs")
    p.add_argument(
        "--out", type=Path, default=None, help="write the page here and its record beside it (.json)"
    )
    p.add_argument(
        "--keep-rows",
        action="store_true",
        help="keep the rows of implementations not run this time from the existing record beside --out "
        "(peers do not depend on rlm_compat: after a sandbox change, rerun without their interpreters)",
    )
    p.set_defaults(handler=_real_corpus)


def _real_corpus(args: argparse.Namespace) -> int:
    from .real_corpus import CHART, DEFAULT_IMPLS, load_corpus, measure, render, write_chart

    try:
        steps = load_corpus(args.corpus)
        options: dict[str, Any] = {"isolation": "inline"}
        if args.upstream is not None:
            options["checkout"] = args.upstream
        record = measure(
            steps, [*DEFAULT_IMPLS, *args.impl], quirks=not args.no_quirks, corpus=args.corpus, **options
        )
    except (ConfigurationError, ToolUsageError, OSError, ValueError) as exc:
        print(f"rlm-compat real-corpus: {exc}", file=sys.stderr)
        return 2
    if args.keep_rows:
        if args.out is None or not args.out.with_suffix(".json").exists():
            print(
                "rlm-compat real-corpus: --keep-rows needs --out with its record beside it", file=sys.stderr
            )
            return 2
        old = json.loads(args.out.with_suffix(".json").read_text(encoding="utf-8"))
        corpus_key = next(k for k in record["inputs"] if k.endswith("steps.jsonl"))
        if old.get("inputs", {}).get(corpus_key) != record["inputs"][corpus_key]:
            print(
                "rlm-compat real-corpus: --keep-rows: the corpus changed; run every implementation",
                file=sys.stderr,
            )
            return 2
        for name, row in old["implementations"].items():
            record["implementations"].setdefault(name, row)
    page = render(record)
    if args.out is None:
        print(page)
        return 0
    try:
        write_chart(record, args.out.with_name(CHART))
    except ToolUsageError as exc:
        print(f"rlm-compat real-corpus: {exc}", file=sys.stderr)
        return 2
    args.out.write_text(page, encoding="utf-8")
    args.out.with_suffix(".json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out} and {args.out.with_suffix('.json')}", file=sys.stderr)
    return 0
