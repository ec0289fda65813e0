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
written straight from its own memory, without the encoding copies: one copy in the parent. On
the worker's side an ASCII ``str`` (kind ``"ascii"``) or ``bytes`` from a sealed file is read
with ``preadv`` straight into a new, still private object of the right size: one copy, no
decoding pass and no mapping whose pages would each fault in (at 1 GB the mapping and the
decode took about three times a plain copy). Whoever closes the file last frees its pages
(~0.2-0.6 s a GB): that is the worker, since the parent closes its descriptor once the message is
sent; the worker closes a big file from a background thread (:func:`read`), so the freeing runs
beside the step instead of before it, and the memory is back as soon as the value is built.
"""

from __future__ import annotations

import mmap
import os
import socket
import sys
import threading
from collections.abc import Callable

__all__ = ["BACKGROUND_CLOSE_MIN", "MAPPED_MIN", "MAX_MAPPED", "available", "close_all", "read", "write"]

MAPPED_MIN = 1 << 20
"""Values at least this long (characters or bytes) cross mapped; smaller ones are pickled."""
MAX_MAPPED = 32
"""The most values one message brings as memory files (further ones are pickled)."""
BACKGROUND_CLOSE_MIN = 1 << 26
"""A file at least this big is closed by :func:`read` from a background thread (freeing 64 MiB
of pages takes ~10 ms; a smaller one is closed at once, so it is surely gone when the step ends)."""
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
    """``value`` in a new sealed memory file: ``(descriptor, kind, size in bytes)``; the kind
    is ``"ascii"`` (a ``str`` whose bytes are its characters), ``"str"`` or ``"bytes"``.

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
                kind = "ascii"
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
    """The value :func:`write` stored, copied out once; closes ``fd`` (in the background when
    the file is at least :data:`BACKGROUND_CLOSE_MIN` bytes: this close frees its pages)."""
    try:
        if os.fstat(fd).st_size != size:
            raise ValueError(f"the value's file holds {os.fstat(fd).st_size} bytes, not {size}")
        if kind not in ("ascii", "str", "bytes"):
            raise ValueError(f"unknown kind of mapped value {kind!r}")
        if size == 0:
            return b"" if kind == "bytes" else ""
        if kind != "str" and _sealed(fd):
            filled = _fill(fd, kind, size)
            if filled is not None:
                return filled
        with mmap.mmap(fd, size, access=mmap.ACCESS_READ) as mapping:
            if kind == "bytes":
                return bytes(mapping)
            return str(mapping, *_ENCODING) if kind == "str" else str(mapping, "ascii")
    finally:
        _close_soon(fd, size)


def _close_soon(fd: int, size: int) -> None:
    if size >= BACKGROUND_CLOSE_MIN:
        try:
            threading.Thread(target=close_all, args=([fd],), name="rlm-mapped-close", daemon=True).start()
            return
        except RuntimeError:  # no new threads (the interpreter is shutting down)
            pass
    os.close(fd)


def _sealed(fd: int) -> bool:
    """Whether no one can write to the file any more: only then is its ASCII not re-checked
    (it came from a ``str`` CPython itself flagged ASCII, in the parent, which the worker trusts)."""
    try:
        import fcntl

        return bool(fcntl.fcntl(fd, fcntl.F_GET_SEALS) & fcntl.F_SEAL_WRITE)
    except (ImportError, AttributeError, OSError):
        return False


def _fill(fd: int, kind: str, size: int) -> str | bytes | None:
    """A new ``str`` (ASCII) or ``bytes`` of ``size`` read from ``fd`` into its own storage, or
    None where this interpreter's layout is not the one :func:`_layout` checked."""
    layout = _layout()
    if layout is None:
        return None
    new_ascii, new_bytes, str_offset, bytes_offset = layout
    value: str | bytes = new_ascii(size, 127) if kind == "ascii" else new_bytes(None, size)
    import ctypes

    offset = str_offset if kind == "ascii" else bytes_offset
    target = memoryview((ctypes.c_char * size).from_address(id(value) + offset)).cast("B")
    got = 0
    while got < size:
        n = os.preadv(fd, [target[got : got + _BIG_CHUNK]], got)
        if n <= 0:
            raise ValueError(f"the value's file ended after {got} of {size} bytes")
        got += n
    return value


_LAYOUT: list[tuple[Callable[..., str], Callable[..., bytes], int, int] | None] = []


def _layout() -> tuple[Callable[..., str], Callable[..., bytes], int, int] | None:
    """CPython's constructors of an empty-but-sized ``str`` / ``bytes`` and where their data
    starts, checked once against objects whose contents are known; None elsewhere."""
    if not _LAYOUT:
        _LAYOUT.append(_probe_layout())
    return _LAYOUT[0]


def _probe_layout() -> tuple[Callable[..., str], Callable[..., bytes], int, int] | None:
    if sys.implementation.name != "cpython":
        return None
    try:
        import ctypes

        api = ctypes.pythonapi
        new_ascii = api.PyUnicode_New
        new_ascii.restype, new_ascii.argtypes = ctypes.py_object, [ctypes.c_ssize_t, ctypes.c_uint32]
        new_bytes = api.PyBytes_FromStringAndSize
        new_bytes.restype, new_bytes.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_ssize_t]
        str_offset, bytes_offset = sys.getsizeof("") - 1, sys.getsizeof(b"") - 1
        text = "".join(["rlm-compat layout probe ", str(os.getpid())])  # made here: not shared
        data = text.encode()
        if ctypes.string_at(id(text) + str_offset, len(text)) != data:
            return None
        if ctypes.string_at(id(data) + bytes_offset, len(data)) != data:
            return None
        made = new_ascii(4, 127)
        if type(made) is not str or len(made) != 4 or not made.isascii():
            return None
        return new_ascii, new_bytes, str_offset, bytes_offset
    except (ImportError, AttributeError, TypeError, ValueError, OSError):
        return None


def close_all(fds: list[int]) -> None:
    """Close and forget every descriptor in ``fds`` (each once, whatever happened before)."""
    while fds:
        try:
            os.close(fds.pop())
        except OSError:
            pass
