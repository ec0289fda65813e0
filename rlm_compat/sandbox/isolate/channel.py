"""The framed message channel between the parent and a worker process.

Messages are dicts with an ``op`` key, pickled, each preceded by its length. The first message of
a session carries :data:`PROTOCOL` so both sides fail loudly on a mismatch instead of
misreading each other. The parent never unpickles what a worker sends with plain ``pickle``: a
worker runs untrusted code, and a pickle can name any callable. :func:`safe_loads` admits only
plain data types (containers, numbers, text, dates, a few ``collections`` types); anything else
stays in the worker.
"""

from __future__ import annotations

import array
import builtins
import io
import os
import pickle
import select
import socket
import struct
import time
import types
from collections.abc import Callable, Sequence
from typing import Any

__all__ = [
    "PLAIN_CLASSES",
    "PROTOCOL",
    "Channel",
    "ChannelClosed",
    "ChannelTimeout",
    "MessageTooLarge",
    "dumps_plain",
    "safe_loads",
    "short_repr",
]

PROTOCOL = 2
_HEADER = struct.Struct("!Q")
_JOIN_BELOW = 1 << 16
_FD_SIZE = array.array("i").itemsize


class ChannelClosed(EOFError):
    """The other side is gone (exited, killed, or closed the channel)."""


class ChannelTimeout(TimeoutError):
    """No complete message arrived before the deadline."""


