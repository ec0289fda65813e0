"""Where users import the REPL's configuration from: :class:`ReplConfig` and its :class:`Limits`.

The classes live in the sandbox (:mod:`rlm_compat.sandbox.step.repl_config`), the package they
configure, so the library has one home for the sandbox's configuration and one for the RLM's
options (:mod:`rlm_compat.settings`); this module keeps the public path ``rlm_compat.config``.
"""

from __future__ import annotations

from .sandbox import (
    CONTEXT_SECONDS_PER_GB,
    ISOLATION_ENV,
    ISOLATIONS,
    START_METHOD_ENV,
    START_METHODS,
    Limits,
    ReplConfig,
    WorkerResourceLimits,
)

__all__ = [
    "CONTEXT_SECONDS_PER_GB",
    "ISOLATIONS",
    "ISOLATION_ENV",
    "START_METHODS",
    "START_METHOD_ENV",
    "Limits",
    "ReplConfig",
    "WorkerResourceLimits",
]
