"""rlm_compat: a drop-in, conformance-tested reimplementation of ysz/recursive-llm.

Public API only; everything else lives in submodules. Importing this package is fast and offline:
litellm is imported on the first model call, and its remote cost-map fetch is switched off.
"""

from __future__ import annotations

from ._lazy import ensure_offline_litellm
from .config import Limits, ReplConfig
from .core import RLM
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
)
from .profiles import Profile
from .repl import REPLExecutor

ensure_offline_litellm()

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
    "__version__",
]
