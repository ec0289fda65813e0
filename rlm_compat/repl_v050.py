"""``rlm.repl`` as recursive-llm 0.5.0 code imports it (under the alias with the 0.5 API preset).

The same executor as :mod:`rlm_compat.repl`, constructed with 0.5.0's arguments:
``REPLExecutor(timeout=5, max_output_chars=2000, max_snapshot_bytes=1_000_000,
resource_limits=None)``, the 0.5 preset selected (``SHOW_VARS()``, the ``answer`` dict). The
error classes are rlm_compat's own, so ``except`` clauses catch the same objects either way.

0.5.0's ``rlm.repl`` also defines private helpers (``_worker_main``, ``_apply_resource_limits``,
``_extract_code``, ``_is_picklable``) that its own tests import at module level. They exist here
only so that importing works; each one refuses to run with a :class:`~rlm_compat.errors.ConfigurationError`
naming what to use instead, and the tests exercising them are listed out of scope
(``rlm_compat/dropin_out_of_scope.toml``).
"""

from __future__ import annotations

from typing import Any

from .compat import ApiSemantics
from .config import Limits, ReplConfig, WorkerResourceLimits
from .errors import ConfigurationError, REPLError, REPLTimeoutError, UnsupportedOptionError
from .repl import REPLExecutor as _Executor

try:
    import resource as _resource_module
except ImportError:  # pragma: no cover - Windows
    _resource_module = None  # type: ignore[assignment]

__all__ = ["REPLError", "REPLExecutor", "REPLTimeoutError", "WorkerResourceLimits"]

_resource: Any = _resource_module
"""The ``resource`` module where it exists (0.5.0's name; rlm_compat's worker limits use it)."""

DEFAULT_SNAPSHOT_BYTES = 1_000_000


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
    ) -> None:
        """``resource_limits`` replace the matching :class:`~rlm_compat.config.Limits`; limits it
        leaves unset keep rlm_compat's defaults. ``max_snapshot_bytes``: only the default is
        accepted (rlm_compat copies every plain-data variable back; ``Limits.reply_bytes`` caps a
        step's reply as a whole)."""
        if isinstance(max_output_chars, int) and max_output_chars <= 0:
            raise ConfigurationError("max_output_chars must be greater than zero")
        if max_snapshot_bytes != DEFAULT_SNAPSHOT_BYTES:
            raise UnsupportedOptionError(
                "max_snapshot_bytes is recursive-llm 0.5.0's cap on state copied back per step; "
                "rlm_compat keeps every plain-data variable in env and bounds a step's reply with "
                "limits=Limits(reply_bytes=...) instead"
            )
        if resource_limits is not None and not isinstance(resource_limits, WorkerResourceLimits):
            raise UnsupportedOptionError(
                f"resource_limits must be a WorkerResourceLimits, not {type(resource_limits).__name__}"
            )
        limits = Limits() if resource_limits is None else resource_limits.to_limits()
        if config is None:
            config = ReplConfig(timeout=timeout, max_output_chars=max_output_chars, limits=limits)
        super().__init__(config=config, api="0.5" if api is None else api)
        self.max_snapshot_bytes = max_snapshot_bytes
        self.resource_limits = resource_limits or WorkerResourceLimits()

    def execute(self, code: str, env: dict[str, Any], *, timeout: float | None = None) -> str:
        """As :meth:`rlm_compat.repl.REPLExecutor.execute`; a timeout's text starts as 0.5.0's
        (``Execution timed out after N seconds``), followed by rlm_compat's detail."""
        try:
            return super().execute(code, env, timeout=timeout)
        except REPLTimeoutError as exc:
            seconds = self.timeout if timeout is None else min(self.timeout, timeout)
            raise REPLTimeoutError(f"Execution timed out after {seconds:g} seconds. {exc}") from None


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
