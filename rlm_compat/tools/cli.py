"""``rlm-compat <command>``: the project's jobs from the shell.

Subcommands register themselves through small ``register(subparsers)`` functions so this module
stays a table of contents; heavy imports happen inside the command that needs them.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from .. import __version__
from ..errors import REPLError, RLMError
from .shared.tooling_errors import ToolError

__all__ = ["build_parser", "main"]

Handler = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (exposed for docs and tests)."""
    parser = argparse.ArgumentParser(
        prog="rlm-compat",
        description=(
            "Drop-in reimplementation of ysz/recursive-llm with behaviour profiles, "
            "a conformance suite and research tooling."
        ),
    )
    parser.add_argument("--version", action="version", version=f"rlm-compat {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="<command>")
    from .run_cli import register as register_run

    register_run(commands)
    from .profiles_cli import register as register_profiles

    register_profiles(commands)
    from .dropin_cli import register as register_dropin

    register_dropin(commands)
    from .conformance.conformance_cli import register as register_conformance

    register_conformance(commands)
    from .conformance.oracle_cli import register as register_oracle

    register_oracle(commands)
    from .view.view_cli import register as register_view

    register_view(commands)
    from .replay_cli import register as register_replay

    register_replay(commands)
    from .research.ablation.quirks_cli import register as register_quirks

    register_quirks(commands)
    from .research.baselines.baseline_cli import register as register_baseline

    register_baseline(commands)
    from .research.compare.compare_cli import register as register_compare

    register_compare(commands)
    from .research.real_trajectories.real_corpus_cli import register as register_real_corpus

    register_real_corpus(commands)
    from .doctor_cli import register as register_doctor

    register_doctor(commands)
    from .serve.serve_cli import register as register_serve

    register_serve(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit code."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    passed_on: list[str] = []
    if "--" in argv:  # everything after `--` belongs to the tool a command runs (pytest)
        cut = argv.index("--")
        argv, passed_on = argv[:cut], argv[cut + 1 :]
    args = parser.parse_args(argv)
    if hasattr(args, "pytest_args"):
        args.pytest_args = [*args.pytest_args, *passed_on]
    elif passed_on:
        parser.error(f"unrecognized arguments after --: {' '.join(passed_on)}")
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        return handler(args)
    except (RLMError, REPLError, ToolError) as exc:
        print(f"rlm-compat {args.command}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return INTERRUPTED
    except BrokenPipeError:
        # stdout's reader went away (`rlm-compat replay ... | head`): stop quietly, as Unix tools do,
        # and keep Python's exit-time flush from raising again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


INTERRUPTED = 130


def console_main() -> NoReturn:
    """The ``rlm-compat`` console script and ``python -m rlm_compat``: :func:`main`, then exit.

    After Ctrl-C the process ends at once, without the interpreter's teardown: garbage-collecting
    litellm's module graph at exit took seconds on an idle machine and over a minute under load,
    while an interrupted command has already written what it keeps (``run``: its partial
    trajectory) and its one line on stderr.
    """
    code = main()
    if code == INTERRUPTED:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)
    sys.exit(code)
