"""Reading a named document under ``--documents-root``: size known before reading, reading bounded.

A request names files; a careless or hostile one names a huge file, a FIFO (whose open blocks until
someone writes), a device or a socket. So the order is: the name resolved inside the root; its
metadata (``stat``) says a regular file no larger than what the request has left of its context
limit, else refused before anything is opened; the open is non-blocking and without following a
last-moment symlink, and ``fstat`` checks the opened file again (it may have been swapped since);
then at most the limit plus one byte is read. The caller runs this on the server's document pool.
"""

from __future__ import annotations

import functools
import os
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path

from ..shared.tooling_errors import ToolError
from .api_errors import bad
from .chat_protocol import ChatRequest, ServeLimits, context_too_large

__all__ = ["CHUNK", "DocumentRefused", "read_document", "request_context"]

CHUNK = 1 << 20


class DocumentRefused(ToolError):
    """The named document cannot be context; ``too_large`` when only its size is the reason."""

    def __init__(self, why: str, *, too_large: bool = False) -> None:
        super().__init__(why)
        self.too_large = too_large


def read_document(root: Path, name: str, limit: int) -> str:
    """The text of ``root/name``, at most ``limit`` bytes of UTF-8; DocumentRefused saying why not.

    Sizes are counted in bytes: a file's byte size is known before reading and bounds its
    characters (each character is at least one byte), so the context limit is never passed.
    """
    if "\x00" in name or os.path.isabs(name):
        raise DocumentRefused("names are paths relative to the server's documents root")
    try:
        path = (root / name).resolve()
    except (OSError, RuntimeError):  # a symlink loop
        raise DocumentRefused("no such readable file under the server's documents root") from None
    if path != root and root not in path.parents:
        raise DocumentRefused("outside the server's documents root (names are relative to it)")
    try:
        info = os.stat(path)
    except OSError:
        raise DocumentRefused("no such readable file under the server's documents root") from None
    _check_kind(info)
    _check_size(info.st_size, limit)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        raise DocumentRefused("no such readable file under the server's documents root") from None
    try:
        opened = os.fstat(fd)
        _check_kind(opened)
        _check_size(opened.st_size, limit)
        data = _read_bounded(fd, limit)
    finally:
        os.close(fd)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise DocumentRefused("not UTF-8 text") from None


def _check_kind(info: os.stat_result) -> None:
    if stat.S_ISDIR(info.st_mode):
        raise DocumentRefused("a directory, not a file")
    if not stat.S_ISREG(info.st_mode):
        raise DocumentRefused("not a regular file (a FIFO, device or socket is never read)")


def _check_size(size: int, limit: int) -> None:
    if size > limit:
        raise DocumentRefused(
            f"{size:,} bytes; with the rest of this request's context at most {limit:,} fit", too_large=True
        )


def _read_bounded(fd: int, limit: int) -> bytes:
    """At most ``limit`` + 1 bytes: a file that grew since its ``fstat`` is refused, not read whole."""
    chunks: list[bytes] = []
    total = 0
    while True:
        piece = os.read(fd, min(CHUNK, limit + 1 - total))
        if not piece:
            return b"".join(chunks)
        chunks.append(piece)
        total += len(piece)
        if total > limit:
            raise DocumentRefused(f"grew past {limit:,} bytes while being read", too_large=True)


async def request_context(
    chat: ChatRequest,
    root: Path | None,
    limits: ServeLimits,
    run: Callable[[Callable[[], str]], Awaitable[str]],
) -> str:
    """A request's context (see ChatRequest.context_source): named documents (read through ``run``,
    the server's document pool), then the extension's text; or the earlier messages; or nothing (the
    query becomes the context, or a session's turn asks about what the session holds).

    Each document is charged against what is left of ``--max-context-chars`` by its size on disk
    before it is read, so an oversized file costs a ``stat``, not its contents.
    """
    if chat.context_source == "messages":
        return chat.earlier
    if chat.context_source in ("query", "session"):
        return ""
    limit = limits.max_context_chars
    left = limit - len(chat.context or "")
    parts: list[str] = []
    if chat.documents and root is None:
        raise bad(
            "this server has no --documents-root: 'rlm.documents' cannot be read", param="rlm.documents"
        )
    for i, name in enumerate(chat.documents):
        assert root is not None
        header = f"==> {name} <==\n"
        left -= len(header) + 2
        try:
            text = await run(functools.partial(read_document, root, name, max(left, 0)))
        except DocumentRefused as exc:
            code = "context_length_exceeded" if exc.too_large else None
            raise bad(f"document {name!r}: {exc}", param=f"rlm.documents[{i}]", code=code) from None
        left -= len(text)
        parts.append(header + text)
    if chat.context is not None:
        parts.append(chat.context)
    context = "\n\n".join(parts)
    if len(context) > limit:
        raise context_too_large(len(context), limits)
    return context
