"""The ``serve`` subcommand: flags to a ServerConfig, then the aiohttp server until Ctrl-C / SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import signal
import sys
from typing import Any

from ...errors import ConfigurationError
from ..shared.rlm_flags import add_rlm_flags, given_keywords
from ..shared.tooling_errors import ToolUsageError
from .chat_protocol import ServeLimits
from .models import CLIENTS, SERVER_OWNED, ModelRegistry, ModelSpec
from .records import DEFAULT_KEEP_BYTES, DEFAULT_KEEP_RUNS
from .sessions import SessionLimits

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``serve`` (no heavy imports: the parser is built on every command)."""
    p = commands.add_parser(
        "serve",
        help="serve RLMs through an OpenAI-compatible chat-completions endpoint",
        description=(
            "Answer POST /v1/chat/completions and GET /v1/models with RLM runs: the request's model "
            "names the RLM (rlm:<litellm model> or a --config name), the last user message is the "
            "query, the context comes in the 'rlm' extension field, as named documents, or as the "
            "earlier messages. Binds 127.0.0.1 unless told otherwise. See docs/serve.md."
        ),
    )
    p.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)"
    )
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0: any free port, printed)")
    p.add_argument(
        "--api-key-env", metavar="VAR", help="require 'Authorization: Bearer <$VAR>' on every request"
    )
    models = p.add_argument_group("models")
    models.add_argument("--config", metavar="TOML", help="per-model config file ([models.NAME] tables)")
    models.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="LITELLM_MODEL",
        help="serve rlm:LITELLM_MODEL (repeatable)",
    )
    models.add_argument(
        "--allow-model",
        action="append",
        default=[],
        metavar="GLOB",
        help="also serve rlm:<any model matching GLOB>",
    )
    models.add_argument(
        "--provider-key-env", metavar="VAR", help="environment variable with the provider key"
    )
    models.add_argument(
        "--provider-timeout", type=float, default=None, help="seconds one provider request may take"
    )
    models.add_argument(
        "--client",
        choices=CLIENTS,
        default="litellm",
        help="how rlm: models call the provider: litellm (default, any provider) or openai-compatible "
        "(the lean path for OpenAI-compatible endpoints: faster, no cost figures)",
    )
    # the rlm: models' RLM settings: every model and loop flag of the options table (rlm_flags)
    add_rlm_flags(p, groups=("model", "loop"), exclude=SERVER_OWNED)
    _add_limits(p)
    _add_records(p)
    p.set_defaults(handler=serve_command)


def _add_limits(p: argparse.ArgumentParser) -> None:
    """What a request may cost (docs/serve.md, "Limits and safety")."""
    limits = p.add_argument_group("limits (a request may lower the per-run ones in its 'rlm' field)")
    defaults = ServeLimits()
    limits.add_argument("--max-concurrent", type=int, default=defaults.max_concurrent, help="runs at once")
    limits.add_argument("--max-queue", type=int, default=defaults.max_queue, help="runs waiting; 429 beyond")
    limits.add_argument(
        "--queue-timeout", type=float, default=defaults.queue_timeout, help="seconds a run may wait"
    )
    limits.add_argument("--max-body-bytes", type=int, default=defaults.max_body_bytes)
    limits.add_argument(
        "--max-context-chars",
        type=int,
        default=defaults.max_context_chars,
        help="context per run: rlm.context + documents (in bytes) or the earlier messages or the query",
    )
    limits.add_argument(
        "--max-query-chars",
        type=int,
        default=defaults.max_query_chars,
        help="the query (the last user message; sent on every root call)",
    )
    limits.add_argument("--max-calls", type=int, default=defaults.max_calls, help="model calls per run")
    limits.add_argument("--max-tokens", type=int, default=defaults.max_tokens, help="tokens per run")
    limits.add_argument("--max-cost", type=float, default=defaults.max_cost_usd, help="USD per run")
    limits.add_argument("--max-seconds", type=float, default=defaults.max_seconds, help="wall time per run")
    sessions = p.add_argument_group('sessions (a request\'s "rlm": {"session": ...}; docs/serve.md)')
    kept = SessionLimits()
    sessions.add_argument(
        "--max-sessions", type=int, default=kept.max_sessions, help="sessions open at once; 429 beyond"
    )
    sessions.add_argument(
        "--session-idle-seconds",
        type=float,
        default=kept.idle_seconds,
        help="a session idle this long is closed (its worker killed)",
    )
    sessions.add_argument(
        "--session-max-context-chars",
        type=int,
        default=kept.max_context_chars,
        help="every context one session keeps, together",
    )


