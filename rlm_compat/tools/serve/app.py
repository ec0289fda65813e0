"""The aiohttp application: routes, bearer auth, the concurrency gate, runs, streaming, disconnects.

All runs of a server process share its one event loop (so litellm's clients and their connection
pools are made once and reused); each run is its own :class:`~rlm_compat.core.RLM` with its own
REPL sessions and workers. A request's handler task owns its run: when the client goes away, aiohttp
cancels the handler (``handler_cancellation``), the run task is cancelled, and the RLM kills its
workers on the way out.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from ...events import TrajectoryEvent
from .api_errors import ApiError, bad
from .chat_protocol import ChatRequest, chunk, completion, parse_request, usage_of
from .disconnect import client_gone, unless_gone
from .doc_cache import DocumentCache, Lease
from .documents import request_context
from .gate import BodyBudget, Gate
from .models import ModelSpec
from .outcomes import error_for_failure
from .pool import BlockingPool, in_daemon_thread
from .records import TrajectoryStore
from .server_config import Redactor, ServerConfig
from .sessions import ServedSession, SessionStore
from .sse import comment, dumps, progress_line, send

__all__ = ["ServerConfig", "create_app"]

log = logging.getLogger("rlm_compat.tools.serve")

_RUN_ID = re.compile(r"^chatcmpl-rlm-[0-9a-f]{32}$")
BODY_BUDGET_FACTOR = 4
"""Request bodies read at once: at most this many times ``--max-body-bytes`` in all."""
_ANSWER_PIECE = 4096


def create_app(config: ServerConfig) -> web.Application:
    """The application; run it with ``handler_cancellation=True`` so disconnects cancel runs."""
    server = _Server(config)
    app = web.Application(
        client_max_size=config.limits.max_body_bytes,
        middlewares=[server.middleware],
    )
    app.router.add_get("/v1/models", server.models)
    app.router.add_get("/v1/models/{name:.+}", server.model)
    app.router.add_post("/v1/chat/completions", server.chat)
    app.router.add_get("/v1/rlm/runs/{run_id}/trajectory", server.trajectory)
    app.router.add_delete("/v1/rlm/sessions/{session_id}", server.delete_session)
    app.router.add_get("/health", server.health)
    app.on_startup.append(server.start_reaper)
    app.on_cleanup.append(server.end_sessions)
    app["rlm_server"] = server
    return app


class _Server:
    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.redact = Redactor(
            [*config.registry.secret_envs(), *([config.api_key_env] if config.api_key_env else [])]
        )
        self.token = config.bearer()
        limits = config.limits
        self.gate = Gate(limits.max_concurrent, limits.max_queue, limits.queue_timeout)
        self.bodies = BodyBudget(BODY_BUDGET_FACTOR * limits.max_body_bytes, limits.queue_timeout)
        self.documents = None if config.documents_root is None else Path(config.documents_root).resolve()
        self.document_cache = DocumentCache()
        self.records: TrajectoryStore | None = None
        if config.trajectory_dir is not None:
            Path(config.trajectory_dir).mkdir(parents=True, exist_ok=True)
            self.records = TrajectoryStore(
                Path(config.trajectory_dir),
                self.redact,
                config.redact_trajectories,
                config.trajectory_keep_runs,
                config.trajectory_keep_bytes,
            )
        # one thread per run slot (a run reads its documents before it takes one), waiting room for
        # every request the gate admits, and the queue's patience as the deadline
        threads = min(max(limits.max_concurrent, 2), 64)
        backlog = limits.max_concurrent + limits.max_queue
        self.pools = {
            name: BlockingPool(name, threads, backlog, limits.queue_timeout)
            for name in ("documents", "trajectories")
        }
        self.served = 0
        self.inflight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self.stopping = asyncio.Event()
        self.closing = False
        self.sessions = SessionStore(config.sessions)
        self._reaper: asyncio.Task[None] | None = None
        self._litellm: asyncio.Future[None] | None = None
        self._lean: Any = None

    def _lean_client(self) -> Any:
        """One lean client for the process: one aiohttp session (connection pool) on its loop."""
        if self._lean is None:
            from ...openai_client import OpenAICompatibleClient

            self._lean = OpenAICompatibleClient()
        return self._lean

    def preload(self) -> None:
        """Start importing litellm now, so the first request does not wait for all of it (only when a
        served model uses it: the lean client's path never imports litellm)."""
        if self._litellm is None and self.config.registry.uses_litellm():
            # a daemon thread, not asyncio's pool: a SIGTERM during the import must not wait for it
            self._litellm = in_daemon_thread(_import_litellm, "rlm-serve-import")

    async def _litellm_loaded(self) -> None:
        """litellm imported off the event loop (once, shared by every request): a first model call
        would otherwise import it on the loop and stall every other run for seconds."""
        if self._litellm is None:
            self._litellm = in_daemon_thread(_import_litellm, "rlm-serve-import")
        await asyncio.shield(self._litellm)

    # --- middleware: auth, errors, one log line per request ------------------------------------

    @web.middleware
    async def middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        started = time.perf_counter()
        status = 500
        try:
            if request.path != "/health":
                self._authorize(request)
            response = await handler(request)
            status = response.status
            return response
        except ApiError as exc:
            status = exc.status
            return self._error_response(exc)
        except web.HTTPRequestEntityTooLarge:
            status = 413
            return self._error_response(self._too_large())
        except web.HTTPException as exc:  # unknown route, wrong method
            status = exc.status
            kind = "not_found_error" if exc.status == 404 else "invalid_request_error"
            return self._error_response(
                ApiError(exc.status, f"{exc.reason}: {request.method} {request.path}", type=kind, retry=False)
            )
        except asyncio.CancelledError:
            status = 499  # the client went away (nginx's code for it, in the log only)
            raise
        except Exception:
            incident = uuid.uuid4().hex[:12]
            log.exception("internal error %s on %s %s", incident, request.method, request.path)
            return self._error_response(
                ApiError(
                    500,
                    f"internal server error (incident {incident}; see the server log)",
                    type="server_error",
                )
            )
        finally:
            log.info(
                "%s %s %d %.3fs%s%s",
                request.method,
                request.path,
                status,
                time.perf_counter() - started,
                f" run={request['run_id']}" if "run_id" in request else "",
                f" (stream ended with error {request['stream_error']})" if "stream_error" in request else "",
            )

    def _authorize(self, request: web.Request) -> None:
        if self.token is None:
            return
        header = request.headers.get("Authorization", "")
        scheme, _, given = header.partition(" ")
        # surrogateescape: aiohttp hands on undecodable header bytes as lone surrogates
        sent = given.strip().encode("utf-8", "surrogateescape")
        if scheme.lower() != "bearer" or not hmac.compare_digest(sent, self.token.encode()):
            raise ApiError(
                401,
                "missing or wrong API key: send 'Authorization: Bearer <key>'",
                type="authentication_error",
                code="invalid_api_key",
                retry=False,
            )

    def _error_response(self, exc: ApiError) -> web.Response:
        body = exc.body()
        body["error"]["message"] = self.redact(body["error"]["message"])
        return web.json_response(body, status=exc.status, headers=exc.headers())

    def _too_large(self) -> ApiError:
        return ApiError(
            413,
            f"request body over this server's limit of {self.config.limits.max_body_bytes:,} bytes",
            code="request_too_large",
            retry=False,
        )

    # --- small routes -------------------------------------------------------------------------

    async def health(self, request: web.Request) -> web.Response:
        pools = {name: pool.status() for name, pool in self.pools.items()}
        saturated = any(p["saturated"] for p in pools.values())
        status = "stopping" if self.closing else "degraded" if saturated else "ok"
        return web.json_response(
            {
                "status": status,
                "running": self.gate.running,
                "queued": self.gate.waiting,
                "served": self.served,
                "sessions": len(self.sessions),
                "reading_body_bytes": self.bodies.reserved,
                "waiting_to_read": self.bodies.waiting,
                "document_cache": self.document_cache.status(),
                "pools": pools,
            }
        )

    # --- shutdown -----------------------------------------------------------------------------

    async def drain(self, grace: float) -> None:
        """Refuse new runs, give those in flight ``grace`` seconds, then end them like a hang-up.

        Queued requests get 503 at once; a run still going after the grace is cancelled (its
        workers killed), a streaming client gets an error event and ``[DONE]``, a waiting one a 503.
        """
        self.closing = True
        self.gate.close(_shutting_down())
        try:
            await asyncio.wait_for(self._idle.wait(), grace)
        except asyncio.TimeoutError:
            log.info("shutdown: grace over, cancelling %d run(s)", self.inflight)
            self.stopping.set()
            try:
                await asyncio.wait_for(self._idle.wait(), 0.5)
            except asyncio.TimeoutError:
                if self.inflight:
                    log.warning("shutdown: %d run(s) still ending", self.inflight)
        log.info("shutdown: runs ended")
        await self.end_sessions()

    async def start_reaper(self, app: web.Application) -> None:
        self._reaper = asyncio.ensure_future(self.sessions.reap_forever())

    async def end_sessions(self, app: web.Application | None = None) -> None:
        """Close every session (their workers killed): at shutdown."""
        if self._reaper is not None:
            self._reaper.cancel()
        if len(self.sessions):
            log.info("shutdown: ending %d session(s)", len(self.sessions))
        await self.sessions.end_all()

    async def delete_session(self, request: web.Request) -> web.Response:
        session_id = request.match_info["session_id"]
        if not await self.sessions.end(session_id):
            self.sessions.find(session_id, "")  # raises the 404 that says why
        return web.json_response({"id": session_id, "object": "rlm.session", "deleted": True})

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"object": "list", "data": [s.public() for s in self.config.registry.listed()]}
        )

    async def model(self, request: web.Request) -> web.Response:
        spec = self.config.registry.resolve(request.match_info["name"])
        if spec is None:
            raise _unknown_model(request.match_info["name"])
        return web.json_response(spec.public())

    async def trajectory(self, request: web.Request) -> web.StreamResponse:
        run_id = request.match_info["run_id"]
        path = self._trajectory_path(run_id) if _RUN_ID.match(run_id) else None
        if path is None or not path.is_file():
            raise ApiError(404, f"no trajectory for run {run_id!r} on this server", type="not_found_error")
        return web.FileResponse(path, headers={"Content-Type": "application/x-ndjson"})

    def _trajectory_path(self, run_id: str) -> Path | None:
        return None if self.records is None else self.records.path(run_id)

    # --- chat completions -----------------------------------------------------------------------

    async def chat(self, request: web.Request) -> web.StreamResponse:
        declared = request.content_length
        if declared is not None and declared > self.config.limits.max_body_bytes:
            raise self._too_large()
        if self.closing:
            raise _shutting_down()
        self.inflight += 1
        self._idle.clear()
        try:
            return await self._chat(request)
        finally:
            self.inflight -= 1
            if not self.inflight:
                self._idle.set()

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        limits = self.config.limits
        async with self.bodies.reserve(request.content_length or limits.max_body_bytes):
            chat = parse_request(await request.read(), limits)
        spec = self.config.registry.resolve(chat.model)
        if spec is None:
            raise _unknown_model(chat.model)
        run_id = f"chatcmpl-rlm-{uuid.uuid4().hex}"
        request["run_id"] = run_id
        session = await self._session(chat, spec)
        try:
            # documents are read in the slot (at most --max-concurrent at once); what the context
            # holds of the document cache is held until the run has ended, however it ends
            async with self.gate.slot(), self.document_cache.lease() as lease:
                context = await self._context(chat, lease)
                async with self._turn(session, context):
                    if chat.stream:
                        return await self._stream(request, chat, spec, context, run_id, session)
                    outcome = await unless_gone(
                        request,
                        self._run(chat, spec, context, run_id, None, session),
                        self.stopping,
                        _shutting_down,
                    )
        except BaseException:
            if session is not None and chat.session == "new":
                await self.sessions.end(session.id)  # its id was never given out
            raise
        self.served += 1
        if isinstance(outcome, ApiError):
            if session is not None and chat.session == "new":
                await self.sessions.end(session.id)
            raise outcome
        answer, stats = outcome
        extra = self._extra(run_id, stats, chat, context, session)
        headers = {"x-rlm-run-id": run_id, **({"x-rlm-session": session.id} if session else {})}
        return web.json_response(
            completion(run_id, chat.model, answer, stats, extra), headers=headers, dumps=dumps
        )

    async def _session(self, chat: ChatRequest, spec: ModelSpec) -> ServedSession | None:
        """The request's session: a new one (its persistent RLM made now), an open one, or None."""
        if chat.session is None:
            return None
        if chat.session != "new":
            session = self.sessions.find(chat.session, chat.model)
            if chat.budget != session.budget:
                raise bad(
                    "a session's run limits are set by its first turn; send its turns without "
                    "rlm.max_calls / max_tokens / max_cost_usd / max_seconds, or with the same values",
                    param="rlm",
                    code="session_limits_fixed",
                )
            return session
        rlm = await self._new_rlm(spec, chat, None, persistent=True)
        return self.sessions.create(chat.model, rlm, chat.budget)

    def _turn(self, session: ServedSession | None, context: str) -> Any:
        return contextlib.nullcontext() if session is None else self.sessions.turn(session, len(context))

    async def _context(self, chat: ChatRequest, lease: Lease) -> str:
        """The run's context (see ChatRequest.context_source and documents.request_context)."""
        pool = self.pools["documents"]
        return await request_context(chat, self.documents, self.config.limits, pool.run, lease)

    def _extra(
        self,
        run_id: str,
        stats: dict[str, Any],
        chat: ChatRequest,
        context: str,
        session: ServedSession | None,
    ) -> dict[str, Any]:
        url = f"/v1/rlm/runs/{run_id}/trajectory" if self.records is not None else None
        chars = len(chat.query) if chat.context_source == "query" else len(context)
        source = {"source": chat.context_source, "chars": chars}
        extra = {"run_id": run_id, "trajectory": url, "stats": stats, "context": source}
        if session is not None:
            extra["session"] = {"id": session.id, "turn": session.turns}
        return extra

    async def _run(
        self,
        chat: ChatRequest,
        spec: ModelSpec,
        context: str,
        run_id: str,
        progress: Callable[[TrajectoryEvent], None] | None,
        session: ServedSession | None = None,
    ) -> tuple[str, dict[str, Any]] | ApiError:
        """One RLM run to its end: ``(answer, stats)`` or the ApiError it ends with.

        Cancelling the awaiting task (a disconnect) cancels the run, whose sessions kill their
        workers; the record of the cancelled run is still written.
        """
        rlm: Any = None
        try:
            if session is None:
                rlm = await self._new_rlm(spec, chat, progress)
            else:
                rlm = session.rlm
                if progress is not None:
                    rlm.observers.append(progress)
            try:
                result = await rlm.atry_complete_result(
                    chat.query, context, query_as_context=chat.context_source == "query", **chat.options
                )
            finally:
                if session is not None and progress is not None:
                    rlm.observers.remove(progress)
        except asyncio.CancelledError:
            if rlm is not None and rlm.last_run is not None:
                await asyncio.shield(self._write_trajectory(run_id, rlm.last_run.trajectory))
            raise
        except Exception as exc:
            return error_for_failure(exc, type(exc).__name__, str(exc))
        await self._write_trajectory(run_id, result.trajectory)
        if result.answer is None:
            error_type = getattr(result, "error_type", "RLMError")
            return error_for_failure(None, error_type, getattr(result, "error", ""))
        return result.answer, result.stats

    async def _new_rlm(
        self,
        spec: ModelSpec,
        chat: ChatRequest,
        progress: Callable[[TrajectoryEvent], None] | None,
        persistent: bool = False,
    ) -> Any:
        """The RLM a run (or a new session) of ``spec`` gets, with the request's limits."""
        from ...core import RLM

        options: dict[str, Any] = dict(chat.budget)
        if spec.request_timeout is not None:
            options["timeout"] = spec.request_timeout
        client = None
        if spec.client == "openai-compatible":
            client = self._lean_client()
        else:
            await self._litellm_loaded()
        if persistent:
            options["persistent"] = True
        return RLM(
            spec.model,
            api_key=spec.api_key(),
            on_event=progress,
            client=client,
            custom_tools=dict(spec.custom_tools) or None,
            **spec.rlm,
            **options,
        )

    async def _write_trajectory(self, run_id: str, events: tuple[TrajectoryEvent, ...]) -> None:
        """On the trajectory pool; a write that fails or is stuck costs the record, not the answer."""
        records = self.records
        if records is None:
            return
        try:
            await self.pools["trajectories"].run(lambda: records.write(run_id, events))
        except (ApiError, OSError) as exc:
            log.warning("run %s: trajectory not written: %s", run_id, exc)

    async def _stream(
        self,
        request: web.Request,
        chat: ChatRequest,
        spec: ModelSpec,
        context: str,
        run_id: str,
        session: ServedSession | None,
    ) -> web.StreamResponse:
        """Server-sent events: role chunk, progress as SSE comments, answer chunks, usage, [DONE].

        Progress lines start with ``:``, which the SSE format defines as comments: the openai client
        and litellm skip them, a client that wants them reads ``: rlm-progress {json}``.
        """
        loop = asyncio.get_running_loop()
        events: asyncio.Queue[TrajectoryEvent] = asyncio.Queue()

        def progress(event: TrajectoryEvent) -> None:
            loop.call_soon_threadsafe(events.put_nowait, event)

        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-cache",
                "X-Accel-Buffering": "no",
                "x-rlm-run-id": run_id,
                **({"x-rlm-session": session.id} if session else {}),
            }
        )
        await response.prepare(request)
        run = asyncio.ensure_future(self._run(chat, spec, context, run_id, progress, session))
        gone = asyncio.ensure_future(client_gone(request))
        stop = asyncio.ensure_future(self.stopping.wait())
        try:
            await send(response, chunk(run_id, chat.model, {"role": "assistant", "content": ""}))
            while not run.done():
                getter = asyncio.ensure_future(events.get())
                done, _ = await asyncio.wait(
                    {run, getter, gone, stop},
                    timeout=self.config.heartbeat_seconds,
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if gone in done:
                    getter.cancel()
                    raise asyncio.CancelledError("the client went away")
                if stop in done and not run.done():
                    getter.cancel()
                    run.cancel()
                    await asyncio.gather(run, return_exceptions=True)
                    return await self._stream_error(request, response, _shutting_down())
                if getter in done:
                    await comment(response, progress_line(getter.result()))
                else:
                    getter.cancel()
                    if not done:
                        await comment(response, "rlm-heartbeat")
            outcome = run.result()
        except BaseException:
            run.cancel()
            await asyncio.gather(run, return_exceptions=True)
            raise
        finally:
            gone.cancel()
            stop.cancel()
        self.served += 1
        if isinstance(outcome, ApiError):
            return await self._stream_error(request, response, outcome)
        answer, stats = outcome
        for start in range(0, max(len(answer), 1), _ANSWER_PIECE):
            await send(
                response, chunk(run_id, chat.model, {"content": answer[start : start + _ANSWER_PIECE]})
            )
        extra = self._extra(run_id, stats, chat, context, session)
        await send(response, chunk(run_id, chat.model, {}, finish="stop", extra=extra))
        if chat.include_usage:
            await send(response, chunk(run_id, chat.model, None, usage=usage_of(stats)))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    async def _stream_error(
        self, request: web.Request, response: web.StreamResponse, error: ApiError
    ) -> web.StreamResponse:
        """A run's failure once the stream has started: an error event, then ``[DONE]``."""
        request["stream_error"] = error.status
        body = error.body()
        body["error"]["message"] = self.redact(body["error"]["message"])
        body["error"]["status"] = error.status
        await send(response, body)
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


def _import_litellm() -> None:
    import litellm

    litellm.suppress_debug_info = True  # its feedback banner, printed with every provider error


def _shutting_down() -> ApiError:
    return ApiError(
        503,
        "the server is shutting down; retry against another instance or after its restart",
        type="server_error",
        code="server_shutting_down",
        retry=True,
    )


def _unknown_model(name: str) -> ApiError:
    return ApiError(
        404,
        f"the model {name!r} does not exist on this server; GET /v1/models lists what it serves",
        type="invalid_request_error",
        code="model_not_found",
        param="model",
        retry=False,
    )