class MessageTooLarge(Exception):
    """The other side announced a message over the reader's size limit."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"message of {size} bytes over the limit of {limit}")
        self.size = size
        self.limit = limit


_EXCEPTIONS = frozenset(
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
)
_SAFE_GLOBALS = {
    "builtins": frozenset(
        {
            "bool",
            "bytearray",
            "bytes",
            "complex",
            "dict",
            "float",
            "frozenset",
            "int",
            "list",
            "range",
            "set",
            "slice",
            "str",
            "tuple",
        }
    )
    | _EXCEPTIONS,
    "collections": frozenset({"Counter", "OrderedDict", "defaultdict", "deque"}),
    "datetime": frozenset({"date", "datetime", "time", "timedelta", "timezone"}),
    "decimal": frozenset({"Decimal"}),
    "fractions": frozenset({"Fraction"}),
    "types": frozenset({"SimpleNamespace"}),
}


def _plain_classes() -> frozenset[type]:
    import importlib

    return frozenset(
        getattr(importlib.import_module(module), name)
        for module, names in _SAFE_GLOBALS.items()
        for name in names
    )


PLAIN_CLASSES = _plain_classes()
"""The classes whose instances (and which, as values) cross from a worker as plain data."""


class _SafeUnpickler(pickle.Unpickler):
    def __init__(self, data: bytes, stand_in: Callable[[str, str], Any] | None) -> None:
        super().__init__(io.BytesIO(data))
        self._stand_in = stand_in

    def find_class(self, module: str, name: str) -> Any:
        if name in _SAFE_GLOBALS.get(module, ()):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not plain data")

    def persistent_load(self, pid: Any) -> Any:
        if self._stand_in is None or not (
            isinstance(pid, tuple)
            and len(pid) == 3
            and pid[0] == "stand-in"
            and isinstance(pid[1], str)
            and isinstance(pid[2], str)
        ):
            raise pickle.UnpicklingError("unexpected persistent id")
        return self._stand_in(pid[1], pid[2])


def safe_loads(data: bytes, stand_in: Callable[[str, str], Any] | None = None) -> Any:
    """Unpickle data from an untrusted worker: plain data types only.

    ``stand_in(type_qualname, repr)`` makes the object that replaces each value the worker kept
    (see :func:`dumps_plain`); without it such data is refused.
    """
    return _SafeUnpickler(data, stand_in).load()


class _StandInPickler(pickle.Pickler):
    def persistent_id(self, obj: Any) -> Any:
        kind = type(obj)
        if kind in PLAIN_CLASSES or (kind is type and obj in PLAIN_CLASSES):
            return None
        return ("stand-in", kind.__qualname__, short_repr(obj))


def dumps_plain(value: Any) -> tuple[bytes, bool]:
    """``value`` pickled for the parent, and whether anything in it had to stay behind.

    Plain data is pickled as it is (checked by loading it back the way the parent will). Anything
    else — a function, a class, an instance of one, a module proxy — is replaced by a stand-in
    carrying its type and repr, wherever it sits (``[f, g]`` crosses as a list of two stand-ins).
    """
    if not _never_plain(value):  # a function or a class: no failed attempt first
        try:
            data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
            safe_loads(data)
            return data, False
        except Exception:
            pass
    buffer = io.BytesIO()
    _StandInPickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    return buffer.getvalue(), True


def _never_plain(value: Any) -> bool:
    """Functions, methods, modules and classes other than the plain ones: pickling them by
    reference only to refuse them later costs a search of every loaded module each time."""
    if isinstance(value, type):
        return value not in PLAIN_CLASSES
    return isinstance(
        value, (types.FunctionType, types.MethodType, types.BuiltinFunctionType, types.ModuleType)
    )


def short_repr(value: Any, limit: int = 200) -> str:
    """``repr(value)``, at most ``limit`` characters, never raising."""
    try:
        text = repr(value)
    except BaseException:
        return f"<{type(value).__name__}>"
    if type(text) is not str:
        return f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Channel:
    """One end of a worker's socket: send and receive whole messages.

    ``trusted``: whether the other side's pickles may be loaded as they are (the worker trusts
    its parent; the parent does not trust the worker: message envelopes are loaded with
    :func:`safe_loads`, and values inside them are bytes the receiver decodes one by one).
    ``max_incoming``: a larger announced message raises :class:`MessageTooLarge` before
    anything is read.
    """

    def __init__(
        self,
        sock: socket.socket,
        *,
        trusted: bool,
        max_incoming: int | None = None,
        max_fds: int = 0,
    ) -> None:
        self.sock = sock
        self._trusted = trusted
        self._max = max_incoming
        self._max_fds = max_fds
        self._fds: list[int] = []

    def send(self, message: dict[str, Any], fds: Sequence[int] = ()) -> None:
        """Write one message (blocking); ``fds`` travel with its first byte (``SCM_RIGHTS``)."""
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        header = _HEADER.pack(len(data))
        if fds:
            sent = socket.send_fds(self.sock, [header], list(fds))
            self.sock.sendall(header[sent:])
            self.sock.sendall(data)
        elif len(data) > _JOIN_BELOW:
            self.sock.sendall(header)  # a big message is not copied once more to join the two
            self.sock.sendall(data)
        else:
            self.sock.sendall(header + data)

    def recv(self, deadline: float | None = None) -> dict[str, Any]:
        """Read one message; ``deadline`` is a ``time.monotonic()`` value or None (wait forever).

        A channel made with ``max_fds`` puts the descriptors that came with the message in its
        ``"fds"`` entry (the caller closes them); any other channel never takes one (the kernel
        closes descriptors a reader does not ask for).
        """
        try:
            header = self._read(_HEADER.size, deadline)
            (size,) = _HEADER.unpack(header)
            if self._max is not None and size > self._max:
                raise MessageTooLarge(size, self._max)
            data = self._read(size, deadline)
            message = pickle.loads(data) if self._trusted else safe_loads(data)
            if not isinstance(message, dict) or "op" not in message:
                raise ChannelClosed("malformed message")
        except BaseException:
            _close_all(self._fds)
            raise
        if self._fds:
            message["fds"], self._fds = self._fds, []
        return message

    def closed_by_peer(self) -> bool:
        """Whether the other side is gone, asked between messages (one poll, no round trip)."""
        try:
            if not select.select([self.sock], [], [], 0)[0]:
                return False
            return self.sock.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True

    def _read(self, size: int, deadline: float | None) -> bytes:
        buffer = bytearray(size)
        view = memoryview(buffer)
        got = 0
        while got < size:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                    raise ChannelTimeout("no reply before the deadline")
            try:
                if self._max_fds:
                    n = self._recv_with_fds(view[got:])
                else:
                    n = self.sock.recv_into(view[got:], size - got)
            except (ConnectionError, OSError) as exc:
                raise ChannelClosed(str(exc)) from None
            if n == 0:
                raise ChannelClosed("channel closed")
            got += n
        return bytes(buffer)

    def _recv_with_fds(self, view: memoryview) -> int:
        space = socket.CMSG_SPACE(self._max_fds * _FD_SIZE)
        n, ancillary, flags, _ = self.sock.recvmsg_into([view], space)
        for level, kind, data in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                usable = len(data) - len(data) % _FD_SIZE
                self._fds.extend(array.array("i", data[:usable]))
        if flags & socket.MSG_CTRUNC:
            raise ChannelClosed(f"more than {self._max_fds} descriptors came with one message")
        return int(n)


def _close_all(fds: list[int]) -> None:
    while fds:
        try:
            os.close(fds.pop())
        except OSError:
            pass
