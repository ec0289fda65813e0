"""Large ``str`` / ``bytes`` values across the worker boundary as sealed memory files.

A 100 MB context sent in-band is copied about eight times on its way (pickle, the message
envelope, the framing, socket buffers, the receive buffer, unpickling) and held two or three
times at once on each side. Sent this way it is copied twice: the parent writes it, in 1 MiB
pieces, into an anonymous memory file (``memfd``; a file unlinked at once where there is none),
seals it read-only and passes the descriptor with the step message (``SCM_RIGHTS``); the worker
maps it read-only and builds an ordinary ``str`` (or ``bytes``) from the mapping, then closes it.
The file has no name and lives only as long as a descriptor to it: once the parent has sent it
and the worker has read it — or the worker is killed with the message unread — the kernel frees
it, so no path, a kill included, can leave one behind.

An ASCII ``str`` (CPython stores it as one byte per character, which is also its UTF-8) is
written straight from its own memory, without the encoding copies: one copy in the parent.
"""

from __future__ import annotations

import mmap
import os
import socket
import sys

__all__ = ["MAPPED_MIN", "MAX_MAPPED", "available", "close_all", "read", "write"]

MAPPED_MIN = 1 << 20
"""Values at least this long (characters or bytes) cross mapped; smaller ones are pickled."""
MAX_MAPPED = 32
"""The most values one message brings as memory files (further ones are pickled)."""
_CHUNK = 1 << 20
_BIG_CHUNK = 1 << 24
_ENCODING = ("utf-8", "surrogatepass")
_SEALS = ("F_SEAL_SEAL", "F_SEAL_SHRINK", "F_SEAL_GROW", "F_SEAL_WRITE")


def available() -> bool:
    """Whether descriptors can travel with a message here (POSIX: yes; Windows: no)."""
    return hasattr(socket, "send_fds") and sys.platform != "win32"


def _new_file() -> int:
    if hasattr(os, "memfd_create"):
        flags = os.MFD_CLOEXEC | getattr(os, "MFD_ALLOW_SEALING", 0)
        return os.memfd_create("rlm-compat-value", flags)
    import tempfile  # not imported up front: the fork server's start is kept short

    fd, path = tempfile.mkstemp(prefix="rlm-compat-value-")
    os.unlink(path)
    return fd


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _seal(fd: int) -> None:
    """No one may change the file any more (Linux memfd); elsewhere a no-op."""
    try:
        import fcntl

        seals = 0
        for name in _SEALS:
            seals |= getattr(fcntl, name)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    except (ImportError, AttributeError, OSError):
        pass


def write(value: str | bytes) -> tuple[int, str, int]:
    """``value`` in a new sealed memory file: ``(descriptor, kind, size in bytes)``.

    The caller owns the descriptor (see :func:`close_all`). A ``str`` is stored as UTF-8 with
    lone surrogates kept (``surrogatepass``), encoded a piece at a time so the parent never holds
    a second full copy.
    """
    fd = _new_file()
    try:
        if isinstance(value, str):
            kind = "str"
            view = _ascii_view(value)
            if view is not None:
                for start in range(0, len(view), _BIG_CHUNK):
                    _write_all(fd, view[start : start + _BIG_CHUNK])
            else:
                for start in range(0, len(value), _CHUNK):
                    _write_all(fd, value[start : start + _CHUNK].encode(*_ENCODING))
        else:
            kind = "bytes"
            _write_all(fd, value)
        size = os.lseek(fd, 0, os.SEEK_CUR)
        _seal(fd)
    except BaseException:
        os.close(fd)
        raise
    return fd, kind, size


def _ascii_view(value: str) -> memoryview | None:
    """The bytes of an ASCII ``str`` in place (CPython's compact ASCII layout), or None.

    Only for an exact ``str`` on CPython whose ``isascii()`` (a flag, no scan) holds; the view is
    checked against the text's first and last characters before use, so a layout this does not
    know falls back to encoding. The caller keeps ``value`` alive while it uses the view.
    """
    if type(value) is not str or sys.implementation.name != "cpython" or not value.isascii():
        return None
    if len(value) < _CHUNK:
        return None
    try:
        import ctypes

        offset = sys.getsizeof("") - 1  # the object's header; the characters follow it
        view = memoryview((ctypes.c_char * len(value)).from_address(id(value) + offset)).cast("B")
    except (ImportError, TypeError, ValueError, OSError):
        return None
    if view[:16].tobytes() != value[:16].encode() or view[-16:].tobytes() != value[-16:].encode():
        return None
    return view


def read(fd: int, kind: str, size: int) -> str | bytes:
    """The value :func:`write` stored (mapped read-only, copied out once); closes ``fd``."""
    try:
        if os.fstat(fd).st_size != size:
            raise ValueError(f"the value's file holds {os.fstat(fd).st_size} bytes, not {size}")
        if size == 0:
            return "" if kind == "str" else b""
        with mmap.mmap(fd, size, access=mmap.ACCESS_READ) as mapping:
            if kind == "str":
                return str(mapping, *_ENCODING)
            if kind == "bytes":
                return bytes(mapping)
        raise ValueError(f"unknown kind of mapped value {kind!r}")
    finally:
        os.close(fd)


def close_all(fds: list[int]) -> None:
    """Close and forget every descriptor in ``fds`` (each once, whatever happened before)."""
    while fds:
        try:
            os.close(fds.pop())
        except OSError:
            pass
