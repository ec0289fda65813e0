"""``rlm-compat run QUERY``: one RLM completion from the shell, with live progress and exit codes.

The context comes from files, directories, globs or standard input (:mod:`rlm_compat.tools.run_context`
says how several files are laid out), or from ``--context`` text. Standard output carries only the
answer — or, with ``--json``, one JSON object with the answer and the run's stats — so the command
composes in pipes; everything else (live progress, ``--stats``, the one line a failure prints) goes
to standard error. Each way a run can end has its own exit code (:class:`ExitCode`, docs/cli.md).
"""

from __future__ import annotations

import argparse
import contextlib
import enum
import importlib.util
import json
import os
import sys
from collections.abc import Iterator
from typing import Any

from ..config import ISOLATION_ENV, ISOLATIONS, Limits, ReplConfig
from ..errors import (
    BudgetExceededError,
    ConfigurationError,
    LLMCallError,
    MaxDepthError,
    MaxIterationsError,
)
from .tool_errors import ToolUsageError

__all__ = ["ExitCode", "exit_code_for", "register"]

JSON_SCHEMA = "rlm_compat.run"
"""The ``schema`` field of ``--json`` output (with ``schema_version``)."""
JSON_SCHEMA_VERSION = 1


class ExitCode(enum.IntEnum):
    """How ``rlm-compat run`` ended (documented in docs/cli.md)."""

    OK = 0
    """The model gave a final answer."""
    ERROR = 1
    """Any other failure of the run (a REPL error that ended it, an unexpected exception)."""
    BAD_INPUT = 2
    """Bad command line or input: missing/binary/empty context, bad flag value, unwritable trajectory."""
    BUDGET_EXCEEDED = 3
    """A --max-calls / --max-tokens / --max-cost / --max-seconds limit was spent."""
    MAX_ITERATIONS = 4
    """--max-iterations model calls passed without a final answer."""
    MAX_DEPTH = 5
    """The RLM was started at --max-depth (e.g. --max-depth 0)."""
    PROVIDER_FAILURE = 6
    """The model provider failed: unreachable, an HTTP error after retries, an unusable reply."""
    INTERRUPTED = 130
    """Ctrl-C (SIGINT), as shells report it."""


PROGRESS_MODES = ("auto", "live", "plain", "off")


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``run`` subcommand (no heavy imports here: the parser is built on every command)."""
    p = commands.add_parser(
        "run",
        help="answer a query over files, a directory, a glob or stdin with a real model",
        description=(
            "Run one RLM completion and print the final answer on stdout (--json: answer and stats "
            "as one JSON object). Progress goes to stderr: a live status line on a terminal, plain "
            "lines otherwise. Exit codes: 0 answered, 1 other failure, 2 bad input, 3 budget "
            "exceeded, 4 max iterations, 5 max depth, 6 provider failure, 130 interrupted."
        ),
    )
    p.add_argument("query", help="the question")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--context-file",
        action="extend",
        nargs="+",
        metavar="PATH",
        help="file, directory (walked recursively), glob (quote it; ** for any depth) or - for stdin; "
        "repeatable. Several files become one string, each after a '==> path <==' header",
    )
    source.add_argument("--context", help="the context text itself")
    _add_model_options(p)
    _add_loop_options(p)
    _add_budget_options(p)
    _add_output_options(p)
    p.set_defaults(handler=run_command)


def _add_model_options(p: argparse.ArgumentParser) -> None:
    """Which model answers, and how it is reached."""
    model = p.add_argument_group("model")
    model.add_argument("--model", required=True, help="litellm model name, e.g. gpt-4o-mini")
    model.add_argument("--recursive-model", help="cheaper model for recursive calls")
    model.add_argument("--api-base", help="OpenAI-compatible base URL")
    model.add_argument("--api-key", help="API key (default: the provider's usual environment variable)")
    model.add_argument(
        "--max-retries",
        type=int,
        default=None,
        help="the RLM's retries of transient provider errors (default 2; 0 under api 0.5)",
    )


def _add_loop_options(p: argparse.ArgumentParser) -> None:
    """The RLM loop's profile and limits, and where and how model code runs."""
    loop = p.add_argument_group("loop and REPL")
    loop.add_argument(
        "--profile", default=None, help="fixed (default), upstream, or an ablation spec (see `profiles`)"
    )
    loop.add_argument(
        "--prompt-version",
        default=None,
        help="cc7a826, 2fb46cc or 0.5.0 (default: the API preset's, cc7a826 or 0.5.0)",
    )
    loop.add_argument("--max-iterations", type=int, default=30, help="model calls per RLM (default 30)")
    loop.add_argument("--max-depth", type=int, default=5, help="RLM recursion levels (default 5)")
    loop.add_argument(
        "--isolation",
        choices=ISOLATIONS,
        default=None,
        help=f"where model code runs: process (a killable worker; profile fixed's default) or inline "
        f"(the calling process; profile upstream's default); default ${ISOLATION_ENV} or the profile's",
    )
    loop.add_argument("--repl-timeout", type=float, default=5.0, help="seconds per REPL step (default 5)")
    loop.add_argument(
        "--memory-mb",
        type=int,
        default=Limits.memory_mb,
        help=f"memory model code may allocate per session (default {Limits.memory_mb})",
    )


