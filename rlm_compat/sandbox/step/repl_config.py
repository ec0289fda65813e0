"""One frozen configuration for the REPL, passed whole from RLM to executor to runner to worker.

In the spirit of httpx's ``Timeout`` / ``Limits`` and attrs' ``evolve``: every knob that decides how
model code runs lives in :class:`ReplConfig` (and its :class:`Limits`), built and validated once;
children copy it, the worker receives it in one versioned message. ``replace(...)`` makes a
changed copy.

Environment variables fill what the caller left unset: ``RLM_COMPAT_PROFILE`` (see
:mod:`rlm_compat.profiles`), ``RLM_COMPAT_ISOLATION`` (``inline`` / ``process``) and
``RLM_COMPAT_WORKER_START`` (``forkserver`` / ``spawn``).
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any, TypeVar

from ...errors import ConfigurationError
from ...profiles import Profile, resolve_profile

__all__ = [
    "CONTEXT_ROOM",
    "CONTEXT_SECONDS_PER_GB",
    "HOST_TEXT_MIN",
    "ISOLATIONS",
    "ISOLATION_ENV",
    "START_METHODS",
    "START_METHOD_ENV",
    "Limits",
    "ReplConfig",
    "WorkerResourceLimits",
    "host_text_bytes",
]

CONTEXT_ROOM = 8
"""Memory a step gets per byte of text the host sent (the context), beyond ``Limits.memory_mb``.

