"""Noticing that a client hung up while its run works, so the run is cancelled at once."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Awaitable, Callable
from typing import TypeVar

from aiohttp import web

__all__ = ["client_gone", "unless_gone"]

_T = TypeVar("_T")


async def unless_gone(
    request: web.Request,
    work: Awaitable[_T],
    stop: asyncio.Event | None = None,
    stopped: Callable[[], BaseException] | None = None,
) -> _T:
    """``await work``, cancelled as soon as the client closes its connection, or when ``stop`` is
    set (then ``stopped()`` is raised: the server's answer to a run it ended itself)."""
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(client_gone(request))
    halt = asyncio.ensure_future(stop.wait() if stop is not None else asyncio.Event().wait())
    try:
        done, _ = await asyncio.wait({task, gone, halt}, return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            return task.result()
        if halt in done and stopped is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            raise stopped()
        raise asyncio.CancelledError("the client went away")
    except BaseException:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        raise
    finally:
        gone.cancel()
        halt.cancel()


async def client_gone(request: web.Request, every: float = 0.2) -> None:
    """Returns once the client has closed its end of the connection.

    aiohttp stops reading a connection while its handler runs, so it sees a hang-up only at the
    next write; a non-streamed run never writes until its end. Peeking at the socket (a
    duplicate of its descriptor, read with MSG_PEEK, so aiohttp's data is untouched) sees the
    end of the stream at once.
    """
    transport = request.transport
    raw = None if transport is None else transport.get_extra_info("socket")
    if raw is None:
        await asyncio.Event().wait()  # nothing to watch: never "gone"
        return
    probe = socket.socket(fileno=os.dup(raw.fileno()))
    try:
        probe.setblocking(False)
        while True:
            await asyncio.sleep(every)
            if transport is None or transport.is_closing():
                return
            try:
                if probe.recv(1, socket.MSG_PEEK) == b"":
                    return
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                return
    finally:
        probe.close()
