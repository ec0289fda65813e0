"""``rlm-compat run QUERY``: one RLM completion from the shell, with live progress and exit codes.

The context comes from files, directories, globs or standard input (:mod:`rlm_compat.tools.shared.run_context`
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

from ..errors import (
    BudgetExceededError,
    ConfigurationError,
    LLMCallError,
    MaxDepthError,
    MaxIterationsError,
)
from .shared.rlm_flags import add_rlm_flags, given_keywords
from .shared.tooling_errors import ToolUsageError

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
    groups = add_rlm_flags(p)
    groups["loop"].add_argument(
        "--tool",
        action="append",
        default=[],
        metavar="[NAME=]MODULE:FUNCTION",
        help="a custom tool the model's code may call: a function importable here (the current "
        "directory is on the path), run in this process with plain data; repeatable (docs/tools.md)",
    )
    _add_output_options(groups["output"])
    p.set_defaults(handler=run_command)


def _add_output_options(output: argparse._ArgumentGroup) -> None:
    """What goes to stdout and stderr (the trajectory file's flags are the RLM's keywords)."""
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
    from .shared.run_context import ContextInputError, load_context

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
    if mode == "live" and importlib.util.find_spec("rich") is None:
        missing = ToolUsageError("--progress live draws with rich: pip install 'rlm-compat[cli]'")
        return _fail(args, ExitCode.BAD_INPUT, missing, None, None)
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
    from .shared.tool_imports import import_tools

    keywords: dict[str, Any] = given_keywords(args)
    tools = import_tools(args.tool)
    if tools:
        keywords["custom_tools"] = tools
    return RLM(**keywords)


@contextlib.contextmanager
def _progress(rlm: Any, mode: str) -> Iterator[None]:
    """Attach the progress observer for ``mode`` to ``rlm`` for the duration of the run."""
    if mode == "live":
        from .runs.live import LiveProgress

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
