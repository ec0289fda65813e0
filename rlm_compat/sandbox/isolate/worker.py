"""The worker side of ``isolation="process"``: one REPL session in a killable process.

Started by :mod:`.spawn` (forked from the pre-warmed template process, or as a fresh interpreter)
with :func:`serve` as its entry. It holds the session's namespace and runs each step with an
:class:`~rlm_compat.sandbox.step.inline.InlineRunner` under the session's own deadline, so an ordinary
timeout leaves the worker and its variables intact; the parent kills the worker only when a step outlives the
deadline (a single long C call) or the worker breaks a limit. Host functions are stubs that call
back into the parent, where the real function runs.

Per step the parent sends what changed in its ``env`` (pickled values, modules by name, host
functions by name and kind); the worker answers with the observation and the variables that
changed, each pickled on its own so one value that cannot cross (a function, a class, an
instance of one) stays here as an opaque entry instead of failing the step.

How much crosses back depends on the session's *state* (see :class:`_Session`): ``"env"`` (the
drop-in's contract: the caller's ``env`` holds the variables) sends every changed plain value;
``"worker"`` (the RLM loop) sends only small plain values (the ones a killed worker's successor
gets back) and, for everything else, its name and type. Either way a step's cost follows what
it changed: a step whose code names no mutable variable (``k = 2``, ``print(len(context))``)
re-checks nothing, and in ``"worker"`` state a big value is never re-checked at all.
"""

from __future__ import annotations

import contextlib
import importlib
import mmap
import operator
import os
import pickle
import re
import socket
from collections.abc import Callable, Iterator
from typing import Any

try:  # hashlib would load OpenSSL too: ~2 ms of the fork server's start, for one hash
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - CPython builds without it
    from hashlib import blake2b

from ...errors import RAN_AND_FAILED, StepFailure
from ..restrict.deadline import host_code
from ..restrict.modules import proxy_for_module
from ..step.hostcall import host_call
from ..step.inline import InlineRunner
from ..step.texts import Texts
from . import rlimits, wire, wire_encode
from .channel import PROTOCOL, Channel
from .mapped import MAX_MAPPED, close_all
from .mapped import read as mapped_read
from .workerinit import EXIT_OUT_OF_MEMORY, take_inherited

__all__ = ["ESCAPED", "serve"]

ESCAPED = "#escaped\n"

_ATOMIC = (str, bytes, int, float, bool, type(None), complex)
"""Values whose unchanged identity means an unchanged value (nothing inside can change)."""
_UNSEEN = object()
_ALIAS_MIN = 1 << 16
"""Host-sent text at least this long comes back by name when the code binds it to another name."""
_PARENTS = b"parent"
"""Digest of the parent's own entries (modules, host functions): never reported back while kept."""
_MIN_STEP_ROOM = 32 << 20
"""Address space a step always gets, even when the session already holds its whole allowance."""
_HELD = b"held"
"""Fingerprint of a value that stays in the worker (``"worker"`` state): never re-checked."""
KEEP_BYTES = 64 << 10
"""``"worker"`` state: a plain value whose pickle is at most this long crosses back (and so
survives a killed worker); anything bigger stays here, the parent gets its name and type."""
KEEP_ITEMS = 4096
"""``"worker"`` state: a container holding more elements (counted through nesting) stays here."""
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OPEN_DOORS = frozenset(
    {
        "globals",
        "vars",
        "locals",
        "eval",
        "exec",
        "compile",
        "import",
        "getattr",
        "setattr",
        "delattr",
        "gc",
        "f_globals",
        "f_locals",
        "f_back",
        "tb_frame",
        "gi_frame",
        "cr_frame",
        "ag_frame",
    }
)
"""Words that make a step's reach unknowable from its text (any reference to the namespace or
to frames): such a step re-checks every variable it could have changed."""


class _Remote:
    """A host function living in the parent: each call is one round trip on the channel."""

    def __init__(self, name: str, channel: Channel) -> None:
        self.__name__ = name
        self._channel = channel

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            payload = wire_encode.encode([list(args), kwargs])
        except wire.Unplain as exc:
            raise TypeError(Texts.unsendable_argument(self.__name__, exc)) from None
        self._channel.send({"op": "call", "name": self.__name__, "payload": payload})
        reply = self._channel.recv()
        if reply["op"] == "raise":
            raise reply["error"]
        return reply["value"]


host_code(_Remote.__call__)