Python objects are big next to the text they hold: splitting a log into its lines of ~90
characters takes about 1.6 times the text, into lines of ~30 about 3 times, into words about 10
times (a ``str`` object of ~50 bytes plus a pointer per piece). So the default limits follow
the context, in a worker and inline alike, instead of failing on a big context where plain
Python succeeds; a runaway allocation is still stopped (the allowance is finite, and one huge
request fails at once)."""
HOST_TEXT_MIN = 1 << 20
"""Only texts at least this long count as the context for :data:`CONTEXT_ROOM` (inline)."""


def host_text_bytes(env: dict[str, object]) -> int:
    """Bytes of the big ``str`` / ``bytes`` values in ``env`` (what the inline guard adds room for)."""
    total = 0
    for value in env.values():
        if type(value) in (str, bytes) and len(value) >= HOST_TEXT_MIN:  # type: ignore[arg-type]
            total += len(value)  # type: ignore[arg-type]
    return total


ISOLATIONS = ("inline", "process")
START_METHODS = ("forkserver", "spawn")
ISOLATION_ENV = "RLM_COMPAT_ISOLATION"
START_METHOD_ENV = "RLM_COMPAT_WORKER_START"


def _check_count(name: str, value: Any, *, allow_zero: bool = False) -> None:
    if value is None:
        return
    low = 0 if allow_zero else 1
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        kind = "non-negative" if allow_zero else "positive"
        raise ConfigurationError(f"{name} must be a {kind} integer or None, not {value!r}")


@dataclasses.dataclass(frozen=True)
class Limits:
    """Resource limits of one REPL session; ``None`` switches one off.

    ``memory_mb``: what model code may allocate. In a worker it is the address-space allowance
    above the worker's start size and the data the host sent it (a single huge allocation fails
    at once with MemoryError); inline, a step whose process grows by more than this is stopped.
    ``cpu_seconds``: CPU time per step in a worker (a backstop when ``timeout`` is None).
    ``open_files``: the worker's file-descriptor limit. ``file_size_bytes``: the largest file
    the worker may write (0: none). ``reply_bytes``: the most the parent reads back from a worker
    for one step (a bigger reply kills the worker with a clear error). ``answer_chars``: the
    longest final answer ``FINAL`` / ``FINAL_VAR`` may produce.
    """

    memory_mb: int | None = 1024
    cpu_seconds: int | None = 60
    open_files: int | None = 64
    file_size_bytes: int | None = 0
    reply_bytes: int | None = 256 << 20
    answer_chars: int | None = 1_000_000

    def __post_init__(self) -> None:
        for name in ("memory_mb", "cpu_seconds", "open_files", "reply_bytes", "answer_chars"):
            _check_count(name, getattr(self, name))
        _check_count("file_size_bytes", self.file_size_bytes, allow_zero=True)
        if self.open_files is not None and self.open_files < 16:
            raise ConfigurationError(
                f"open_files must be at least 16 (the worker needs a few itself), not {self.open_files}"
            )

    def replace(self, **changes: Any) -> Limits:
        """A copy with some limits changed (validated)."""
        return _replace(self, changes)

    @classmethod
    def none(cls) -> Limits:
        """Every limit off (trusted code only)."""
        return cls(None, None, None, None, None, None)


@dataclasses.dataclass(frozen=True)
class WorkerResourceLimits:
    """recursive-llm 0.5.0's worker limits, accepted as they are and turned into :class:`Limits`.

    0.5.0 sets no limit unless asked (``None`` everywhere); here the limits that 0.5.0 leaves
    unset keep rlm_compat's defaults (:meth:`to_limits`), because model code is untrusted.
    """

    memory_mb: int | None = None
    cpu_time_seconds: int | None = None
    max_open_files: int | None = None

    def __post_init__(self) -> None:
        for name in ("memory_mb", "cpu_time_seconds", "max_open_files"):
            _check_count(name, getattr(self, name))
        if self.max_open_files is not None and self.max_open_files < 16:
            raise ConfigurationError(
                f"max_open_files must be at least 16 (the worker needs some), not {self.max_open_files}"
            )

    @property
    def configured(self) -> bool:
        """Whether any limit was given."""
        return any(v is not None for v in (self.memory_mb, self.cpu_time_seconds, self.max_open_files))

    def to_limits(self, base: Limits | None = None) -> Limits:
        """``base`` (default :class:`Limits`) with each given limit replacing its counterpart."""
        changes = {
            key: value
            for key, value in (
                ("memory_mb", self.memory_mb),
                ("cpu_seconds", self.cpu_time_seconds),
                ("open_files", self.max_open_files),
            )
            if value is not None
        }
        return (base or Limits()).replace(**changes)


CONTEXT_SECONDS_PER_GB = 30.0
"""Profile ``fixed``'s default step timeout grows by this many seconds per 10^9 characters of
the node's context (5 s + 30 s per GB: 35 s at 1 GB). A pass over a 1 GB context (``split``, a
comprehension over its lines, ``re.findall``) takes 1-7 s on a loaded 2-core machine, inline or
in a worker; upstream's fixed 5 s failed such runs for being big, not for being wrong."""


