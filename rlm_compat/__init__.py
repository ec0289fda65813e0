"""rlm_compat: a drop-in, conformance-tested reimplementation of ysz/recursive-llm.

Public API only; everything else lives in submodules. Importing this package is fast and offline:
litellm is imported on the first model call, and its remote cost-map fetch is switched off.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._lazy import ensure_offline_litellm
from .errors import (
    BudgetExceededError,
    ConfigurationError,
    FinalVarMissingError,
    LLMCallError,
    MaxDepthError,
    MaxIterationsError,
    ProviderResponseError,
    REPLError,
    REPLSecurityError,
    REPLTimeoutError,
    RLMError,
    UnknownOptionWarning,
    UnsupportedOptionError,
)
from .profiles import Profile
from .repl import REPLExecutor
from .sandbox import Limits, ReplConfig, WorkerResourceLimits

if TYPE_CHECKING:
    from .core import RLM
    from .events import TrajectoryEvent
    from .record import CompletionResult, FailedCompletionResult, RunBudget, RunResult

ensure_offline_litellm()

_LAZY = {
    "RLM": "core",
    "CompletionResult": "record",
    "FailedCompletionResult": "record",
    "RunBudget": "record",
    "RunResult": "record",
    "TrajectoryEvent": "events",
}


def __getattr__(name: str) -> Any:
    """The loop and the run record load on first use: a REPL worker imports this package but neither.

    recursive-llm 0.5.0's submodules whose rlm_compat names differ (``budget``, ``stats``,
    ``results``: :data:`rlm_compat.dropin.MODULE_RENAMES`) are attributes too, so ``import rlm``
    then ``rlm.budget.RunBudget`` works under the alias as it does in 0.5.0.
    """
    import importlib

    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    from .dropin import MODULE_RENAMES

    if name in MODULE_RENAMES:
        return importlib.import_module(f".{MODULE_RENAMES[name]}", __name__)
    raise AttributeError(f"module 'rlm_compat' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names, ``RLM`` included before its first use (as ``from rlm import *`` sees)."""
    return sorted(set(globals()) | set(__all__))


__version__ = "0.1.0"

__all__ = [
    "RLM",
    "BudgetExceededError",
    "CompletionResult",
    "ConfigurationError",
    "FailedCompletionResult",
    "FinalVarMissingError",
    "LLMCallError",
    "Limits",
    "MaxDepthError",
    "MaxIterationsError",
    "Profile",
    "ProviderResponseError",
    "REPLError",
    "REPLExecutor",
    "REPLSecurityError",
    "REPLTimeoutError",
    "RLMError",
    "ReplConfig",
    "RunBudget",
    "RunResult",
    "TrajectoryEvent",
    "UnknownOptionWarning",
    "UnsupportedOptionError",
    "WorkerResourceLimits",
    "__version__",
]
