"""``rlm-compat doctor``: which OS-level hardening layers this host gives a REPL worker, and, with
``--escape-assumed``, whether they stop plain Python that escaped RestrictedPython, and (the
built-in corpus) whether a parent holds against such a worker's crafted frames on its channel.

Exit status: 0; with ``--escape-assumed``, 1 when any program or channel attack was not stopped;
2 for an unreadable file or a file with no program.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add ``doctor`` to the main CLI's subparsers."""
    p = subparsers.add_parser(
        "doctor",
        help="show the worker's OS-level hardening layers on this host; run escape-assumed programs",
        description=(
            "Print which hardening layers (no_new_privs, not_dumpable, Landlock file system / network / "
            "scope, seccomp) a REPL worker gets on this host. With --escape-assumed, run the built-in "
            "corpus of escape-assumed programs, or those in FILE (plain Python blocks separated by a line "
            "'# ---'), each as unrestricted Python in its own hardened worker, and print one line per "
            "program: what it tried, whether it was stopped and by which layer. The built-in corpus also "
            "runs the channel attacks: crafted frames an escaped worker sends its parent (each parent in "
            "a child process), one line each. See docs/security.md."
        ),
    )
    p.add_argument(
        "--escape-assumed",
        nargs="?",
        const="",
        default=None,
        metavar="FILE",
        help="run the built-in corpus (no FILE) or FILE's programs; exit 1 if any got out",
    )
    p.set_defaults(handler=_doctor)


def _sharing() -> None:
    """Whether concurrent runs over one context share one copy of it here, and how it is counted."""
    from ..sandbox import sharing_threshold

    least = sharing_threshold(None)
    print("context sharing on this host:")
    if least is None:
        why = "every worker holds its own copy (no fork or descriptor passing here)"
        print(f"  {'templates':<15} {'absent':<7} {why}")
        return
    print(
        f"  {'templates':<15} {'active':<7} workers of runs over the same context of at least {least:,} "
        "characters are forked from one template process holding it: one copy in memory"
    )
    print(
        f"  {'accounting':<15} {'':<7} a worker's address-space allowance (Limits.memory_mb) still counts "
        "the context as data the host sent; proportional set size (PSS) counts the copy once, in the template"
    )


def _doctor(args: argparse.Namespace) -> int:
    from ..sandbox import describe_host

    print("worker hardening on this host:")
    for layer, active, why in describe_host():
        print(f"  {layer:<15} {'active' if active else 'absent':<7} {why}")
    _sharing()
    if args.escape_assumed is None:
        return 0
    from . import escape_assumed

    if args.escape_assumed:
        path = Path(args.escape_assumed)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            print(f"rlm-compat doctor: cannot read {path}: {exc}", file=sys.stderr)
            return 2
        programs = escape_assumed.parse_programs(text, path.name)
        if not programs:
            print(f"rlm-compat doctor: {path} holds no program", file=sys.stderr)
            return 2
    else:
        programs = list(escape_assumed.CORPUS)
    print(f"\nescape-assumed programs ({len(programs)}), each plain Python in a hardened worker:")
    verdicts = escape_assumed.run_programs(programs)
    for verdict in verdicts:
        print(f"  {verdict.line()}")
    out = [v for v in verdicts if not v.stopped]
    print(f"\n{len(verdicts) - len(out)} stopped, {len(out)} not stopped")
    if args.escape_assumed:
        return 1 if out else 0
    from . import escape_channel

    print(
        f"\nchannel attacks ({len(escape_channel.CORPUS)}), each crafted frames from an escaped worker "
        "to a parent in a child process:"
    )
    attacks = escape_channel.run_in_child()
    for attack in attacks:
        print(f"  {attack.line()}")
    through = [a for a in attacks if not a.stopped]
    print(f"\n{len(attacks) - len(through)} stopped, {len(through)} not stopped")
    return 1 if out or through else 0
