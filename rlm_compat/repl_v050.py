"""``rlm.repl`` as recursive-llm 0.5.0 code imports it: its ``REPLExecutor`` and that executor's snapshot.

Users reach it under the alias with the 0.5 API preset (``rlm.repl``). It sits above
:mod:`rlm_compat.repl`, whose executor it subclasses; the release's data it shares with the RLM's
options (the snapshot cap's default and check) is :mod:`rlm_compat._releases.r050`'s.

The same executor as :mod:`rlm_compat.repl`, constructed with 0.5.0's arguments:
``REPLExecutor(timeout=5, max_output_chars=2000, max_snapshot_bytes=1_000_000,
resource_limits=None)``, the 0.5 preset selected (``SHOW_VARS()``, the ``answer`` dict). The
error classes are rlm_compat's own, so ``except`` clauses catch the same objects either way.

``max_snapshot_bytes`` keeps 0.5.0's meaning for the caller's ``env``: after each step it gets
the session's plain-data variables smallest first (by pickled size) up to that many bytes; the
others stay in the session — later steps, ``SHOW_VARS()`` and :meth:`REPLExecutor.get_variable`
see them — but not in ``env``. Unlike 0.5.0 the host still holds them (rlm_compat copies every
changed plain-data variable back; the cap decides what the caller sees, not what crosses), and
unlike 0.5.0 a step does not re-pickle every variable to size the snapshot: with a worker, only
the ones the step changed (the worker says which) are sized again.

0.5.0's ``rlm.repl`` also defines private helpers (``_worker_main``, ``_apply_resource_limits``,
``_extract_code``, ``_is_picklable``) that its own tests import at module level. They exist here
only so that importing works; each one refuses to run with an
:class:`~rlm_compat.errors.UnsupportedOptionError` naming what to use instead, and the tests
exercising them are listed out of scope (``rlm_compat/tools/dropin_out_of_scope.toml``).
"""

from __future__ import annotations

import pickle
from types import ModuleType
from typing import Any

from ._releases.contract import ApiSemantics
from ._releases.r050 import DEFAULT_SNAPSHOT_BYTES, check_snapshot_bytes
from .errors import ConfigurationError, REPLError, REPLTimeoutError, UnsupportedOptionError
from .repl import REPLExecutor as _Executor
from .repl import is_host_function, lives_in_worker
from .sandbox import Limits, ReplConfig, WorkerResourceLimits

try:
    import resource as _resource_module
except ImportError:  # pragma: no cover - Windows
    _resource_module = None  # type: ignore[assignment]

__all__ = [
    "DEFAULT_SNAPSHOT_BYTES",
    "REPLError",
    "REPLExecutor",
    "REPLTimeoutError",
    "WorkerResourceLimits",
    "check_snapshot_bytes",
]

_NOT_SNAPSHOT = frozenset({"context", "query", "answer", "SHOW_VARS"})
"""Names 0.5.0 never copies back (its runtime's own)."""


