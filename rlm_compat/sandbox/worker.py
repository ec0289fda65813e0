"""The child side of ``isolation="process"``: a persistent interpreter running one session.

Started by :mod:`.process` (``python -c "from rlm_compat.sandbox.worker import main; main()"``);
it speaks length-prefixed
pickles on stdin/stdout (its own ``print`` output is moved to stderr so it cannot corrupt the
channel), keeps the session's namespace, and runs each step with an inline
:class:`~rlm_compat.repl.REPLExecutor` (no timeout of its own: the parent kills this process when
the step's time is up, which stops even a single long C call).
"""

from __future__ import annotations

import importlib
import os
import pickle
import struct
import sys
from typing import IO, Any

__all__ = ["main", "read_message", "write_message"]

_HEADER = struct.Struct("!I")
_MUTABLE = (list, dict, set, bytearray)
"""Values sent by the parent that code may have changed in place: always sent back."""


def write_message(stream: IO[bytes], message: Any) -> None:
    """One framed pickle."""
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def read_message(stream: IO[bytes]) -> Any:
    """One framed pickle, or EOFError when the other side is gone."""
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        raise EOFError("channel closed")
    (size,) = _HEADER.unpack(header)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("channel closed")
    return pickle.loads(data)


class _Remote:
    """A host function living in the parent: each call is one round trip on the channel."""

    def __init__(self, name: str, channel: _Channel) -> None:
        self.__name__ = name
        self._channel = channel

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._channel.call(self.__name__, args, kwargs)


class _Channel:
    def __init__(self, inp: IO[bytes], out: IO[bytes]) -> None:
        self.inp = inp
        self.out = out

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            write_message(self.out, ("call", name, args, kwargs))
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            raise TypeError(
                f"arguments to {name}() must be plain data in the process sandbox ({exc})"
            ) from None
        reply = read_message(self.inp)
        if reply[0] == "raise":
            raise reply[1]
        return reply[1]


def _packable(value: Any) -> bool:
    try:
        pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        return False
    return True


def _cap_address_space(memory_limit_mb: int | None) -> None:
    """One enormous allocation fails here (MemoryError) instead of exhausting the machine."""
    if memory_limit_mb is None:
        return
    try:
        import resource

        with open("/proc/self/statm") as f:
            size = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        cap = size + (memory_limit_mb << 20) * 2 + (1 << 30)
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    except (ImportError, OSError, ValueError):
        pass


def main() -> None:
    """Serve one session until the parent closes the channel."""
    inp = sys.stdin.buffer
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # stray writes to fd 1 land on stderr, never in the channel
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

    from ..repl import REPLExecutor
    from .hostcall import host_call
    from .modules import proxy_for_module

    channel = _Channel(inp, out)
    init = read_message(inp)
    _, profile, max_output_chars, memory_limit_mb = init
    _cap_address_space(memory_limit_mb)
    executor = REPLExecutor(
        None, max_output_chars, profile=profile, memory_limit_mb=memory_limit_mb
    )
    ns: dict[str, Any] = {}
    sent: dict[str, int] = {}
    write_message(out, ("ready", os.getpid()))
    while True:
        try:
            message = read_message(inp)
        except EOFError:
            return
        kind = message[0]
        if kind == "sync":
            _, values, modules, hosts, removed = message
            for key in removed:
                ns.pop(key, None)
            for key, data in values.items():
                try:
                    ns[key] = pickle.loads(data)
                except Exception:  # e.g. a class only the parent's __main__ defines
                    ns.pop(key, None)
            for key, name in modules.items():
                ns[key] = proxy_for_module(importlib.import_module(name))
            for key in hosts:
                ns[key] = host_call(_Remote(key, channel))
            sent = {k: id(v) for k, v in ns.items()}
            continue
        if kind != "exec":
            continue
        code = message[1]
        try:
            result: tuple[Any, ...] = ("ok", executor.execute(code, ns))
        except Exception as exc:  # REPLError and its subclasses: report class and text
            result = ("err", type(exc).__name__, str(exc))
        changed: dict[str, Any] = {}
        opaque: dict[str, str] = {}
        for key, value in ns.items():
            if sent.get(key) == id(value) and not isinstance(value, _MUTABLE):
                continue
            if type(value).__name__ == "HostCall":
                continue
            if _packable(value):
                changed[key] = value
            else:
                opaque[key] = type(value).__name__
        removed = [k for k in sent if k not in ns]
        sent = {k: id(v) for k, v in ns.items()}
        write_message(out, ("done", result, changed, opaque, removed))


if __name__ == "__main__":
    main()