class _Session:
    """The worker's state: its namespace and what the parent already knows of it."""

    def __init__(self, channel: Channel, runner: InlineRunner, shared: frozenset[str] | None = None) -> None:
        self.channel = channel
        self.runner = runner
        # None: "env" state, every changed plain value crosses back; else "worker" state, where
        # only small plain values and these names (0.5's ``answer`` dict) cross
        self.shared = shared
        self.checked: list[str] = []  # the variables the last step's changes() looked into
        self.ns: dict[str, Any] = {}
        # per variable: the object the parent last saw (held, so its id cannot be reused by a
        # new value while we compare against it) and what it is compared by
        self.known: dict[str, tuple[object, object]] = {}
        self.from_host: dict[str, str | bytes] = {}  # big text the host sent, by variable
        self.sizes: dict[str, int] = {}  # the size of each value the host sent, as last sent
        self.base_vm = rlimits.current_address_space()
        self.as_limit: int | None = None
        self.cpu_limit: int | None = None

    def sync(self, message: dict[str, Any]) -> dict[str, str]:
        """Apply the parent's changes; the variables that could not be loaded here, with why."""
        ns = self.ns
        for key in message["removed"]:
            ns.pop(key, None)
            self.known.pop(key, None)
            self.sizes.pop(key, None)
            self.from_host.pop(key, None)
        mapped: dict[str, tuple[str, int]] = message.get("mapped", {})
        payloads = message.pop("values")  # dropped as soon as loaded: a big context is not kept twice
        self._make_room(sum(map(len, payloads.values())) + sum(size for _, size in mapped.values()))
        failed = self._load_mapped(mapped, message.pop("fds", []))
        for key in list(payloads):
            data = payloads.pop(key)
            self.sizes[key] = len(data)
            try:
                ns[key] = pickle.loads(data)
            except Exception as exc:  # e.g. a class only the parent's __main__ defines
                ns.pop(key, None)
                failed[key] = f"{type(exc).__name__}: {exc}"
                continue
            value = ns[key]
            # the fingerprint changes() would compute, so an unchanged value is never sent back
            self.known[key] = (value, _fingerprint(value))
            self._note_from_host(key, value)
        for key, name in message["modules"].items():
            ns[key] = proxy_for_module(importlib.import_module(name))
            self.known[key] = (ns[key], _PARENTS)
        for key, kind in message["hosts"].items():
            ns[key] = host_call(_Remote(key, self.channel), kind)
            self.known[key] = (ns[key], _PARENTS)
        for key, source in message.get("aliases", {}).items():  # a text the host sent under another name
            if source not in ns:
                failed[key] = f"the variable {source!r} holding its text is gone"
                continue
            value = ns[key] = ns[source]
            self.known[key] = (value, None)
            self.sizes[key] = self.sizes.get(source, 0)
            self._note_from_host(key, value)
        return failed

    def inherit(self, wanted: Any) -> list[str]:
        """Bind the value inherited from the context template (see :mod:`.templates`) to the
        variable the parent names, if it is what the parent says (type and length); the names bound.

        It counts as data the host sent (the step's address-space allowance grows with it), and
        the session's start size leaves it out: it was mapped before the session began.
        """
        value = take_inherited()
        if value is None or not (isinstance(wanted, dict) and len(wanted) == 1):
            return []
        ((key, (kind, length)),) = wanted.items()
        if type(value).__name__ != kind or len(value) != length:
            return []
        self.ns[key] = value
        self.known[key] = (value, None)
        self.sizes[key] = len(value)
        self._note_from_host(key, value)
        if self.base_vm is not None:
            self.base_vm -= value.__sizeof__()
        return [key]

    def _make_room(self, incoming: int) -> None:
        """Raise the address-space limit by what arrives (the data and the value it becomes).

        What the host sends is not model code's allocation: a context never fails to load for
        the step's allowance; :meth:`cap` sets the step's limit afterwards as usual.
        """
        if incoming and self.as_limit is not None:
            now = rlimits.fast_address_space() or self.as_limit
            room = now + 2 * incoming + _MIN_STEP_ROOM
            if room > self.as_limit:
                rlimits.set_address_space(room)
                self.as_limit = room

    def _load_mapped(self, mapped: dict[str, tuple[str, int]], fds: list[int]) -> dict[str, str]:
        """The big ``str`` / ``bytes`` values that came as memory files (see :mod:`.mapped`)."""
        failed: dict[str, str] = {}
        try:
            fds.reverse()
            for key, (kind, size) in mapped.items():
                if not fds:
                    self.ns.pop(key, None)
                    failed[key] = "its data did not arrive"
                    continue
                self.sizes[key] = size
                try:
                    value = self.ns[key] = mapped_read(fds.pop(), kind, size)
                except Exception as exc:
                    self.ns.pop(key, None)
                    self.known.pop(key, None)
                    failed[key] = f"{type(exc).__name__}: {exc}"
                    continue
                self.known[key] = (value, None)
                self._note_from_host(key, value)
        finally:
            close_all(fds)
        return failed

    def _note_from_host(self, key: str, value: object) -> None:
        if type(value) in (str, bytes) and len(value) >= _ALIAS_MIN:  # type: ignore[arg-type]
            self.from_host[key] = value  # type: ignore[assignment]
        else:
            self.from_host.pop(key, None)

    def touches(self, code: str) -> bool:
        """Whether a step running ``code`` could change a mutable value the session already holds.

        Told from the text alone, before the step runs: it could only if it names a variable
        bound to something mutable (a list, a function that may mutate one, an instance...), or
        uses a word that reaches the namespace or frames another way. Words in strings and
        comments count too (never a missed change, at worst a needless re-check).
        """
        words = set(_IDENTIFIER.findall(code))
        if not words.isdisjoint(_OPEN_DOORS) or any("__" in word for word in words):
            return True
        known = self.known
        for word in words:
            entry = known.get(word)
            if entry is not None and not isinstance(entry[0], _ATOMIC) and entry[1] != _PARENTS:
                return True
        return False

    def changes(
        self, touched: bool = True
    ) -> tuple[dict[str, tuple[str, bool, bytes]], list[str], dict[str, str]]:
        """What the step changed: ``(type, kept here, pickle)`` per variable, removed names, and
        aliases: variables now bound to a big text the host sent as another, still unchanged,
        variable (``text = context``), named instead of sent back.

        ``touched``: what :meth:`touches` said of the step's code. When False, a value still
        bound to the same object is not looked into (nothing could have reached it), unless the
        step unbound some mutable value (a finalizer may have run). A kept value (``b""``, kept)
        stays here; the parent holds a stand-in naming its type.
        """
        ns = self.ns
        known = self.known
        self.from_host = {k: v for k, v in self.from_host.items() if ns.get(k) is v}
        origins = {id(v): k for k, v in self.from_host.items()}  # alive: held in from_host
        if not touched:
            touched = any(
                ns.get(key, _UNSEEN) is not seen and not isinstance(seen, _ATOMIC) and seen_print != _PARENTS
                for key, (seen, seen_print) in known.items()
            )
        shared = self.shared
        values: dict[str, tuple[str, bool, bytes]] = {}
        aliases: dict[str, str] = {}
        encoder = wire_encode.Encoder()  # one message: one item budget, as the parent counts it
        self.checked = checked = []
        for key, value in ns.items():
            seen, seen_print = known.get(key, (_UNSEEN, None))
            same = seen is value
            if same and (not touched or isinstance(value, _ATOMIC) or seen_print in (_PARENTS, _HELD)):
                continue
            origin = origins.get(id(value))
            if origin is not None and origin != key:
                aliases[key] = origin
                known[key] = (value, None)
                self.from_host[key] = value  # the parent holds it under this name too now
                continue
            checked.append(key)
            if same and isinstance(seen_print, _Snapshot) and seen_print.matches(value):
                continue
            if shared is not None and key not in shared and not _small(value):
                values[key] = (type(value).__qualname__, True, b"")
                known[key] = (value, _HELD)
                continue
            snapshot = _Snapshot.of(value)
            try:
                data, kept = encoder.value(value)
            except Exception:  # a model's __repr__ failing oddly, memory
                data, kept = b"", True  # the parent makes a bare stand-in of what it cannot load
            print_: object
            if shared is not None and key not in shared and len(data) > KEEP_BYTES:
                data, kept, print_ = b"", True, _HELD
            else:
                print_ = snapshot if snapshot is not None else _digest(data)
            if same and seen_print == print_:
                continue
            values[key] = (type(value).__qualname__, kept, data)
            known[key] = (value, print_)
        removed = [k for k in known if k not in ns]
        for key in removed:
            del known[key]
        return values, removed, aliases

    def cap(self) -> None:
        """This step's limits: address space above what the session holds, CPU time.

        Every step, so the system calls are few: one read of the size, and a limit set only
        when it moves (the CPU limit when less than half a step's allowance is left).
        """
        limits = self.runner.config.limits
        if limits.memory_mb is not None and self.base_vm is not None:
            now = rlimits.fast_address_space()
            if now is not None:
                received = sum(self.sizes.values())  # a resent value replaces its old size
                total = self.base_vm + (limits.memory_mb << 20) + (1 + rlimits.CONTEXT_ROOM) * received
                total = max(total, now + _MIN_STEP_ROOM)
                if total != self.as_limit:
                    rlimits.set_address_space(total)
                    self.as_limit = total
        if limits.cpu_seconds is not None:
            used = rlimits.cpu_used()
            if self.cpu_limit is None or self.cpu_limit - used < limits.cpu_seconds / 2:
                self.cpu_limit = int(used) + 1 + limits.cpu_seconds
                rlimits.set_cpu(self.cpu_limit)


