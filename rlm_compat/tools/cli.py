"""``rlm-compat <command>``: the project's jobs from the shell.

Subcommands register themselves through small ``register(subparsers)`` functions so this module
stays a table of contents; heavy imports happen inside the command that needs them.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from .. import __version__
from ..errors import REPLError, RLMError
from .shared.tool_errors import ToolError, ToolUsageError

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
    _register_profiles(commands)
    _register_dropin(commands)
    from .conformance.conformance_cli import register as register_conformance

    register_conformance(commands)
    from .view.view_cli import register as register_view

    register_view(commands)
    from .replay.replay_cli import register as register_replay

    register_replay(commands)
    from .research.quirks_cli import register as register_quirks

    register_quirks(commands)
    from .research.baseline_cli import register as register_baseline

    register_baseline(commands)
    from .research.compare_cli import register as register_compare

    register_compare(commands)
    from .research.real_corpus_cli import register as register_real_corpus

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
        return 130
    except BrokenPipeError:
        # stdout's reader went away (`rlm-compat replay ... | head`): stop quietly, as Unix tools do,
        # and keep Python's exit-time flush from raising again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


def _register_profiles(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = commands.add_parser(
        "profiles",
        help="list the behaviour profiles and their quirk switches",
        description="Show each quirk switch, whether the presets turn it on, and what it does.",
    )
    p.set_defaults(handler=_profiles)


def _profiles(args: argparse.Namespace) -> int:
    from ..profiles import QUIRKS, Profile

    fixed, upstream = Profile.fixed(), Profile.upstream()
    docs = _switch_docs()
    width = max(len(q) for q in QUIRKS)
    print(f"{'switch':<{width}}  fixed  upstream  what it does (when on)")
    for name in QUIRKS:
        doc = docs.get(name, "")
        print(
            f"{name:<{width}}  {'on' if getattr(fixed, name) else 'off':<5}  "
            f"{'on' if getattr(upstream, name) else 'off':<8}  {doc}"
        )
    return 0


def _switch_docs() -> dict[str, str]:
    """Each switch's attribute docstring, read from the source of profiles.py."""
    import ast
    import inspect

    from .. import profiles

    tree = ast.parse(inspect.getsource(profiles.Profile))
    body = tree.body[0].body  # type: ignore[attr-defined]
    return {
        node.target.id: " ".join(str(following.value.value).split())
        for node, following in itertools.pairwise(body)
        if isinstance(node, ast.AnnAssign)
        and isinstance(node.target, ast.Name)
        and isinstance(following, ast.Expr)
        and isinstance(following.value, ast.Constant)
    }


def _register_dropin(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = commands.add_parser(
        "dropin-tests",
        help="run recursive-llm's own tests against rlm_compat (rlm aliased to rlm_compat)",
        description=(
            "Run a recursive-llm test suite unmodified, with `rlm` and every submodule aliased to "
            "rlm_compat. With CHECKOUT: that ysz/recursive-llm checkout's tests/ (2fb46cc, cc7a826). "
            "Without: the sdist of a released version (--release, default 0.5.0) is downloaded with "
            "pip into a temporary directory and its tests run with that version's API semantics; "
            "its tests of internals are reported as out of scope "
            "(rlm_compat/tools/dropin_out_of_scope.toml). "
            "Extra arguments after -- go to pytest."
        ),
    )
    p.add_argument("checkout", type=Path, nargs="?", help="path to a ysz/recursive-llm checkout")
    p.add_argument("--release", default=None, help="released version to fetch and test (default 0.5.0)")
    p.add_argument("--profile", choices=("fixed", "upstream"), default="fixed")
    p.add_argument("--api", default=None, help="API semantics for a checkout: 2fb46cc (default) or 0.5")
    p.set_defaults(handler=_dropin, pytest_args=[])


def _dropin(args: argparse.Namespace) -> int:
    from .dropin_tests import run_release_tests, run_upstream_tests

    extra = list(args.pytest_args)
    if args.checkout is not None:
        if args.release is not None:
            raise ToolUsageError("give a checkout or --release, not both")
        return run_upstream_tests(args.checkout, profile=args.profile, api=args.api, pytest_args=extra)
    if args.api is not None:
        raise ToolUsageError("--api applies to a checkout; a release runs with its own semantics")
    report = run_release_tests(args.release or "0.5.0", profile=args.profile, pytest_args=extra)
    print(report.render())
    return 1 if report.failures else 0
