"""``rlm-compat dropin-tests``: recursive-llm's own tests run against rlm_compat (the runner is
:mod:`rlm_compat.tools.dropin_tests`).

Extra arguments after ``--`` reach pytest through ``args.pytest_args`` (the main CLI splits them off).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .shared.tooling_errors import ToolUsageError

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``dropin-tests`` to the main CLI's subparsers."""
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