def _small(value: Any) -> bool:
    """Whether ``value`` is small enough to cross back in ``"worker"`` state (at most
    :data:`KEEP_ITEMS` elements through nesting, no text over :data:`KEEP_BYTES`); its pickle's
    length decides the rest. Stops as soon as it is too big: the cost never follows the value."""
    if isinstance(value, (str, bytes)):
        return len(value) <= KEEP_BYTES
    if isinstance(value, _ATOMIC):
        return True
    budget = KEEP_ITEMS
    pending = [value]
    while pending:
        item = pending.pop()
        kind = type(item)
        if kind is str or kind is bytes:
            budget -= 1 + len(item) // 64
        elif kind is list or kind is tuple or kind is set or kind is frozenset:
            budget -= 1 + len(item)
            if budget < 0:
                return False
            pending.extend(i for i in item if not isinstance(i, _ATOMIC) or type(i) in (str, bytes))
        elif kind is dict:
            budget -= 1 + 2 * len(item)
            if budget < 0:
                return False
            pending.extend(item)
            pending.extend(item.values())
        else:
            budget -= 1
        if budget < 0:
            return False
    return True


def _digest(data: bytes) -> bytes:
    return blake2b(data, digest_size=16).digest()


_FLAT_ITEMS = frozenset({str, bytes, int, float, bool, type(None), complex})


