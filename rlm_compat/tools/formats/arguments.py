"""The arguments the commands that read a recorded run share (``replay`` and ``quirks``): the
formats they name and the context they re-execute over."""

from __future__ import annotations

import argparse

__all__ = ["FORMAT_CHOICES", "context_arguments", "read_context"]

FORMAT_CHOICES = ("rlm_compat", "rlms", "dspy", "dspy-log", "la3d-events", "la3d-eval", "fabric-rlm")
"""The readers' formats (:data:`.foreign_runs.FORMATS`, written out: a parser imports no reader)."""


def context_arguments(p: argparse.ArgumentParser) -> None:
    """``--context-file`` / ``--context`` / ``--no-context``: trajectories keep only the context's size."""
    source = p.add_mutually_exclusive_group()
    source.add_argument(
        "--context-file",
        action="extend",
        nargs="+",
        metavar="PATH",
        help="the context the run was given, named as `rlm-compat run --context-file` named it: a file, "
        "a directory, a glob or - for stdin, repeatable (run it from the same directory: several files "
        "become one string with each path in a header)",
    )
    source.add_argument("--context", help="the context text itself")
    source.add_argument(
        "--no-context", action="store_true", help="replay over an empty context (the recorded one is unknown)"
    )


def read_context(args: argparse.Namespace) -> str | None:
    """The context the arguments name; None when none was given."""
    if args.no_context:
        return ""
    if args.context_file is not None:
        from ..shared.run_context import load_context

        return load_context(args.context_file).text  # ContextInputError: a ToolUsageError
    return args.context if isinstance(args.context, str) else None
