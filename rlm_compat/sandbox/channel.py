"""The framed message channel between the parent and a worker process.

Messages are dicts with an ``op`` key, pickled, each preceded by its length. The first message of
a session carries :data:`PROTOCOL` so both sides fail loudly on a mismatch instead of
misreading each other. The parent never unpickles what a worker sends with plain ``pickle``: a
worker runs untrusted code, and a pickle can name any callable. :func:`safe_loads` admits only
plain data types (containers, numbers, text, dates, a few ``collections`` types); anything else
stays in the worker.
"""

from __future__ import annotations

import builtins
import io
import pickle
import select
import socket
import struct
import time
from typing import Any

__all__ = [
    "PROTOCOL",
    "Channel",
    "ChannelClosed",
    "ChannelTimeout",
    "MessageTooLarge",
    "safe_loads",
]

PROTOCOL = 1
_HEADER = struct.Struct("!Q")


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
    name for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
)
_SAFE_GLOBALS = {
    "builtins": frozenset({
        "bool", "bytearray", "bytes", "complex", "dict", "float", "frozenset", "int", "list",
        "range", "set", "slice", "str", "tuple",
    }) | _EXCEPTIONS,
    "collections": frozenset({"Counter", "OrderedDict", "defaultdict", "deque"}),
    "datetime": frozenset({"date", "datetime", "time", "timedelta", "timezone"}),
    "decimal": frozenset({"Decimal"}),
    "fractions": frozenset({"Fraction"}),
    "types": frozenset({"SimpleNamespace"}),
}


class _SafeUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if name in _SAFE_GLOBALS.get(module, ()):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not plain data")


def safe_loads(data: bytes) -> Any:
    """Unpickle data from an untrusted worker: plain data types only."""
    return _SafeUnpickler(io.BytesIO(data)).load()


class Channel:
    """One end of a worker's socket: send and receive whole messages.

    ``trusted``: whether the other side's pickles may be loaded as they are (the worker trusts
    its parent; the parent does not trust the worker: message envelopes are loaded with
    :func:`safe_loads`, and values inside them are bytes the receiver decodes one by one).
    ``max_incoming``: a larger announced message raises :class:`MessageTooLarge` before
    anything is read.
    """

    def __init__(self, sock: socket.socket, *, trusted: bool, max_incoming: int | None = None) -> None:
        self.sock = sock
        self._trusted = trusted
        self._max = max_incoming

    def send(self, message: dict[str, Any]) -> None:
        """Write one message (blocking)."""
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        self.sock.sendall(_HEADER.pack(len(data)) + data)

    def recv(self, deadline: float | None = None) -> dict[str, Any]:
        """Read one message; ``deadline`` is a ``time.monotonic()`` value or None (wait forever)."""
        header = self._read(_HEADER.size, deadline)
        (size,) = _HEADER.unpack(header)
        if self._max is not None and size > self._max:
            raise MessageTooLarge(size, self._max)
        data = self._read(size, deadline)
        message = pickle.loads(data) if self._trusted else safe_loads(data)
        if not isinstance(message, dict) or "op" not in message:
            raise ChannelClosed("malformed message")
        return message

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
                n = self.sock.recv_into(view[got:], size - got)
            except (ConnectionError, OSError) as exc:
                raise ChannelClosed(str(exc)) from None
            if n == 0:
                raise ChannelClosed("channel closed")
            got += n
        return bytes(buffer)
