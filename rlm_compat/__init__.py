"""rlm_compat: a drop-in, conformance-tested reimplementation of ysz/recursive-llm.

Public API only; everything else lives in submodules. Importing this package is fast and offline:
litellm is imported on the first model call, and its remote cost-map fetch is switched off.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._lazy import ensure_offline_litellm
from .config import Limits, ReplConfig, WorkerResourceLimits
from .errors import (
    ConfigurationError,
    FinalVarMissingError,
    LLMCallError,
    MaxDepthError,
    MaxIterationsError,
    REPLError,
    REPLSecurityError,
    REPLTimeoutError,
    RLMError,
    UnknownOptionWarning,
    UnsupportedOptionError,
)
from .profiles import Profile
from .repl import REPLExecutor

if TYPE_CHECKING:
    from .core import RLM

ensure_offline_litellm()


def __getattr__(name: str) -> Any:
    """``RLM`` is imported on first use: a REPL worker imports this package but never the loop."""
    if name == "RLM":
        from .core import RLM

        return RLM
    raise AttributeError(f"module 'rlm_compat' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names, ``RLM`` included before its first use (as ``from rlm import *`` sees)."""
    return sorted(set(globals()) | set(__all__))


__version__ = "0.1.0"

__all__ = [
    "RLM",
    "ConfigurationError",
    "FinalVarMissingError",
    "LLMCallError",
    "Limits",
    "MaxDepthError",
    "MaxIterationsError",
    "Profile",
    "REPLError",
    "REPLExecutor",
    "REPLSecurityError",
    "REPLTimeoutError",
    "RLMError",
    "ReplConfig",
    "UnknownOptionWarning",
    "UnsupportedOptionError",
    "WorkerResourceLimits",
    "__version__",
]