class _Snapshot:
    """The elements of a container of immutable scalars, held to tell whether it changed.

    A list of 100k strings (a chunked context) would otherwise be pickled and hashed after every
    step; comparing element identities against a kept shallow copy is exact (the copy keeps the old
    elements alive, so an identity cannot be reused) and costs a fraction of that.
    """

    __slots__ = ("items", "kind", "values")

    def __init__(self, kind: type, items: tuple[Any, ...], values: tuple[Any, ...] = ()) -> None:
        self.kind = kind
        self.items = items
        self.values = values

    @classmethod
    def of(cls, value: Any) -> _Snapshot | None:
        """A snapshot of a flat list, tuple, dict, set or frozenset; None for anything else."""
        kind = type(value)
        if kind is list or kind is tuple or kind is set or kind is frozenset:
            if set(map(type, value)) <= _FLAT_ITEMS:
                return cls(kind, tuple(value))
        elif kind is dict:
            keys, values = tuple(value), tuple(value.values())
            if set(map(type, keys)) <= _FLAT_ITEMS and set(map(type, values)) <= _FLAT_ITEMS:
                return cls(kind, keys, values)
        return None

    def matches(self, value: Any) -> bool:
        """Whether ``value`` still holds exactly these objects in this order (a set whose order
        moved without a change is reported changed: a resend, never a missed change)."""
        kind = type(value)
        if kind is not self.kind or len(value) != len(self.items):
            return False
        if not all(map(operator.is_, value, self.items)):
            return False
        return kind is not dict or all(map(operator.is_, value.values(), self.values))


def _fingerprint(value: Any) -> object:
    """What changes() compares a variable by: nothing for scalars, a snapshot, or a pickle digest."""
    if isinstance(value, _ATOMIC):
        return None
    snapshot = _Snapshot.of(value)
    return snapshot if snapshot is not None else _digest(wire_encode.encode_value(value)[0])


def _result(call: Any, *args: Any) -> dict[str, Any]:
    try:
        return {"ok": True, "text": call(*args)}
    except Exception as exc:  # REPLError and its subclasses: report class, text and how it failed
        failure = getattr(exc, "failure", None)
        if not isinstance(failure, StepFailure):
            failure = RAN_AND_FAILED
        return {
            "ok": False,
            "error": type(exc).__name__,
            "text": str(exc),
            "stage": failure.stage,
            "directive": failure.directive,
        }


def _done(session: _Session, result: dict[str, Any], failed: dict[str, str], touched: bool) -> dict[str, Any]:
    values, removed, aliases = session.changes(touched)
    return {
        "op": "done",
        "result": result,
        "values": values,
        "removed": removed,
        "aliases": aliases,
        "unloadable": failed,
        "checked": session.checked,
    }


