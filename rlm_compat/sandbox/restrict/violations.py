"""Exceptions the sandbox raises inside sandboxed code.

Each policy refusal is both a :class:`~rlm_compat.errors.REPLSecurityError` (so ``execute``
reports it as one) and the built-in type code would expect (``AttributeError`` for a refused
attribute, ``ImportError`` for a refused import...), so ``getattr(x, name, default)`` and
``except ImportError`` keep working inside the sandbox.
"""

from __future__ import annotations

from ...errors import REPLSecurityError

__all__ = [
    "ForbiddenAttributeError",
    "ForbiddenImportError",
    "ForbiddenWriteError",
    "MemorySignal",
    "ResourceLimitError",
    "SandboxFileError",
    "SandboxKeyboardInterrupt",
    "SandboxViolation",
    "TimeoutSignal",
]


class SandboxViolation(REPLSecurityError):
    """Base of the refusals; ``display_name`` is what the model reads in the error text."""

    display_name = "SecurityError"


class ForbiddenAttributeError(SandboxViolation, AttributeError):
    """An attribute (or module member) the policy does not expose."""

    display_name = "AttributeError"


class ForbiddenImportError(SandboxViolation, ImportError):
    """An import outside the module allowlist."""

    display_name = "ImportError"


class ForbiddenWriteError(SandboxViolation, TypeError):
    """An assignment to an object the sandbox must not modify (modules, classes, functions...)."""

    display_name = "TypeError"


class SandboxFileError(SandboxViolation, FileNotFoundError):
    """``open()``: no file system is reachable (caught as ``OSError`` / ``FileNotFoundError``)."""

    display_name = "FileNotFoundError"


class ResourceLimitError(MemoryError):
    """A ``**`` / ``<<`` / ``*`` whose result would exceed the sandbox's size bound."""


class TimeoutSignal(BaseException):
    """Injected into the executing thread at the deadline; not catchable as ``Exception``."""


class MemorySignal(TimeoutSignal):
    """Injected when the process grew past the execution's memory allowance."""


class SandboxKeyboardInterrupt(KeyboardInterrupt):
    """The ``KeyboardInterrupt`` sandboxed code sees: raising it is the model's doing, never a
    real Ctrl-C, so a step reports it as an error instead of letting it reach the caller."""


SandboxKeyboardInterrupt.__module__ = SandboxFileError.__module__ = "builtins"
SandboxFileError.__name__ = SandboxFileError.__qualname__ = "FileNotFoundError"
SandboxKeyboardInterrupt.__name__ = SandboxKeyboardInterrupt.__qualname__ = "KeyboardInterrupt"