def _add_budget_options(p: argparse.ArgumentParser) -> None:
    """The budget of the whole run tree (spent: exit code 3)."""
    budget = p.add_argument_group("budget of the whole run tree (exit code 3 when spent)")
    budget.add_argument("--max-calls", type=int, default=None, help="model calls (max_total_calls)")
    budget.add_argument(
        "--max-tokens", type=int, default=None, help="tokens over all calls (max_total_tokens)"
    )
    budget.add_argument("--max-cost", type=float, default=None, help="USD, litellm's estimate")
    budget.add_argument("--max-seconds", type=float, default=None, help="wall time (max_elapsed_seconds)")


def _add_output_options(p: argparse.ArgumentParser) -> None:
    """What goes to stdout, stderr and the trajectory file."""
    output = p.add_argument_group("output")
    output.add_argument(
        "--trajectory", metavar="PATH", help="write the run's events as JSON lines (docs/trajectory.md)"
    )
    output.add_argument(
        "--redact-trajectory", action="store_true", help="trajectory keeps text lengths, not texts"
    )
    output.add_argument("--json", action="store_true", help="stdout: one JSON object, answer and stats")
    output.add_argument(
        "--progress",
        choices=PROGRESS_MODES,
        default="auto",
        help="stderr progress: live (rich status line), plain (a line per step), off; "
        "auto: live on a terminal, plain otherwise",
    )
    output.add_argument("--stats", action="store_true", help="print stats to stderr")


def run_command(args: argparse.Namespace) -> int:
    """The ``run`` handler: load the context, run with progress, report; returns the exit code."""
    from .run_context import ContextInputError, load_context

    try:
        if args.context_file is not None:
            bundle = load_context(args.context_file)
            context, described = bundle.text, bundle.describe()
            if bundle.skipped:
                names = ", ".join(bundle.skipped)
                _say(f"rlm-compat run: skipped {len(bundle.skipped)} binary file(s): {names}")
        else:
            context, described = args.context, {"chars": len(args.context), "files": []}
        rlm = _build_rlm(args)
    except (ContextInputError, ConfigurationError, ToolUsageError) as exc:
        return _fail(args, ExitCode.BAD_INPUT, exc, None, None)

    mode = args.progress
    if mode == "auto":
        mode = "live" if _is_terminal(sys.stderr) else "plain"
    try:
        with _progress(rlm, mode):
            _quiet_litellm()
            result = rlm.complete_result(args.query, context)
    except KeyboardInterrupt as exc:
        return _fail(args, ExitCode.INTERRUPTED, exc, rlm, described)
    except Exception as exc:
        return _fail(args, exit_code_for(exc, rlm), exc, rlm, described)
    if args.json:
        print(json.dumps(_report(ExitCode.OK, rlm, described, answer=result.answer), ensure_ascii=False))
    else:
        print(result.answer)
    if args.stats:
        print(rlm.stats, file=sys.stderr)
    return ExitCode.OK


def exit_code_for(exc: BaseException, rlm: Any = None) -> ExitCode:
    """The exit code of a run that raised ``exc`` (``rlm``: its RLM, to see if a model call failed)."""
    if isinstance(exc, KeyboardInterrupt):
        return ExitCode.INTERRUPTED
    if isinstance(exc, BudgetExceededError):
        return ExitCode.BUDGET_EXCEEDED
    if isinstance(exc, MaxIterationsError):
        return ExitCode.MAX_ITERATIONS
    if isinstance(exc, MaxDepthError):
        return ExitCode.MAX_DEPTH
    if isinstance(exc, (ConfigurationError, ToolUsageError)):
        return ExitCode.BAD_INPUT
    if isinstance(exc, LLMCallError) or _model_call_raised(exc, rlm):
        return ExitCode.PROVIDER_FAILURE
    return ExitCode.ERROR


