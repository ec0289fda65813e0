"""Reading a named document under ``--documents-root``: size known before reading, reading bounded.

A request names files; a careless or hostile one names a huge file, a FIFO (whose open blocks until
someone writes), a device or a socket. So the order is: the name resolved inside the root; its
metadata (``stat``) says a regular file no larger than what the request has left of its context
limit, else refused before anything is opened; the open is non-blocking and without following a
last-moment symlink, and ``fstat`` checks the opened file again (it may have been swapped since);
then at most the limit plus one byte is read. The caller runs this on the server's document pool.

Requests share what they read (doc_cache): every request locates and ``stat``-s each document and
checks its size against its own limit; the file's version from that ``stat`` says whether a text
already held will do, and only a version nobody holds is read (:func:`read_version`, which gives up
on a file that is no longer that version, so a text is never kept under a version it is not).
"""

from __future__ import annotations

import contextlib
import functools
import os
import stat
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

from ..shared.tooling_errors import ToolError
from .api_errors import ApiError, bad
from .chat_protocol import ChatRequest, ServeLimits, context_too_large
from .doc_cache import ContextKey, Lease, Version, version_of

__all__ = [
    "CHUNK",
    "DocumentRefused",
    "Located",
    "Runner",
    "locate_all",
    "locate_document",
    "read_document",
    "read_version",
    "request_context",
]

_T = TypeVar("_T")

CHUNK = 1 << 20


class DocumentRefused(ToolError):
    """The named document cannot be context; ``too_large`` when only its size is the reason."""

    def __init__(self, why: str, *, too_large: bool = False) -> None:
        super().__init__(why)
        self.too_large = too_large


@dataclass(frozen=True)
class Located:
    """A named document that passed the checks its metadata allows: inside the root, a regular
    file; ``version`` (its ``stat``) is what the cache keys it by, ``size`` what the limit is
    checked against."""

    path: Path
    version: Version

    @property
    def size(self) -> int:
        return self.version[3]


def locate_document(root: Path, name: str) -> Located:
    """``root/name`` resolved inside the root and ``stat``-ed: a regular file, or DocumentRefused."""
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
    return Located(path, version_of(str(path), info))


def locate_all(root: Path, names: tuple[str, ...]) -> list[Located | DocumentRefused]:
    """Each name located, or why not (raised in the request's order, when its turn comes)."""
    found: list[Located | DocumentRefused] = []
    for name in names:
        try:
            found.append(locate_document(root, name))
        except DocumentRefused as exc:
            found.append(exc)
    return found


def read_document(root: Path, name: str, limit: int) -> str:
    """The text of ``root/name``, at most ``limit`` bytes of UTF-8; DocumentRefused saying why not.

    Sizes are counted in bytes: a file's byte size is known before reading and bounds its
    characters (each character is at least one byte), so the context limit is never passed.
    """
    located = locate_document(root, name)
    check_size(located.size, limit)
    with _opened(located.path) as fd:
        opened = os.fstat(fd)
        _check_kind(opened)
        check_size(opened.st_size, limit)
        return _decode(_read_bounded(fd, limit))


def read_version(located: Located) -> str | None:
    """The text of the version ``located`` saw, or None when the file is no longer that version
    (changed or replaced since its ``stat``, or while read): such a text is never kept under it."""
    with _opened(located.path) as fd:
        if _version(located, os.fstat(fd)) != located.version:
            return None
        try:
            data = _read_bounded(fd, located.size)
        except DocumentRefused:  # it grew
            return None
        if len(data) != located.size or _version(located, os.fstat(fd)) != located.version:
            return None
    return _decode(data)


def _version(located: Located, info: os.stat_result) -> Version:
    return version_of(str(located.path), info)


@contextlib.contextmanager
def _opened(path: Path) -> Iterator[int]:
    """Non-blocking (a FIFO swapped in never blocks) and never through a last-moment symlink."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        raise DocumentRefused("no such readable file under the server's documents root") from None
    try:
        yield fd
    finally:
        os.close(fd)


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise DocumentRefused("not UTF-8 text") from None


def _check_kind(info: os.stat_result) -> None:
    if stat.S_ISDIR(info.st_mode):
        raise DocumentRefused("a directory, not a file")
    if not stat.S_ISREG(info.st_mode):
        raise DocumentRefused("not a regular file (a FIFO, device or socket is never read)")


def check_size(size: int, limit: int) -> None:
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


class Runner(Protocol):
    """How blocking file work is run: the server's document pool (:meth:`.pool.BlockingPool.run`)."""

    def __call__(self, work: Callable[[], _T]) -> Awaitable[_T]: ...


