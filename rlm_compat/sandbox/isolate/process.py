"""``isolation="process"``: each session's code runs in its own killable worker process.

What it adds to the inline runner: the timeout stops anything, even a single long C call (a
catastrophic regex, ``math.factorial(10**7)``), because a worker that outlives its step's
deadline is killed and replaced; a single huge allocation fails in the worker at once (address
space limit); a crash of the interpreter (C stack overflow) is a REPLError here, not the end
of the host. The worker runs the same :class:`~rlm_compat.sandbox.step.inline.InlineRunner` with the same
:class:`~rlm_compat.sandbox.step.texts.Texts`, so an ordinary timeout or error reads exactly as inline.

How the session is kept: the worker holds the namespace. Before each step the parent sends the
``env`` entries that changed since the last step (pickled; a big ``str`` or ``bytes``, such as
the context, as a sealed memory file, see :mod:`.mapped`; modules by name; host functions by
name), so a context crosses once per session, never per step. After it, what comes back
depends on the session's state (:data:`STATES`). In ``"env"`` state (the drop-in's
``REPLExecutor``) the worker sends back each changed variable, and ``env`` gets those it can take
as plain data (a worker's messages are :mod:`.wire` data, decoded within limits and checked
against the protocol by :mod:`.replies`: the parent never unpickles anything a worker sends).
In ``"worker"`` state (the RLM loop) only small plain values come back (at most
:data:`~.worker.KEEP_BYTES` encoded); ``env`` names everything else by a :class:`WorkerObject`,
so the namespace never crosses as a whole and a step costs the same whatever the session holds.
The rest (functions, classes, instances of them, other objects) stays in the worker and appears in ``env``
as a :class:`WorkerObject`. Only host functions (:class:`~rlm_compat.sandbox.step.hostcall.HostCall`, or
plain callables the host itself put in ``env`` that cannot be pickled) call back into the parent; nothing
that came from the worker ever runs here. The parent trusts nothing its worker says: every limit that
matters to the host (what a step's text, a final answer, a value may cost) is checked here again, and a
message that breaks the protocol or a limit fails the step with a
:class:`~rlm_compat.errors.REPLWorkerFaultError` and replaces the worker. When a worker is killed, its
WorkerObjects are lost: the step's error names each of them, and they leave ``env``; the plain values
``env`` holds go to the next worker as they were before the failed step.
"""

from __future__ import annotations

import functools
import math
import os
import pickle
import threading
import time
import types
import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ... import errors as _errors
from ...errors import FinalVarMissingError, REPLError, REPLTimeoutError, REPLWorkerFaultError
from ..step.hostcall import HostCall, sanitized
from ..step.texts import Texts
from . import mapped, replies, wire
from .channel import PROTOCOL, Channel, ChannelClosed, ChannelTimeout, MessageTooLarge
from .standin import WorkerObject
from .templates import shareable

if TYPE_CHECKING:
    from ..step.repl_config import ReplConfig
    from .spawn import WorkerHandle

__all__ = ["ENTRY_ENV", "KILL_GRACE", "STATES", "ProcessRunner", "WorkerObject"]

STATES = ("env", "worker")
"""Where a session's variables live: ``"env"``, in the caller's ``env`` too (every changed plain
value crosses back after a step: the drop-in's contract); ``"worker"``, in the worker only
(``env`` gets small plain values and a :class:`WorkerObject` naming the type of everything else;
the RLM loop's state, so nothing proportional to what the model derived ever crosses)."""

KILL_GRACE = 0.5
"""Seconds past a step's timeout before its worker is killed (the worker's own deadline stops
ordinary code at the timeout itself and keeps the session; this is for single long C calls)."""

ENTRY_ENV = "RLM_COMPAT_TEST_WORKER_ENTRY"
"""For security tests only: ``"escaped"`` starts workers with :mod:`.escapehook`'s REPL entry
(a step marked as escaped runs as plain Python with the worker's channel). The host's own
environment chooses it, never model code; any other value is refused."""
_ENTRIES = {"escaped": "rlm_compat.sandbox.isolate.escapehook:serve_repl"}
_CHANNEL_ERRORS = (
    ChannelClosed,
    ChannelTimeout,
    MessageTooLarge,
    OSError,
    wire.WireError,
    replies.WorkerFault,
)