class REPLExecutor(_Executor):
    """rlm_compat's executor behind recursive-llm 0.5.0's constructor."""

    def __init__(
        self,
        timeout: float = 5,
        max_output_chars: int = 2000,
        max_snapshot_bytes: int = DEFAULT_SNAPSHOT_BYTES,
        resource_limits: WorkerResourceLimits | None = None,
        *,
        config: ReplConfig | None = None,
        api: str | ApiSemantics | None = None,
        state: str = "env",
    ) -> None:
        """``resource_limits`` replace the matching :class:`~rlm_compat.config.Limits`; limits it
        leaves unset keep rlm_compat's defaults. ``max_snapshot_bytes``: how much of the session's
        plain data the caller's ``env`` gets back after a step (see the module's docstring).
        ``state``: as :class:`rlm_compat.repl.REPLExecutor`'s (the RLM loop, which 0.5.0's tests
        patch with a subclass of this class, asks for ``"worker"``)."""
        if isinstance(max_output_chars, int) and max_output_chars <= 0:
            raise ConfigurationError("max_output_chars must be greater than zero")
        check_snapshot_bytes("max_snapshot_bytes", max_snapshot_bytes)
        if resource_limits is not None and not isinstance(resource_limits, WorkerResourceLimits):
            raise UnsupportedOptionError(
                f"resource_limits must be a WorkerResourceLimits, not {type(resource_limits).__name__}"
            )
        limits = Limits() if resource_limits is None else resource_limits.to_limits()
        if config is None:
            config = ReplConfig(timeout=timeout, max_output_chars=max_output_chars, limits=limits)
        super().__init__(config=config, api="0.5" if api is None else api, state=state)
        self.max_snapshot_bytes = max_snapshot_bytes
        self._withheld: dict[str, Any] = {}
        self._sizes: dict[str, tuple[Any, int]] = {}
        self.resource_limits = resource_limits or WorkerResourceLimits()

    def execute(self, code: str, env: dict[str, Any], *, timeout: float | None = None) -> str:
        """As :meth:`rlm_compat.repl.REPLExecutor.execute`; a timeout's text starts as 0.5.0's
        (``Execution timed out after N seconds``), followed by rlm_compat's detail. Afterwards
        ``env`` holds the snapshot ``max_snapshot_bytes`` allows, whether the step failed or not."""
        withheld = self._withheld
        if isinstance(env, dict):
            for name, value in withheld.items():
                env.setdefault(name, value)  # the caller's own value for a name wins
        withheld.clear()
        try:
            return super().execute(code, env, timeout=timeout)
        except REPLTimeoutError as exc:
            seconds = self.timeout if timeout is None else min(self.timeout, timeout)
            raise REPLTimeoutError(f"Execution timed out after {seconds:g} seconds. {exc}") from None
        finally:
            if isinstance(env, dict):
                self._withhold(env)

    def render(self, env: dict[str, Any], name: str) -> str:
        """As :meth:`rlm_compat.repl.REPLExecutor.render`; a withheld variable renders too."""
        if name not in env and name in self._withheld:
            env[name] = self._withheld.pop(name)
            try:
                return super().render(env, name)
            finally:
                self._withhold(env)
        return super().render(env, name)

    def get_variable(self, name: str, *, timeout: float | None = None) -> tuple[bool, Any]:
        """As :meth:`rlm_compat.repl.REPLExecutor.get_variable`, withheld variables included."""
        found = super().get_variable(name, timeout=timeout)
        if not found[0] and name in self._withheld:
            return True, self._withheld[name]
        return found

    def close(self) -> None:
        """As :meth:`rlm_compat.repl.REPLExecutor.close`: the withheld variables go with the worker."""
        self._withheld.clear()
        super().close()

    def _withhold(self, env: dict[str, Any]) -> None:
        """Take out of ``env`` what does not fit in ``max_snapshot_bytes``, smallest values first
        (0.5.0's order: by pickled size, then name); keep them for the session."""
        sizes: list[tuple[int, str]] = []
        for name, value in env.items():
            if not self._snapshot_candidate(name, value):
                continue
            size = self._pickled_size(name, value)
            if size is not None:
                sizes.append((size, name))
        used = 0
        for size, name in sorted(sizes):
            if used + size > self.max_snapshot_bytes:
                self._withheld[name] = env.pop(name)
            else:
                used += size
        kept = env.keys() | self._withheld.keys()  # a withheld text keeps its size for the next step
        self._sizes = {name: size for name, size in self._sizes.items() if name in kept}

    @staticmethod
    def _snapshot_candidate(name: Any, value: Any) -> bool:
        return (
            isinstance(name, str)
            and not name.startswith("_")
            and name not in _NOT_SNAPSHOT
            and not isinstance(value, ModuleType)
            and not is_host_function(value)
            and not lives_in_worker(value)
        )

    def _pickled_size(self, name: str, value: Any) -> int | None:
        """The value's pickled size; remembered for texts, which cannot change in place, and, with
        a worker, for any value the last step did not change (the worker says which it did), so
        sizing the snapshot costs what the step changed, not what the session holds."""
        cached = self._sizes.get(name)
        if cached is not None and cached[0] is value:
            changed = getattr(self._runner, "last_changed", None)
            if type(value) in (str, bytes) or (changed is not None and name not in changed):
                return cached[1]
        try:
            size = len(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
        except Exception:  # not plain data: 0.5.0 leaves it out of the snapshot too
            return None
        self._sizes[name] = (value, size)
        return size


_resource: Any = _resource_module
"""The ``resource`` module where it exists (0.5.0's name; rlm_compat's worker limits use it)."""


def _internal(name: str, instead: str) -> Any:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise UnsupportedOptionError(
            f"rlm.repl.{name} is a private helper of recursive-llm 0.5.0's own worker, which "
            f"rlm_compat does not reproduce; use {instead}"
        )

    refuse.__name__ = refuse.__qualname__ = name
    return refuse


_worker_main = _internal("_worker_main", "REPLExecutor (its workers start by themselves)")
_apply_resource_limits = _internal("_apply_resource_limits", "REPLExecutor(resource_limits=...)")
_extract_code = _internal("_extract_code", "REPLExecutor.execute, which handles fenced code itself")
_is_picklable = _internal("_is_picklable", "pickle.dumps")