async def request_context(
    chat: ChatRequest, root: Path | None, limits: ServeLimits, run: Runner, lease: Lease
) -> str:
    """A request's context (see ChatRequest.context_source): named documents (``stat``-ed and read
    through ``run``, the server's document pool), then the extension's text; or the earlier
    messages; or nothing (the query becomes the context, or a session's turn asks about what the
    session holds).

    Each document is charged against what is left of ``--max-context-chars`` by its size on disk
    before it is read, so an oversized file costs a ``stat``, not its contents. Every request makes
    every check; what it then finds held in ``lease``'s cache it does not read again. A context of
    documents only is the same ``str`` object for every request naming the same versions of the
    same names (held as long as one of them runs; its texts are let go once joined). With
    ``rlm.context`` added the joined context is the request's own, and the texts it was joined
    from are held (shared with concurrent requests naming them) until the run ends.
    """
    if chat.context_source == "messages":
        return chat.earlier
    if chat.context_source in ("query", "session"):
        return ""
    if chat.documents and root is None:
        raise bad(
            "this server has no --documents-root: 'rlm.documents' cannot be read", param="rlm.documents"
        )
    limit = limits.max_context_chars
    if root is None or not chat.documents:
        context = chat.context or ""
    else:
        context = await _documents_context(chat, root, limit - len(chat.context or ""), run, lease)
    if len(context) > limit:
        raise context_too_large(len(context), limits)
    return context


async def _documents_context(chat: ChatRequest, root: Path, left: int, run: Runner, lease: Lease) -> str:
    """The documents joined (then ``rlm.context``), ``left`` characters for them: the context held
    for the same names at the same versions, or one read (what is held of it shared) and joined."""
    found = await run(functools.partial(locate_all, root, chat.documents))
    located = [f for f in found if isinstance(f, Located)]
    key: ContextKey | None = None
    if chat.context is None and len(located) == len(found):
        key = tuple(zip(chat.documents, (f.version for f in located), strict=True))
        held = lease.context(key)
        if held is not None:
            _charge(chat.documents, located, held[1], left)
            return held[0]
    texts, shared = await _texts(chat.documents, found, root, left, run, lease)
    pieces = [
        piece
        for name, text in zip(chat.documents, texts, strict=True)
        for piece in (_header(name), text, "\n\n")
    ]
    if chat.context is None:
        pieces = pieces[:-1]
    else:
        pieces.append(chat.context)
    if key is not None and shared:
        context = lease.keep_context(key, lambda: "".join(pieces), tuple(map(len, texts)))
    else:
        context = "".join(pieces)
    if chat.context is None:
        lease.release_texts()
    return context


async def _texts(
    names: tuple[str, ...],
    found: list[Located | DocumentRefused],
    root: Path,
    left: int,
    run: Runner,
    lease: Lease,
) -> tuple[list[str], bool]:
    """Each document's text, in order, charged against ``left``; and whether every text is the
    version its ``stat`` saw (a file changed since is read again for this request alone)."""
    texts: list[str] = []
    shared = True
    for i, (name, where) in enumerate(zip(names, found, strict=True)):
        left -= len(_header(name)) + 2
        try:
            if isinstance(where, DocumentRefused):
                raise where
            check_size(where.size, max(left, 0))
            text = await lease.text(
                where.version, functools.partial(run, functools.partial(read_version, where))
            )
            if text is None:
                shared = False
                text = await run(functools.partial(read_document, root, name, max(left, 0)))
        except DocumentRefused as exc:
            raise _refused(i, name, exc) from None
        left -= len(text)
        texts.append(text)
    return texts, shared


def _charge(names: tuple[str, ...], located: list[Located], lengths: tuple[int, ...], left: int) -> None:
    """The size checks :func:`_texts` makes, for a context already held: the same refusals."""
    for i, (name, where, length) in enumerate(zip(names, located, lengths, strict=True)):
        left -= len(_header(name)) + 2
        try:
            check_size(where.size, max(left, 0))
        except DocumentRefused as exc:
            raise _refused(i, name, exc) from None
        left -= length


def _header(name: str) -> str:
    return f"==> {name} <==\n"


def _refused(i: int, name: str, exc: DocumentRefused) -> ApiError:
    code = "context_length_exceeded" if exc.too_large else None
    return bad(f"document {name!r}: {exc}", param=f"rlm.documents[{i}]", code=code)
