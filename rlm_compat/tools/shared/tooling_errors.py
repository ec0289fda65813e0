"""The tooling's own errors, apart from the library's.

Deliberately not :class:`rlm_compat.errors.RLMError`: a program that runs RLMs and writes
``except RLMError`` must not catch a conformance fixture that fails to load, a view whose input is
missing or a research grid that cannot start. The CLI catches both roots and maps each to its exit
code (:mod:`.cli`, :mod:`.run_cli`).
"""

from __future__ import annotations

__all__ = ["ToolError", "ToolUsageError"]


class ToolError(Exception):
    """Base of every error the tooling (``rlm_compat.tools``) raises on purpose."""


class ToolUsageError(ToolError, ValueError):
    """A tool was given something it cannot use: a bad argument or option, a missing or malformed
    input file, an unknown suite, policy or implementation. The message says what to pass instead.

    A ValueError too, as the library's ``ConfigurationError`` it replaces in the tooling was.
    """
