"""``rlm-compat oracle record|gate``: the CPython reference recordings and profile fixed's gate.

``record`` runs every REPL input under the ``cpython-reference`` implementation on each interpreter
given and writes ``reference_fixtures/`` (a maintainer's job, from a source checkout or with
``--out``); ``gate`` compares profile fixed with the running Python's recording.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..shared.package_paths import source_checkout

__all__ = ["register"]


def register(commands: Any) -> None:
    """Add ``oracle`` with its ``record`` and ``gate`` subcommands."""
    p = commands.add_parser(
        "oracle",
        help="record the CPython reference fixtures, or gate profile fixed against them",
        description=(
            "record: run the REPL inputs under the CPython reference executor on each --python "
            "(writes reference_fixtures/). gate: compare profile fixed with the recording of the "
            "running Python; exit 1 on any difference that is not a registered restriction."
        ),
    )
    sub = p.add_subparsers(dest="oracle_command", required=True, metavar="{record,gate}")
    rec = sub.add_parser("record", help="record the REPL inputs under the CPython reference executor")
    rec.add_argument("--python", action="append", required=True, help="an interpreter (repeat per version)")
    rec.add_argument(
        "--out",
        type=Path,
        default=None,
        help="directory (default: the source checkout's reference_fixtures/)",
    )
    rec.set_defaults(handler=_record)
    chk = sub.add_parser("gate", help="gate profile fixed against the recording of the running Python")
    chk.add_argument("--isolation", default="inline", choices=("inline", "process"))
    chk.set_defaults(handler=_gate)


def _record(args: argparse.Namespace) -> int:
    from .oracle import record

    out = (
        args.out or source_checkout("recording into reference_fixtures/", "--out DIR") / "reference_fixtures"
    )
    record(args.python, out)
    return 0


def _gate(args: argparse.Namespace) -> int:
    from .oracle import gate, load_reference, load_restrictions, run_fixed

    report = gate(load_reference(), load_restrictions(), lambda case: run_fixed(case, args.isolation))
    print(report.summary())
    return 0 if report.ok else 1
