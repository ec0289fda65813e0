"""One copy of each document version, shared by the requests that name it while they run.

The REPL workers share one in-memory copy of a context among the runs whose context is the same
``str`` object (an equal one costs a comparison of every byte). A server that read and joined its
documents afresh for every request would hold one copy per request: sixteen requests naming one
1 GB file, 16 GB. So the texts read are kept here, keyed by the file's version (its resolved path,
device, inode, size and modification and change times, from the ``stat`` every request makes
anyway), and so is the joined context of a request made of documents only, keyed by its names and
their versions: every request with that key gets the same object. A request that adds its own text
(``rlm.context``) joins a context of its own (a join copies anyway); what it shares is the texts.

What is kept is held: a request's :class:`Lease` holds what it took until its run ends, and an
entry no request holds is dropped at once (a serve process must not keep a 1 GB document for
nobody). Requests arriving together for a version nobody has read share one read: the first starts
it as a task of its own (so its own cancellation does not end the others' read; with no request
left awaiting it, it is cancelled), the rest await it, and a failed read fails them all and is not
kept. This module only keeps; the checks (inside the root, a regular file, the size against the
request's limit) are the caller's, made for every request before it asks here.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

__all__ = ["ContextKey", "DocumentCache", "Lease", "Version", "version_of"]

Version = tuple[str, int, int, int, int, int]
"""A file's version: resolved path, ``st_dev``, ``st_ino``, ``st_size``, ``st_mtime_ns``,
``st_ctime_ns``. A write changes the times (and usually the size); a replacement, the inode. (A
write within the file system's timestamp granularity that keeps the size goes unseen, as by any
such key; a text is only kept while runs hold it, which bounds how long that could last.)"""

ContextKey = tuple[tuple[str, Version], ...]
"""A documents-only context: each name as the request wrote it (its header) and its version."""


def version_of(path: str, info: os.stat_result) -> Version:
    return (path, info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


@dataclass(eq=False)
class _Text:
    """A version's text: the shared read (its result None when the file changed under it)."""

    read: asyncio.Future[str | None]
    users: int = 0


@dataclass(eq=False)
class _Context:
    """A documents-only context and each document's length (the size checks of a later request)."""

    text: str
    lengths: tuple[int, ...]
    users: int = 0


class DocumentCache:
    """The texts and documents-only contexts held by the server's requests (see the module)."""

    def __init__(self) -> None:
        self._texts: dict[Version, _Text] = {}
        self._contexts: dict[ContextKey, _Context] = {}

    @contextlib.asynccontextmanager
    async def lease(self) -> AsyncIterator[Lease]:
        """A request's hold on what it takes, given back when the block ends, however it ends."""
        lease = Lease(self)
        try:
            yield lease
        finally:
            lease.release()

    def status(self) -> dict[str, int]:
        """What ``/health`` shows: texts and contexts held, their holders, reads under way, chars."""
        chars = sum(len(text) for text in map(_text_read, self._texts.values()) if text is not None)
        chars += sum(len(c.text) for c in self._contexts.values())
        return {
            "texts": len(self._texts),
            "contexts": len(self._contexts),
            "holders": sum(t.users for t in self._texts.values())
            + sum(c.users for c in self._contexts.values()),
            "reading": sum(1 for t in self._texts.values() if not t.read.done()),
            "chars": chars,
        }

    def _start(self, version: Version, read: Callable[[], Awaitable[str | None]]) -> _Text:
        """The read of ``version`` as a task of its own: a request cancelled while it runs (its
        client gone) does not end it for the others awaiting it."""
        entry = self._texts[version] = _Text(asyncio.ensure_future(read()))
        entry.read.add_done_callback(lambda _: self._settled(version, entry))
        return entry

    def _settled(self, version: Version, entry: _Text) -> None:
        """A failed read, or one that found the file changed, is not kept for later requests."""
        if _text_read(entry) is None and self._texts.get(version) is entry:
            del self._texts[version]

    def _drop_text(self, version: Version, entry: _Text) -> None:
        """One holder less; with none left the text is let go, and a read still under way is
        cancelled (its clients gone, nobody would use it)."""
        entry.users -= 1
        if entry.users <= 0:
            if self._texts.get(version) is entry:
                del self._texts[version]
            entry.read.cancel()

    def _drop_context(self, key: ContextKey, entry: _Context) -> None:
        entry.users -= 1
        if entry.users <= 0 and self._contexts.get(key) is entry:
            del self._contexts[key]


def _text_read(entry: _Text) -> str | None:
    read = entry.read
    return read.result() if read.done() and not read.cancelled() and read.exception() is None else None


class Lease:
    """What one request holds of the cache; :meth:`release` when its run has ended."""

    def __init__(self, cache: DocumentCache) -> None:
        self._cache = cache
        self._texts: list[tuple[Version, _Text]] = []
        self._contexts: list[tuple[ContextKey, _Context]] = []

    async def text(self, version: Version, read: Callable[[], Awaitable[str | None]]) -> str | None:
        """The text of ``version``: the one held, the read under way, or ``read()`` started now.

        None when the read found the file changed since its ``stat`` (nothing is kept: the caller
        reads the file again, for itself). The read's failure is raised to every request awaiting it.
        """
        cache = self._cache
        entry = cache._texts.get(version) or cache._start(version, read)
        entry.users += 1
        self._texts.append((version, entry))
        try:
            return await asyncio.shield(entry.read)
        except BaseException:
            self._texts.remove((version, entry))
            cache._drop_text(version, entry)
            raise

    def context(self, key: ContextKey) -> tuple[str, tuple[int, ...]] | None:
        """The documents-only context held for ``key`` (now held by this request too) and the
        length of each of its documents; None when no request holds one."""
        entry = self._cache._contexts.get(key)
        if entry is None:
            return None
        entry.users += 1
        self._contexts.append((key, entry))
        return entry.text, entry.lengths

    def keep_context(self, key: ContextKey, join: Callable[[], str], lengths: tuple[int, ...]) -> str:
        """The context for ``key``: the one another request made meanwhile, else ``join()``, kept."""
        entry = self._cache._contexts.get(key)
        if entry is None:
            entry = self._cache._contexts[key] = _Context(join(), lengths)
        entry.users += 1
        self._contexts.append((key, entry))
        return entry.text

    def release_texts(self) -> None:
        """Give back the texts (once they are joined into a held context, they need not be kept)."""
        texts, self._texts = self._texts, []
        for version, entry in texts:
            self._cache._drop_text(version, entry)

    def release(self) -> None:
        """Give back everything held; what no other request holds is dropped."""
        self.release_texts()
        contexts, self._contexts = self._contexts, []
        for key, entry in contexts:
            self._cache._drop_context(key, entry)