def _add_records(p: argparse.ArgumentParser) -> None:
    """Documents in, trajectories out, logs and shutdown."""
    out = p.add_argument_group("records")
    out.add_argument(
        "--documents-root", metavar="DIR", help="directory whose files requests may name as context"
    )
    out.add_argument("--trajectory-dir", metavar="DIR", help="write each run's trajectory as <run id>.jsonl")
    out.add_argument("--redact-trajectories", action="store_true", help="trajectories keep text lengths only")
    out.add_argument(
        "--trajectory-keep-runs",
        type=int,
        default=DEFAULT_KEEP_RUNS,
        metavar="N",
        help=f"keep at most N trajectory files, oldest removed first (default {DEFAULT_KEEP_RUNS})",
    )
    out.add_argument(
        "--trajectory-keep-bytes",
        type=int,
        default=DEFAULT_KEEP_BYTES,
        metavar="BYTES",
        help=f"keep at most BYTES of trajectory files, oldest removed first (default {DEFAULT_KEEP_BYTES})",
    )
    out.add_argument(
        "--shutdown-grace",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="on SIGTERM/SIGINT, seconds runs in flight get to finish before they are cancelled (default 5)",
    )
    out.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))


def build_config(args: argparse.Namespace) -> Any:
    """The ServerConfig the flags describe (ToolUsageError for a bad combination)."""
    from .server_config import ServerConfig

    template = ModelSpec(
        name="rlm:template",
        model="template",
        api_key_env=args.provider_key_env,
        request_timeout=args.provider_timeout,
        client=args.client,
        rlm=given_keywords(args, exclude=SERVER_OWNED),
    )
    kwargs: dict[str, Any] = {"template": template, "roots": args.model, "allow": args.allow_model}
    registry = ModelRegistry.from_toml(args.config, **kwargs) if args.config else ModelRegistry(**kwargs)
    limits = ServeLimits(
        max_body_bytes=args.max_body_bytes,
        max_context_chars=args.max_context_chars,
        max_query_chars=args.max_query_chars,
        max_calls=args.max_calls,
        max_tokens=args.max_tokens,
        max_cost_usd=args.max_cost,
        max_seconds=args.max_seconds,
        max_concurrent=args.max_concurrent,
        max_queue=args.max_queue,
        queue_timeout=args.queue_timeout,
    )
    return ServerConfig(
        registry=registry,
        limits=limits,
        api_key_env=args.api_key_env,
        documents_root=args.documents_root,
        trajectory_dir=args.trajectory_dir,
        redact_trajectories=args.redact_trajectories,
        trajectory_keep_runs=_at_least(args.trajectory_keep_runs, 1, "--trajectory-keep-runs"),
        trajectory_keep_bytes=_at_least(args.trajectory_keep_bytes, 1, "--trajectory-keep-bytes"),
        shutdown_grace=_at_least(args.shutdown_grace, 0, "--shutdown-grace"),
        sessions=SessionLimits(
            max_sessions=args.max_sessions,
            idle_seconds=_at_least(args.session_idle_seconds, 0.001, "--session-idle-seconds"),
            max_context_chars=args.session_max_context_chars,
        ),
    )


def _at_least(value: Any, low: float, flag: str) -> Any:
    if not value >= low or value != value or value == float("inf"):
        raise ToolUsageError(f"{flag} must be a finite number >= {low:g}, not {value!r}")
    return value


def serve_command(args: argparse.Namespace) -> int:
    """Run the server until interrupted; exit 2 for a bad configuration."""
    try:
        from aiohttp import web  # noqa: F401
    except ImportError:
        print("rlm-compat serve: needs the 'serve' extra: pip install 'rlm-compat[serve]'", file=sys.stderr)
        return 2
    try:
        config = build_config(args)
    except (ConfigurationError, ToolUsageError) as exc:
        print(f"rlm-compat serve: {exc}", file=sys.stderr)
        return 2
    from ...clients import ensure_offline_litellm

    ensure_offline_litellm()
    try:
        asyncio.run(_serve(config, args.host, args.port, args.log_level))
    except (ConfigurationError, ToolUsageError) as exc:
        print(f"rlm-compat serve: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"rlm-compat serve: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 2
    # The process is ending: its final garbage collection would walk litellm's whole object graph
    # for seconds; what exit-time cleanup there is (atexit: the REPL's fork server) still runs.
    gc.freeze()
    return 0


async def _serve(config: Any, host: str, port: int, level: str) -> None:
    from aiohttp import web

    from .app import create_app
    from .server_config import RedactingFormatter

    app = create_app(config)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        RedactingFormatter(app["rlm_server"].redact, "%(asctime)s %(levelname)s %(message)s")
    )
    logger = logging.getLogger("rlm_compat.tools.serve")
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False
    # the grace is the server's own (drain, below); aiohttp's shutdown only closes what is left
    runner = web.AppRunner(app, handler_cancellation=True, access_log=None, shutdown_timeout=0.25)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=1024)
    await site.start()
    app["rlm_server"].preload()
    server = site._server
    bound = [s.getsockname()[:2] for s in getattr(server, "sockets", None) or ()]
    for address in bound:
        print(
            f"rlm-compat serve: listening on http://{address[0]}:{address[1]}/v1", file=sys.stderr, flush=True
        )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
        log = logging.getLogger("rlm_compat.tools.serve")
        log.info("shutting down: no new connections; runs in flight get %g s", config.shutdown_grace)
        await site.stop()
        await app["rlm_server"].drain(config.shutdown_grace)
    finally:
        await runner.cleanup()
        logging.getLogger("rlm_compat.tools.serve").info("shutdown: connections closed")
