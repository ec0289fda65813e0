"""``rlm-compat compare``: registered into the main CLI by :func:`register`."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

__all__ = ["register"]


def register(commands: Any) -> None:
    """Add the ``compare`` subcommand to the main CLI's subparsers."""
    p = commands.add_parser(
        "compare",
        help="run a task suite through profiles (and quirk ablations) and tabulate, chart the results",
        description=(
            "Run every task of a suite under each --config, --runs times, with the scripted policies or "
            "a real model; write runs.jsonl, trajectories/, summary.md, summary.json and PNG charts to "
            "--out. Re-running the same command resumes: finished runs are skipped."
        ),
    )
    p.add_argument("--suite", required=True, help="built-in suite name, or package.module:attr of your own")
    p.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="SPEC",
        help="profile spec: fixed, upstream, upstream-without:<quirk>, fixed-with:<quirk> (repeatable)",
    )
    p.add_argument(
        "--ablation",
        action="store_true",
        help="add fixed, upstream, and each quirk turned off alone from upstream / on alone in fixed",
    )
    p.add_argument(
        "--model", default="scripted", help="'scripted' (the tasks' policies) or a litellm model name"
    )
    p.add_argument("--runs", type=int, default=1, help="runs per (task, config) (default 1)")
    p.add_argument("--out", type=Path, required=True, help="output directory (resumed if it exists)")
    p.add_argument(
        "--executor",
        default="local",
        metavar="local|ray[=ADDRESS]",
        help="local: this process (default); ray: a Ray on this machine; ray=ADDRESS: a cluster",
    )
    p.add_argument("--concurrency", type=int, default=4, help="concurrent runs of the local executor")
    p.add_argument("--api-base", default=None, help="OpenAI-compatible server for a litellm model")
    p.add_argument(
        "--api-key-env", default=None, metavar="VAR", help="environment variable holding the API key"
    )
    p.add_argument("--max-iterations", type=int, default=30, help="RLM max_iterations per run (default 30)")
    p.add_argument(
        "--max-retries", type=int, default=None, help="litellm retries on rate limits / transient errors"
    )
    p.add_argument("--isolation", default=None, help="REPL isolation (default: the profile's)")
    p.add_argument("--policy", default=None, help="package.module:attr, a (task, spec) -> client factory")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--no-charts", action="store_true", help="skip the PNG charts (no matplotlib needed)")
    p.set_defaults(handler=_compare)


def _compare(args: argparse.Namespace) -> int:
    from ..errors import ConfigurationError
    from .compare import run_grid
    from .executors import executor_from_spec
    from .grid import GridJob, expand_configs, plan
    from .registry import resolve_policy, resolve_suite

    configs = expand_configs(args.config, ablation=args.ablation)
    api_key = None
    if args.api_key_env:
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            raise ConfigurationError(f"--api-key-env {args.api_key_env}: that variable is not set")
    suite = resolve_suite(args.suite)
    job = GridJob(
        suite,
        resolve_policy(args.policy),
        api_base=args.api_base,
        api_key=api_key,
        max_iterations=args.max_iterations,
        isolation=args.isolation,
        max_retries=args.max_retries,
    )
    specs = plan(suite, configs, args.model, args.runs)
    executor = executor_from_spec(args.executor, concurrency=args.concurrency)
    outcome = run_grid(
        job,
        specs,
        args.out,
        executor,
        configs=configs,
        progress=not args.no_progress,
        charts=not args.no_charts,
    )
    print(
        f"{outcome.planned} runs planned, {outcome.skipped} already done, {outcome.ran} run now; "
        f"{args.out / 'summary.md'}"
    )
    for row in outcome.summary["by_config"]:
        print(
            f"  {row['config']:<40} pass {100 * row['pass_rate']:5.1f} %  "
            f"iterations {row['mean_iterations']:.2f}  runs {row['runs']}"
        )
    return 0
