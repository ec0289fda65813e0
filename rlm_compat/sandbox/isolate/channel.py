"""The framed message channel between the parent and a worker process.

Messages are dicts with an ``op`` key, each preceded by its length. The first message of a
session carries :data:`PROTOCOL` so both sides fail loudly on a mismatch instead of misreading
each other. The two directions differ because only one side is trusted: the parent's messages
to its worker are pickled (the parent is trusted; a worker only unpickles what its own parent
sent), a worker's messages to its parent are :mod:`.wire` messages, decoded as hostile data
within limits. The parent stamps each request with a sequence number and a worker echoes it on
everything it sends for that request, so a message sent out of turn is never taken for the
reply to a later request.
"""

from __future__ import annotations

import array
import os
import pickle
import select
import socket
import struct
import time
from collections.abc import Sequence
from typing import Any

from . import wire, wire_encode

__all__ = [
    "ENVELOPE_DEPTH",
    "PEERS",
    "PROTOCOL",
    "Channel",
    "ChannelClosed",
    "ChannelTimeout",
    "MessageTooLarge",
]

PROTOCOL = 4
PEERS = ("worker", "parent")
ENVELOPE_DEPTH = 6
"""A worker's message nests no deeper than this where the parent reads it (its fields are checked
by exact type); values inside it are bytes decoded one by one, each tree checked."""
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


class Channel:
    """One end of a worker's socket: send and receive whole messages.

    ``peer``: who is at the other end. The parent's end (``peer="worker"``) pickles what it
    sends and decodes what it receives with :func:`.wire.decode` (an envelope nested at most
    :data:`ENVELOPE_DEPTH` deep; values inside it are bytes the receiver decodes one by one);
    the worker's end (``peer="parent"``) the other way round, stamping what it sends with the
    sequence number of the last request it received. ``max_incoming``: a larger announced
    message raises :class:`MessageTooLarge` before anything is read.
    """

    def __init__(
        self,
        sock: socket.socket,
        *,
        peer: str,
        max_incoming: int | None = None,
        max_fds: int = 0,
    ) -> None:
        if peer not in PEERS:
            raise ValueError(f"peer must be one of {PEERS}, not {peer!r}")
        self.sock = sock
        self._from_worker = peer == "worker"
        self._max = max_incoming
        self._max_fds = max_fds
        self._limits = wire.WireLimits(max_bytes=max_incoming, max_depth=ENVELOPE_DEPTH)
        self._fds: list[int] = []
        self.seq: int | None = None
        """The worker's end: the sequence number of the request being answered."""

    def send(self, message: dict[str, Any], fds: Sequence[int] = ()) -> None:
        """Write one message (blocking); ``fds`` travel with its first byte (``SCM_RIGHTS``)."""
        if self._from_worker:
            data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        else:
            data = wire_encode.pack_message(message if self.seq is None else {**message, "seq": self.seq})
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
            if self._from_worker:
                message = wire.decode(data, self._limits, envelope=True)
                if type(message) is not dict:
                    raise wire.WireError("a message that is not a map")
            else:
                message = pickle.loads(data)
                if type(message.get("seq")) is int:
                    self.seq = message["seq"]
        except BaseException:
            _close_all(self._fds)
            raise
        if self._fds:
            message["fds"], self._fds = self._fds, []
        return message  # type: ignore[no-any-return]

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
