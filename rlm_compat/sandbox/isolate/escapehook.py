"""For security testing only: run *plain, unrestricted* Python inside a hardened worker.

This is the worker entry (``rlm_compat.sandbox.isolate.escapehook:serve``) of the escape-assumed tests:
it behaves as if model code had already escaped RestrictedPython, so what stops a program here is
the OS-level hardening alone (:mod:`.hardening`, applied by :func:`.workerinit.prepare` before any
entry runs, exactly as for the REPL worker). It is never reachable from model code: a worker's
entry is chosen by the host when it asks the fork server for a worker (the REPL worker's entry is
fixed), model code cannot talk to the fork server, and nothing in the REPL worker imports this
module. The host side is :mod:`rlm_compat.tools.escape_assumed`.

Protocol (framed JSON, :func:`.zygote.send_frame`): one request ``{"code", "params"}``; the
program runs with the global ``PARAMS`` (what the host set up: ports, paths, pids); one reply,
``{"outcome": "completed" | "raised", "type", "message", "errno", "layers"}``; then the worker
exits. One program per worker, so a program's damage never reaches the next.

:func:`serve_repl` is the same idea for the channel: the REPL worker itself, except that a step
whose code holds :data:`~.worker.ESCAPED` runs (from that line to a closing fence) as plain
Python with the worker's channel in hand (``CHANNEL``, ``send_raw``, ``wire``, ``SEQ``,
``ns``), so a test can send its parent any frame an escaped worker could. The host chooses it
(``ProcessRunner(entry="escaped")`` or the host's own ``RLM_COMPAT_TEST_WORKER_ENTRY=escaped``),
never model code.
"""

from __future__ import annotations

import socket
import struct
import sys
import traceback
from typing import Any

from .hardening import active_layers
from .zygote import recv_frame, send_frame

__all__ = ["serve", "serve_repl"]


def serve(sock: socket.socket) -> None:
    """Run one program and report how it ended."""
    try:
        request, _ = recv_frame(sock)
    except EOFError:
        return
    reply: dict[str, Any] = {"layers": list(active_layers())}
    try:
        code = compile(str(request["code"]), "<escape-assumed>", "exec")
        exec(code, {"__name__": "__escape_assumed__", "PARAMS": dict(request.get("params") or {})})
    except BaseException as exc:
        reply.update(
            outcome="raised",
            type=type(exc).__name__,
            message=str(exc)[:500],
            errno=getattr(exc, "errno", None),
        )
    else:
        reply["outcome"] = "completed"
    send_frame(sock, reply)


def serve_repl(sock: socket.socket) -> None:
    """The REPL worker, with escaped steps (see the module docstring)."""
    from .worker import serve as serve_worker

    serve_worker(sock, escaped=_run_escaped)


def _run_escaped(code: str, channel: Any, ns: dict[str, Any]) -> None:
    from . import wire_encode as wire  # the attacks encode as a worker does
    from .worker import ESCAPED

    def send_raw(payload: bytes, announced: int | None = None) -> None:
        size = len(payload) if announced is None else announced
        channel.sock.sendall(struct.pack("!Q", size) + payload)

    scope = {
        "__name__": "__escaped__",
        "CHANNEL": channel,
        "SEQ": channel.seq,
        "send_raw": send_raw,
        "wire": wire,
        "ns": ns,
    }
    code = code[code.index(ESCAPED) :].split("\n```", 1)[0]  # from the marker to a closing fence
    try:
        exec(compile(code, "<escaped>", "exec"), scope)
    except Exception:
        traceback.print_exc(file=sys.stderr)