def _model_call_raised(exc: BaseException, rlm: Any) -> bool:
    """Whether the run's last failed model call raised ``exc``'s type (litellm's errors are its own
    classes, not LLMCallError: they reach the caller unchanged, as upstream's did)."""
    from ..events import ModelCallFailed

    last = getattr(rlm, "last_run", None)
    if last is None:
        return False
    failed = [e for e in last.trajectory if isinstance(e, ModelCallFailed) and not e.retrying]
    return bool(failed) and failed[-1].error_type == type(exc).__name__


def _build_rlm(args: argparse.Namespace) -> Any:
    from ..core import RLM

    repl_config = ReplConfig(
        profile=args.profile,
        timeout=args.repl_timeout,
        isolation=args.isolation,
        limits=Limits(memory_mb=args.memory_mb),
    )
    return RLM(
        args.model,
        recursive_model=args.recursive_model,
        api_base=args.api_base,
        api_key=args.api_key,
        max_depth=args.max_depth,
        max_iterations=args.max_iterations,
        prompt_version=args.prompt_version,
        repl_config=repl_config,
        trajectory_path=args.trajectory,
        capture_trajectory_content=not args.redact_trajectory,
        max_total_calls=args.max_calls,
        max_total_tokens=args.max_tokens,
        max_total_cost_usd=args.max_cost,
        max_elapsed_seconds=args.max_seconds,
        max_retries=args.max_retries,
    )


@contextlib.contextmanager
def _progress(rlm: Any, mode: str) -> Iterator[None]:
    """Attach the progress observer for ``mode`` to ``rlm`` for the duration of the run."""
    if mode == "live":
        from ..record.live import LiveProgress

        with LiveProgress(sys.stderr) as live:  # it also sends stray stdout writes above the status
            rlm.observers.append(live)
            yield
        return
    if mode == "plain":
        from ..record.progress import ProgressPrinter

        rlm.observers.append(ProgressPrinter())
    with contextlib.redirect_stdout(sys.stderr):  # stdout is the answer's alone, whatever prints
        yield


def _quiet_litellm() -> None:
    """Stop litellm printing its "Give Feedback / Get Help" banner with every provider error: the
    failure gets one line of ours on stderr. (Importing litellm here costs nothing extra: the
    run's first model call would import it a moment later.)"""
    import litellm

    litellm.suppress_debug_info = True


def _fail(
    args: argparse.Namespace,
    code: ExitCode,
    exc: BaseException,
    rlm: Any,
    described: dict[str, Any] | None,
) -> int:
    """One line on stderr (kind, exception, partial trajectory); with --json the report on stdout."""
    kind = code.name.lower().replace("_", " ")
    message = " ".join(str(exc).split()) or "(no message)"
    line = f"rlm-compat run: {kind}: {type(exc).__name__}: {message}"
    path = getattr(getattr(rlm, "last_run", None), "trajectory_path", None)
    if path is not None:
        line += f" (partial trajectory: {path})"
    _say(line)
    if args.json:
        error = {"type": type(exc).__name__, "message": str(exc), "kind": code.name.lower()}
        print(json.dumps(_report(code, rlm, described, error=error), ensure_ascii=False))
    return int(code)


def _report(
    code: ExitCode,
    rlm: Any,
    described: dict[str, Any] | None,
    *,
    answer: str | None = None,
    error: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The ``--json`` object: answer (or error), exit code, tree stats, context summary, config."""
    last = getattr(rlm, "last_run", None)
    return {
        "schema": JSON_SCHEMA,
        "schema_version": JSON_SCHEMA_VERSION,
        "ok": code is ExitCode.OK,
        "exit_code": int(code),
        "answer": answer,
        "error": error,
        "stats": None if last is None else last.stats,
        "trajectory": None if last is None else last.trajectory_path,
        "context": described,
        "config": None if last is None else last.config,
    }


def _is_terminal(stream: Any) -> bool:
    """A terminal that can redraw a line (``TERM=dumb`` cannot) and rich to draw it with."""
    if os.environ.get("TERM") == "dumb" or importlib.util.find_spec("rich") is None:
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