HEADROOM_BYTES = 16 * 2**20


class _Headroom:
    """Address space held back while a step runs and given up while its reply is built.

    A step that fills the address-space allowance (a loop appending 10 MB strings) stops with a
    MemoryError the step reports; the reply that says so still needs memory (a dict, a pickle,
    a send buffer). Without this reserve it could fail there and the worker die with the step's
    error unreported. An anonymous mapping costs address space, not memory, and a map/unmap pair
    per step costs microseconds.
    """

    __slots__ = ("_map",)

    def __init__(self) -> None:
        self._map: mmap.mmap | None = None
        self._take()

    def _take(self) -> None:
        try:
            self._map = mmap.mmap(-1, HEADROOM_BYTES)
        except (OSError, MemoryError):  # the step left no room: try again after the next one
            self._map = None

    @contextlib.contextmanager
    def released(self) -> Iterator[None]:
        if self._map is not None:
            self._map.close()
            self._map = None
        try:
            yield
        finally:
            self._take()


def serve(sock: socket.socket, escaped: Callable[[str, Channel, dict[str, Any]], None] | None = None) -> None:
    """Serve one session until the parent closes the channel.

    ``escaped``: for security tests only (:func:`.escapehook.serve_repl`, an entry only the host
    can choose): a step whose code holds :data:`ESCAPED` is handed to it with the channel,
    as if model code had escaped every layer above the OS; it answers the parent (or not) itself.
    """
    channel = Channel(sock, peer="parent", max_fds=MAX_MAPPED)
    init = channel.recv()
    if init.get("op") != "init" or init.get("protocol") != PROTOCOL:
        channel.send({"op": "refused", "protocol": PROTOCOL})
        return
    runner = InlineRunner(init["config"], memory_guard=False)
    shared = init.get("shared")
    session = _Session(channel, runner, None if shared is None else frozenset(shared))
    inherited = session.inherit(init.get("inherited"))
    channel.send({"op": "ready", "pid": os.getpid(), "inherited": inherited})
    headroom = _Headroom()
    while True:
        try:
            message = channel.recv()
        except EOFError:
            return
        try:
            _answer(channel, session, runner, message, headroom, escaped)
        except MemoryError:  # even the headroom was not enough: say so by the exit status
            os._exit(EXIT_OUT_OF_MEMORY)


def _answer(
    channel: Channel,
    session: _Session,
    runner: InlineRunner,
    message: dict[str, Any],
    headroom: _Headroom,
    escaped: Callable[[str, Channel, dict[str, Any]], None] | None,
) -> None:
    """Answer one message of the parent."""
    op = message["op"]
    if op == "step":
        failed = session.sync(message)
        if escaped is not None and ESCAPED in message["code"]:
            escaped(message["code"], channel, session.ns)
            return
        session.cap()
        touched = session.touches(message["code"])
        result = _result(runner.execute, message["code"], session.ns)
        with headroom.released():
            channel.send(_done(session, result, failed, touched))
    elif op == "render":
        failed = session.sync(message)
        session.cap()
        touched = session.touches(message["name"])
        result = _result(runner.render, session.ns, message["name"])
        with headroom.released():
            channel.send(_done(session, result, failed, touched))
    elif op == "sync":  # a preload: the host's values before the first step
        channel.send({"op": "synced", "unloadable": session.sync(message)})
    elif op == "fetch":
        found = _fetch(session.ns, message["name"], runner.config.limits.reply_bytes)
        channel.send({"op": "value", "found": found})
    else:
        channel.send({"op": "refused", "protocol": PROTOCOL})


def _fetch(ns: dict[str, Any], name: str, limit: int | None) -> bytes | None:
    """One variable as plain data (``get_variable``); None when absent, not plain data, or
    bigger than the parent reads (``Limits.reply_bytes``)."""
    if name not in ns:
        return None
    try:
        data, kept = wire_encode.encode_value(ns[name])
    except Exception:
        return None
    return None if kept or (limit is not None and len(data) > limit - 4096) else data


def zygote_prewarm() -> None:
    """What every worker would build on its first step, built once in the fork server.

    The builtins mapping of each preset profile (and the standard library caches it warms) costs
    ~7 ms; made before the fork, workers share it copy-on-write instead of paying it each.
    """
    from ...profiles import Profile
    from ..restrict.policy import builtins_for

    for profile in (Profile.fixed(), Profile.upstream()):
        builtins_for(profile)
