"""``rlm-compat compare``: registered into the main CLI by :func:`register`."""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from ...shared.tooling_errors import ToolUsageError

__all__ = ["register"]

UPSTREAM_ENV = "RLM_COMPAT_UPSTREAM"


def register(commands: Any) -> None:
    """Add the ``compare`` subcommand to the main CLI's subparsers."""
    p = commands.add_parser(
        "compare",
        help="run a task suite through profiles, quirk ablations and implementations; tabulate, chart",
        description=(
            "Run every task of a suite under each --config (an rlm_compat profile) and through each "
            "--impl (an implementation's own loop in its own venv), --runs times, with the scripted "
            "policies (served to implementations by a loopback OpenAI-compatible endpoint) or a real "
            "model; write runs.jsonl, trajectories/, logs/, summary.md, summary.json and PNG charts to "
            "--out. Re-running the same command resumes: finished runs are skipped. Exits 1 when an "
            "--impl cannot start; a crash or hang of one is a graded failure with its error."
        ),
    )
    _add_grid_options(p)
    _add_model_options(p)
    _add_impl_options(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--no-charts", action="store_true", help="skip the PNG charts (no matplotlib needed)")
    p.set_defaults(handler=_compare)


def _add_grid_options(p: argparse.ArgumentParser) -> None:
    """What runs: the suite, the configs, how many runs, and where the results go."""
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


def _add_model_options(p: argparse.ArgumentParser) -> None:
    """How the runs are executed and how the RLM and its model are set up."""
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


def _add_impl_options(p: argparse.ArgumentParser) -> None:
    """Other implementations run beside the profiles, and how their venvs are found or made."""
    p.add_argument(
        "--impl",
        action="append",
        default=[],
        metavar="NAME[=PYTHON|=COMMAND]",
        help="run each task through this implementation's own loop (repeatable, beside --config): "
        "rlm_compat, ysz-2fb46cc, recursive-llm-0.5.0, rlms, dspy-rlm (=PYTHON: the interpreter of "
        "its venv), "
        "or any NAME=COMMAND speaking protocol 2 (docs/protocol.md)",
    )
    p.add_argument(
        "--impl-path",
        action="append",
        default=[],
        metavar="NAME=DIR",
        help="put DIR first on implementation NAME's sys.path (e.g. a pip --target install run by "
        "NAME=PYTHON; its dependencies must be importable there) (repeatable)",
    )
    p.add_argument(
        "--setup",
        action="store_true",
        help="create throwaway venvs for --impl peers given without an interpreter (pip from PyPI; "
        "ysz-2fb46cc: a clone of --upstream-bundle at 2fb46cc)",
    )
    p.add_argument(
        "--setup-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="keep --setup's venvs here and reuse them next time (default: a temporary directory)",
    )
    p.add_argument(
        "--upstream",
        type=Path,
        default=None,
        metavar="PATH",
        help="ysz/recursive-llm checkout at 2fb46cc for ysz-2fb46cc (default $RLM_COMPAT_UPSTREAM)",
    )
    p.add_argument(
        "--upstream-bundle",
        type=Path,
        default=None,
        metavar="FILE",
        help="git bundle of ysz/recursive-llm for --setup",
    )
    p.add_argument(
        "--time-limit",
        type=float,
        default=600.0,
        metavar="S",
        help="seconds an --impl run may take before it is killed and graded as a hang (default 600)",
    )


def _compare(args: argparse.Namespace) -> int:
    from .comparison import run_grid
    from .executors import executor_from_spec
    from .grid import GridJob, plan
    from .suite_registry import resolve_policy, resolve_suite

    if not args.time_limit > 0:
        raise ToolUsageError(f"--time-limit must be a number of seconds > 0, not {args.time_limit}")
    impls = _implementations(args)
    if any(impl.start == "in-process" for impl in impls) or args.model != "scripted":
        # litellm prints its "Provider List" banner for every unpriced model name (the scripted
        # endpoint's): the records carry what matters
        import litellm

        litellm.suppress_debug_info = True
    configs = _configs(args, impls)
    api_key = _api_key(args)
    suite = resolve_suite(args.suite)
    if impls and args.model == "scripted":
        _check_scripted_kinds(suite)
    job = GridJob(
        suite,
        resolve_policy(args.policy),
        api_base=args.api_base,
        api_key=api_key,
        max_iterations=args.max_iterations,
        isolation=args.isolation,
        max_retries=args.max_retries,
        implementations={impl.name: impl for impl in impls},
        time_limit=args.time_limit,
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
    return _report(args, outcome, {s.run_id for s in specs})


def _configs(args: argparse.Namespace, impls: list[Any]) -> list[Any]:
    """The grid's columns: the --config / --ablation profiles, then one per --impl."""
    from .grid import expand_configs
    from .impls import impl_config

    configs = (
        expand_configs(args.config, ablation=args.ablation)
        if args.config or args.ablation or not impls
        else []
    )
    configs += [impl_config(impl.name) for impl in impls]
    if len({impl.name for impl in impls}) != len(impls):
        raise ToolUsageError("an --impl NAME is given twice: each implementation is one column")
    given = {impl_config(impl.name) for impl in impls}
    for config in configs:
        if config.startswith("session:impl:") and config.removeprefix("session:") not in given:
            name = config.removeprefix("session:impl:")
            raise ToolUsageError(
                f"--config {config} needs --impl {name}: a session column of an implementation"
            )
    return configs


def _api_key(args: argparse.Namespace) -> str | None:
    """The key named by --api-key-env (unset variable: an error), or None."""
    if not args.api_key_env:
        return None
    api_key = os.environ.get(args.api_key_env)
    if not api_key:
        raise ToolUsageError(f"--api-key-env {args.api_key_env}: that variable is not set")
    return api_key


def _check_scripted_kinds(suite: Any) -> None:
    """The scripted endpoint serves only the built-in kinds' policies to other implementations."""
    from ..task_policies import POLICIES

    missing = sorted({spec.kind for spec in suite.tasks()} - set(POLICIES))
    if missing:
        raise ToolUsageError(
            f"the scripted endpoint serves the built-in kinds' policies ({', '.join(POLICIES)}); "
            f"suite {suite.name!r} has kinds {missing}: run --impl with a real --model"
        )


def _report(args: argparse.Namespace, outcome: Any, ran: set[str]) -> int:
    """Print the pass rates per config; 1 when an --impl could not start in this invocation."""
    from .impls import CANNOT_START

    print(
        f"{outcome.planned} runs planned, {outcome.skipped} already done, {outcome.ran} run now; "
        f"{args.out / 'summary.md'}"
    )
    for row in outcome.summary["by_config"]:
        print(
            f"  {row['config']:<40} pass {100 * row['pass_rate']:5.1f} %  "
            f"iterations {row['mean_iterations']:.2f}  runs {row['runs']}"
        )
    dead = sorted(
        {
            (r.spec.config, r.error or "")
            for r in outcome.records
            if r.spec.run_id in ran and r.error_type == CANNOT_START
        }
    )
    for config, error in dead:
        print(f"FAILED: {config} could not start: {error[:400]}")
    return 1 if dead else 0


def _implementations(args: argparse.Namespace) -> list[Any]:
    """The --impl entries, set up by --setup where asked (venvs under --setup-dir or a temp dir)."""
    import dataclasses
    import tempfile

    from .impls import parse_grid_impl, setup_implementations

    if not args.impl:
        return []
    checkout = args.upstream or (Path(os.environ[UPSTREAM_ENV]) if os.environ.get(UPSTREAM_ENV) else None)
    impls = [parse_grid_impl(spec, checkout=checkout) for spec in args.impl]
    extra: dict[str, list[str]] = {}
    for item in args.impl_path:
        name, sep, directory = item.partition("=")
        if not sep or not directory or name not in {impl.name for impl in impls}:
            raise ToolUsageError(f"--impl-path {item!r}: give NAME=DIR for an --impl NAME")
        extra.setdefault(name, []).append(directory)
    impls = [dataclasses.replace(i, paths=(*extra.get(i.name, ()), *i.paths)) for i in impls]
    if not args.setup:
        for impl in impls:
            if impl.start == "driver":
                impl.argv()  # a missing interpreter, checkout or runtime fails before any run
        return impls
    directory = args.setup_dir
    if directory is None:
        directory = Path(tempfile.mkdtemp(prefix="rlm-compare-setup-"))
        atexit.register(shutil.rmtree, directory, ignore_errors=True)
    directory.mkdir(parents=True, exist_ok=True)
    return setup_implementations(
        impls,
        directory,
        bundle=args.upstream_bundle,
        progress=lambda message: print(f"setup: {message}", file=sys.stderr, flush=True),
    )