class _WorkerDied(Exception):
    """The worker is gone or had to be killed; the text says why (for the observation)."""

    def __init__(self, text: str, error_type: type[REPLError] = REPLError, limit: str | None = None) -> None:
        super().__init__(text)
        self.text = text
        self.error_type = error_type
        self.limit = limit

    def error(self, text: str) -> REPLError:
        if self.error_type is REPLWorkerFaultError:
            return REPLWorkerFaultError(text, self.limit)
        return self.error_type(text)


def worker_entry(entry: str | None = None) -> str | None:
    """The worker entry a runner starts: ``entry`` (a key of the test entries), else what
    :data:`ENTRY_ENV` names, else None (the REPL worker)."""
    chosen = entry if entry is not None else os.environ.get(ENTRY_ENV) or None
    if chosen is None:
        return None
    if chosen not in _ENTRIES:
        raise ValueError(f"{ENTRY_ENV} must be one of {sorted(_ENTRIES)}, not {chosen!r}")
    return _ENTRIES[chosen]


class ProcessRunner:
    """The parent side of one session: its worker, started on first use, replaced after a kill."""

    def __init__(
        self, config: ReplConfig, *, state: str = "env", shared: Iterable[str] = (), entry: str | None = None
    ) -> None:
        if state not in STATES:
            raise ValueError(f"state must be one of {STATES}, not {state!r}")
        self._entry = worker_entry(entry)
        self._seq = 0
        self._wire_limits = wire.WireLimits(max_bytes=config.limits.reply_bytes)
        self.config = config
        self.state = state
        self._shared = None if state == "env" else sorted(set(shared))
        self._texts = Texts(config.profile)
        self._worker: list[Any] = [None]  # [WorkerHandle | None], shared with the finalizer
        self._channel: Channel | None = None
        self._sent: dict[str, Any] = {}
        self._hosts: set[str] = set()
        self._unsent: dict[str, str] = {}
        self._held: set[str] = set()
        self._notes: dict[str, str] = {}  # a preload's values the worker could not take
        self.last_checked: tuple[str, ...] = ()
        """The variables whose contents the worker looked into after the last step (to tell
        what changed); a step that names no mutable variable looks into none."""
        self.last_changed: frozenset[str] = frozenset()
        """The variables the last step changed, added or removed in ``env`` (what a caller that
        sizes or copies ``env`` after a step needs to look at again)."""
        self._lock = threading.Lock()
        self._aborted = False
        weakref.finalize(self, _abandon, self._worker)
        _prewarm(config.start_method or "forkserver")

    # --- lifecycle --------------------------------------------------------------------------

    @property
    def worker_pid(self) -> int | None:
        """The session's worker process id (None before the first step or after a close)."""
        handle = self._worker[0]
        return None if handle is None else int(handle.pid)

    def close(self) -> None:
        """Stop the worker (a new one starts on the next step; what lived only there is lost)."""
        with self._lock:
            self._drop()

    def abort(self) -> None:
        """Kill the worker now, without the step lock (a step in progress ends with a REPLError).

        A worker still starting is killed as soon as it exists (an abort in that window missed it,
        and the step it then ran lasted until its timeout).
        """
        self._aborted = True
        handle = self._worker[0]
        if handle is not None:
            handle.kill()

    def _drop(self) -> None:
        _release(self._worker)
        self._channel = None
        self._sent = {}
        self._notes = {}

    def _ensure(self, env: dict[str, Any]) -> Channel:
        if self._channel is not None:
            return self._channel
        from .spawn import DEFAULT_ENTRY, start_worker

        config = self.config
        limits = config.limits
        key, share = shareable(env)
        try:
            method = config.start_method or "forkserver"
            handle: WorkerHandle = start_worker(limits, method, self._entry or DEFAULT_ENTRY, share=share)
        except OSError as exc:  # WorkerStartError, or the OS refusing a process or a socket
            raise REPLError(Texts.no_worker(str(exc))) from None
        self._worker[0] = handle
        if self._aborted:
            handle.kill()
        channel = Channel(handle.sock, peer="worker", max_incoming=limits.reply_bytes)
        init = {"op": "init", "protocol": PROTOCOL, "config": config, "shared": self._shared}
        if handle.inherited is not None:
            init["inherited"] = {key: (type(share).__name__, len(handle.inherited))}
        try:
            seq = self._send(channel, init)
            reply = replies.parse(channel.recv(time.monotonic() + 30), ("ready", "refused"), seq)
        except _CHANNEL_ERRORS as exc:
            self._drop()
            raise REPLError(Texts.no_worker(f"it failed to start: {exc}")) from None
        if not isinstance(reply, replies.Ready):
            self._drop()
            spoken = getattr(reply, "protocol", None)
            raise REPLError(
                Texts.no_worker(f"it speaks protocol {spoken!r}, not {PROTOCOL}; reinstall rlm_compat")
            )
        self._channel = channel
        self._sent = {key: share} if key in reply.inherited else {}
        return channel

    # --- one step ---------------------------------------------------------------------------

    def execute(self, code: str, env: dict[str, Any], *, timeout: float | None = None) -> str:
        """Run ``code`` in the worker with ``env`` as the session's namespace.

        A ``timeout`` shorter than the session's is enforced from here: the worker is killed at
        it (what lived only there is lost, as with any kill).
        """
        with self._lock:
            notice = ""
            if self._channel is not None and self._channel.closed_by_peer():
                notice = self._texts.crashed("the REPL worker process had stopped") + self._lost(env)
                self._drop()
            text = self._round_trip(env, timeout, op="step", code=code)
            return f"{notice.strip()}\n{text}" if notice else text

    def preload(self, env: dict[str, Any]) -> None:
        """Start the worker and send it ``env`` now, in a background thread, so the context
        crosses while the caller does something else (the RLM loop: its first model call).

        The step lock is taken here and handed to the thread, so the first step always comes
        after the preload (and then sends only what changed since). A failure here is left for
        the first step to meet and report.
        """
        snapshot = dict(env)  # the caller may change env meanwhile
        self._lock.acquire()
        try:
            threading.Thread(target=self._preload, args=(snapshot,), name="rlm-preload", daemon=True).start()
        except BaseException:
            self._lock.release()
            raise

    def _preload(self, env: dict[str, Any]) -> None:
        try:
            if self._channel is None:
                self._send_only(env)
        finally:
            self._lock.release()

    def _send_only(self, env: dict[str, Any]) -> None:
        """Start the worker and send it ``env``. The big values are written to their memory files
        first, while the fork server and the worker are still starting: the parent's copy of the
        context overlaps the start instead of following it. A context the worker inherits from
        its template (:mod:`.templates`) is not sent at all."""
        fds: list[int] = []
        try:
            inherits = shareable(env)[1] is not None  # then only the rest is sent, after the start
            message = {} if inherits else {**self._sync(env, fds), "op": "sync"}
            sent = self._sent
            try:
                channel = self._ensure(env)
            except REPLError:
                return  # the first step starts a worker (or says why not) and sends env again
            if inherits:  # _ensure's account holds the inherited value: the rest goes now
                message = {**self._sync(env, fds), "op": "sync"}
            else:
                self._sent = sent  # a new session's account starts empty; this message is its start
            seq = self._send(channel, message, fds)
            mapped.close_all(fds)
            reply = replies.parse(channel.recv(time.monotonic() + 60), ("synced",), seq)
        except _CHANNEL_ERRORS:
            self._drop()
            return
        finally:
            mapped.close_all(fds)
        assert isinstance(reply, replies.Synced)
        self._notes = {**self._unsent, **reply.unloadable}

    def _send(self, channel: Channel, request: dict[str, Any], fds: list[int] | None = None) -> int:
        """Send one request stamped with the next sequence number (which its reply must echo)."""
        self._seq += 1
        channel.send({**request, "seq": self._seq}, fds or ())
        return self._seq

    def _limits(self) -> wire.WireLimits:
        return self._wire_limits

    def render(self, env: dict[str, Any], name: str) -> str:
        """``str()`` of a session variable as a final answer, computed in the worker."""
        with self._lock:
            if name not in env:
                raise FinalVarMissingError(f"Variable '{name}' not found in REPL environment")
            return self._round_trip(env, None, op="render", name=name)

    def fetch(self, name: str) -> tuple[bool, Any]:
        """``(True, value)`` of one session variable the worker holds as plain data (fetched
        now, under the step lock), else ``(False, None)``: no worker, no such variable, not plain
        data, or bigger than ``Limits.reply_bytes``. A worker that does not answer in time (a
        model-defined ``__reduce__`` may run while it pickles) is killed; the next step says so."""
        with self._lock:
            channel = self._channel
            if channel is None or channel.closed_by_peer():
                return False, None
            try:
                seq = self._send(channel, {"op": "fetch", "name": name})
                reply = replies.parse(
                    channel.recv(time.monotonic() + max(self.config.timeout, 1.0) + KILL_GRACE),
                    ("value",),
                    seq,
                )
                assert isinstance(reply, replies.Value)
                if reply.found is None:
                    return False, None
                return True, wire.decode(reply.found, self._limits())
            except _CHANNEL_ERRORS:
                self.abort()  # the next step finds it gone and names what was lost with it
                return False, None

    def _round_trip(self, env: dict[str, Any], timeout: float | None, **request: Any) -> str:
        """Sync ``env``, send ``request``, serve host calls, take the changes back."""
        channel = self._ensure(env)
        fds: list[int] = []
        try:
            message = {**self._sync(env, fds), **request}
            reply = self._serve(channel, env, message, fds, timeout)
        except _WorkerDied as died:
            text = died.text + self._lost(env)
            self._drop()
            raise died.error(text) from None
        finally:
            mapped.close_all(fds)
        return self._finish(reply, env, request["op"])

    def _sync(self, env: dict[str, Any], fds: list[int]) -> dict[str, Any]:
        """The step message's account of what changed in ``env``; the descriptors of the values
        that go as memory files are appended to ``fds`` (the caller closes them)."""
        values: dict[str, bytes] = {}
        big: dict[str, tuple[str, int]] = {}
        modules: dict[str, str] = {}
        hosts: dict[str, str] = {}
        self._unsent = {}
        aliases: dict[str, str] = {}
        texts: dict[int, str] | None = None  # big texts the worker holds or gets now, by identity
        for key, value in env.items():
            if not isinstance(key, str) or self._sent.get(key, _NOTHING) is value:
                continue
            if isinstance(value, WorkerObject):
                continue
            if type(value) in (str, bytes) and len(value) >= mapped.MAPPED_MIN:
                if texts is None:
                    texts = {
                        id(v): k for k, v in self._sent.items() if type(v) in (str, bytes) and env.get(k) is v
                    }
                if id(value) in texts:  # one text under a second name: bound there, never sent twice
                    aliases[key] = texts[id(value)]
                    self._sent[key] = value
                    continue
                texts[id(value)] = key
            if isinstance(value, types.ModuleType):
                modules[key] = value.__name__
            elif isinstance(value, HostCall):
                hosts[key] = value.kind
            elif callable(value) and not isinstance(value, type):
                hosts[key] = "call"  # a function the host put in env: it runs here
            elif not self._map(key, value, big, fds):
                try:
                    values[key] = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
                except Exception as exc:
                    self._unsent[key] = f"{type(exc).__name__}: {exc}"
                    continue
            self._sent[key] = value
        self._hosts.update(hosts)
        removed = [k for k in self._sent if k not in env]
        for key in removed:
            del self._sent[key]
            self._hosts.discard(key)
        return {
            "values": values,
            "mapped": big,
            "modules": modules,
            "hosts": hosts,
            "aliases": aliases,
            "removed": removed,
        }

    @staticmethod
    def _map(key: str, value: Any, big: dict[str, tuple[str, int]], fds: list[int]) -> bool:
        """Put a big ``str`` / ``bytes`` in a memory file for this step; False: pickle it instead."""
        if not (
            type(value) in (str, bytes)
            and len(value) >= mapped.MAPPED_MIN
            and len(fds) < mapped.MAX_MAPPED
            and mapped.available()
        ):
            return False
        try:
            fd, kind, size = mapped.write(value)
        except OSError:  # no memory file to be had (descriptors, memory): in-band as before
            return False
        fds.append(fd)
        big[key] = (kind, size)
        return True

    def _serve(
        self,
        channel: Channel,
        env: dict[str, Any],
        request: dict[str, Any],
        fds: list[int],
        timeout: float | None,
    ) -> replies.Done:
        """Send the step, answer host calls until it is done; kill the worker when time is up.

        The step's time is what the parent spends waiting for the worker *and decoding what it
        sends* (a host function's own run, a sub-call waiting for a model, is not charged);
        the parent's CPU for decoding is held to ``Limits.cpu_seconds`` as well, so a worker
        flooding it with host calls meets the deadline like any other step. The worker may die
        between the liveness check and the send (a kill from outside): a broken pipe then reads
        like any other death. The memory files are closed here as soon as they are sent.
        """
        try:
            seq = self._send(channel, request, fds)
        except OSError as exc:
            raise _WorkerDied(self._texts.crashed(self._death(exc))) from None
        finally:
            mapped.close_all(fds)
        limit = self.config.timeout
        budget = limit + KILL_GRACE
        if timeout is not None and timeout < limit:
            limit = budget = timeout
        cpu_left = self.config.limits.cpu_seconds or math.inf
        while True:
            started, cpu_started = time.monotonic(), time.thread_time()
            deadline = None if math.isinf(budget) else started + budget
            try:
                reply = replies.parse(channel.recv(deadline), ("call", "done"), seq)
                call = (
                    replies.call_arguments(reply, self._limits()) if isinstance(reply, replies.Call) else None
                )
            except ChannelTimeout:
                raise _WorkerDied(self._texts.timeout(limit, "", restarted=True), REPLTimeoutError) from None
            except MessageTooLarge as exc:
                raise _WorkerDied(self._texts.reply_too_large(exc.size, exc.limit)) from None
            except (wire.WireError, replies.WorkerFault) as exc:
                raise self._fault(exc) from None
            except (ChannelClosed, OSError) as exc:
                raise _WorkerDied(self._texts.crashed(self._death(exc))) from None
            budget -= time.monotonic() - started
            cpu_left -= time.thread_time() - cpu_started
            if budget <= 0 or cpu_left <= 0:
                raise _WorkerDied(self._texts.timeout(limit, "", restarted=True), REPLTimeoutError)
            if isinstance(reply, replies.Done):
                return reply
            assert isinstance(reply, replies.Call) and call is not None
            answer = self._host_call(env, reply.name, call)
            try:
                channel.send(answer)
            except OSError as exc:
                raise _WorkerDied(self._texts.crashed(self._death(exc))) from None

    def _fault(self, exc: wire.WireError | replies.WorkerFault) -> _WorkerDied:
        return _WorkerDied(self._texts.worker_fault(exc.what), REPLWorkerFaultError, exc.limit)

    def _death(self, exc: BaseException) -> str:
        handle = self._worker[0]
        status = handle.exit_description() if handle is not None else ""  # e.g. "signal SIGSEGV"
        return f"the REPL worker process died{f' ({status})' if status else ''}"

    def _host_call(
        self, env: dict[str, Any], name: str, call: tuple[list[Any], dict[str, Any]]
    ) -> dict[str, Any]:
        fn = env.get(name)
        if name not in self._hosts or not callable(fn) or isinstance(fn, (type, WorkerObject)):
            return {"op": "raise", "error": NameError(f"name {name!r} is not defined", name=name)}
        args, kwargs = call
        try:
            if isinstance(fn, HostCall) and fn.kind != "call" and not kwargs:
                replies.check_prepared(fn.kind, fn.__name__, args, self.config.limits.answer_chars)
                result = fn.prepared(*args)  # FINAL / FINAL_VAR: prepared in the worker
            else:
                result = fn(*args, **kwargs)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:
            safe = sanitized(exc)
            try:
                pickle.dumps(safe, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception:
                safe = RuntimeError(f"{type(exc).__name__}: {exc}")
            return {"op": "raise", "error": safe}
        try:
            pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:
            return {"op": "raise", "error": REPLError(Texts.unsendable_result(name, result))}
        return {"op": "return", "value": result}

    def _finish(self, reply: replies.Done, env: dict[str, Any], op: str) -> str:
        try:
            decoded = self._decode_values(reply)
        except (wire.WireError, replies.WorkerFault) as exc:
            died = self._fault(exc)
            text = died.text + self._lost(env)
            self._drop()
            raise died.error(text) from None
        self.last_checked = reply.checked
        self.last_changed = frozenset([*reply.removed, *reply.aliases, *reply.values])
        aliased = {key: self._sent.get(origin) for key, origin in reply.aliases.items()}
        for key in reply.removed:
            env.pop(key, None)
            self._sent.pop(key, None)
            self._held.discard(key)
        for key, value in aliased.items():  # the host's own text, bound to one more name
            if type(value) not in (str, bytes):
                value = WorkerObject(key, "str")  # no such text was sent: say nothing more
                self._held.add(key)
            else:
                self._held.discard(key)
            env[key] = value
            self._sent[key] = value
        for key, (value, kept) in decoded.items():
            env[key] = value
            self._sent[key] = value
            if kept:
                self._held.add(key)
            else:
                self._held.discard(key)
        unsent = {**self._notes, **self._unsent, **reply.unloadable}
        self._notes = {}
        note = "".join(
            f"\nNote: variable {key!r} could not be passed into the REPL worker process ({why}); "
            "the code does not see it"
            for key, why in sorted(unsent.items())
        )
        try:
            return (
                replies.step_text(
                    reply.result, op, self.config.max_output_chars, self.config.limits.answer_chars
                )
                + note
            )
        except REPLError as exc:
            raise type(exc)(str(exc) + note, failure=exc.failure) from None

    def _decode_values(self, reply: replies.Done) -> dict[str, tuple[Any, bool]]:
        """Every changed variable's value (a :class:`WorkerObject` for what stayed in the
        worker), decoded before any of them touches ``env``: one message, one item count."""
        decoder = wire.Decoder(self._limits())
        values: dict[str, tuple[Any, bool]] = {}
        for key, changed in reply.values.items():
            if changed.kept and not changed.data:  # stays in the worker (too big, or not plain data)
                values[key] = WorkerObject(key, changed.type_name), True
            else:
                values[key] = decoder.decode(changed.data, functools.partial(WorkerObject, key)), changed.kept
        return values

    def _lost(self, env: dict[str, Any]) -> str:
        """Drop the variables a killed worker took with it (whole or in part); the notice naming them."""
        lost = sorted(k for k in self._held if k in env)
        for key in lost:
            del env[key]
        self._held.clear()
        return self._texts.lost_variables(lost)


def _prewarm(start_method: str) -> None:
    """Start this process's fork server now, in the background, if it is not running yet.

    A runner is made before its first step: ``RLM`` makes one when it starts a run, before its
    first model call, so the fork server's ~50 ms start (a fresh interpreter importing the
    sandbox) overlaps that call instead of delaying the first step. Any failure here is left for
    the first step to report.
    """
    from .spawn import prewarm

    try:
        prewarm(start_method)
    except (OSError, _errors.ConfigurationError):
        pass


def _release(box: list[Any]) -> None:
    handle, box[0] = box[0], None
    if handle is not None:
        handle.close()


def _abandon(box: list[Any]) -> None:
    """A runner dropped without close: hang up on the worker, leave the kill to its handle.

    This can run inside any allocation, in any thread, through the cyclic garbage collector,
    even while that thread holds the fork server's lock mid-request; so it must not wait for
    the fork server. A worker leaves by itself when its channel closes, and the dropped
    handle hands its reaping (the kill, the directory) to the reaper thread of :mod:`.spawn`.
    """
    handle, box[0] = box[0], None
    if handle is not None:
        handle.sock.close()


_NOTHING = object()