@dataclasses.dataclass(frozen=True)
class ReplConfig:
    """How model code runs: profile, per-step timeout, output cap, isolation, limits.

    ``isolation``: ``"process"`` runs each session in a killable, hardened worker process (the
    default of both presets); ``"inline"`` in the calling thread (the default of a profile with
    ``inline_by_default`` on). ``None`` means ``$RLM_COMPAT_ISOLATION`` or
    the profile's default; the stored value is always resolved. ``start_method``: how workers
    start — ``"forkserver"`` (a pre-warmed template process forks them; Linux and other POSIX
    systems with ``fork``) or ``"spawn"`` (a fresh interpreter each; slower, works everywhere).
    ``None`` means ``$RLM_COMPAT_WORKER_START`` or the fastest one available.
    """

    profile: Profile = dataclasses.field(default_factory=Profile.fixed)
    timeout: float = 5.0
    max_output_chars: int = 2000
    isolation: str | None = None
    limits: Limits = dataclasses.field(default_factory=Limits)
    start_method: str | None = None
    strip_output: bool = False
    """Strip the whole output of surrounding whitespace before it is cut and counted
    (recursive-llm 0.5.0's observation); False: 2fb46cc's, the raw output is cut and counted."""
    timeout_per_gb: float = 0.0
    """Seconds added to ``timeout`` per 10^9 characters of a session's context (see
    :meth:`for_context`); 0: ``timeout`` whatever the context. The RLM sets
    :data:`CONTEXT_SECONDS_PER_GB` in profile ``fixed`` when no timeout is given."""

    def __post_init__(self) -> None:
        profile: Any = self.profile  # a name is accepted too
        object.__setattr__(self, "profile", resolve_profile(profile))
        timeout = math.inf if self.timeout is None else self.timeout
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, (int, float))
            or math.isnan(timeout)
            or timeout <= 0
        ):
            raise ConfigurationError(
                f"timeout must be a positive number of seconds (or None for none), not {timeout!r}"
            )
        object.__setattr__(self, "timeout", float(timeout))
        chars = self.max_output_chars
        if isinstance(chars, bool) or not isinstance(chars, int) or chars < 0:
            raise ConfigurationError(f"max_output_chars must be a non-negative integer, not {chars!r}")
        if not isinstance(self.limits, Limits):
            raise ConfigurationError(f"limits must be a rlm_compat.Limits, not {type(self.limits).__name__}")
        isolation = self.isolation
        if isolation is None:
            isolation = os.environ.get(ISOLATION_ENV) or (
                "inline" if self.profile.inline_by_default else "process"
            )
        if isolation not in ISOLATIONS:
            raise ConfigurationError(f"isolation must be one of {list(ISOLATIONS)}, not {isolation!r}")
        object.__setattr__(self, "isolation", isolation)
        start = self.start_method
        if start is None:
            start = os.environ.get(START_METHOD_ENV) or ("forkserver" if hasattr(os, "fork") else "spawn")
        if start not in START_METHODS:
            raise ConfigurationError(f"start_method must be one of {list(START_METHODS)}, not {start!r}")
        if start == "forkserver" and not hasattr(os, "fork"):
            raise ConfigurationError("start_method 'forkserver' needs os.fork; use 'spawn'")
        object.__setattr__(self, "start_method", start)
        if not isinstance(self.strip_output, bool):
            raise ConfigurationError(f"strip_output must be True or False, not {self.strip_output!r}")
        per_gb = self.timeout_per_gb
        if isinstance(per_gb, bool) or not isinstance(per_gb, (int, float)) or not 0 <= per_gb < math.inf:
            raise ConfigurationError(f"timeout_per_gb must be a finite number >= 0, not {per_gb!r}")
        object.__setattr__(self, "timeout_per_gb", float(per_gb))

    def timeout_for(self, context_chars: int) -> float:
        """The step timeout of a session whose context has ``context_chars`` characters:
        ``timeout + timeout_per_gb * chars / 10^9``, to a tenth of a second (so a small context
        keeps ``timeout`` exactly)."""
        if not self.timeout_per_gb or math.isinf(self.timeout):
            return self.timeout
        return round(self.timeout + self.timeout_per_gb * context_chars / 1e9, 1)

    def for_context(self, context_chars: int) -> ReplConfig:
        """This configuration with the timeout :meth:`timeout_for` gives, fixed from then on."""
        if not self.timeout_per_gb:
            return self
        return dataclasses.replace(self, timeout=self.timeout_for(context_chars), timeout_per_gb=0.0)

    def replace(self, **changes: Any) -> ReplConfig:
        """A copy with some fields changed (validated); ``profile`` may be a name."""
        return _replace(self, changes)

    @property
    def in_process(self) -> bool:
        """Whether sessions run in a worker process."""
        return self.isolation == "process"


_C = TypeVar("_C", Limits, ReplConfig)


def _replace(obj: _C, changes: dict[str, Any]) -> _C:
    known = {f.name for f in dataclasses.fields(obj)}
    unknown = sorted(set(changes) - known)
    if unknown:
        raise ConfigurationError(f"unknown {type(obj).__name__} field(s) {unknown}; known: {sorted(known)}")
    return dataclasses.replace(obj, **changes)
