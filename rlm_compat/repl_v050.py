"""``rlm.repl`` as recursive-llm 0.5.0 code imports it (under the alias with the 0.5 API preset).

A re-export: the executor is 0.5.0's release behaviour and lives in
:mod:`rlm_compat._releases.r050.executor`. Only the names users and 0.5.0's tests import are here.

0.5.0's ``rlm.repl`` also defines private helpers (``_worker_main``, ``_apply_resource_limits``,
``_extract_code``, ``_is_picklable``) that its own tests import at module level. They exist here
only so that importing works; each one refuses to run with an
:class:`~rlm_compat.errors.UnsupportedOptionError` naming what to use instead, and the tests
exercising them are listed out of scope (``rlm_compat/tools/dropin_out_of_scope.toml``).
"""

from __future__ import annotations

from typing import Any

from ._releases.r050.executor import DEFAULT_SNAPSHOT_BYTES, REPLExecutor, check_snapshot_bytes
from .config import WorkerResourceLimits
from .errors import REPLError, REPLTimeoutError, UnsupportedOptionError

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
