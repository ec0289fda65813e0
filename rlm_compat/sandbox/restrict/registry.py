"""What the guards must know of the sandbox modules above them, told at those modules' import.

The guards sit below every other restriction module, so they import none of them: how a raw
module is shown (:func:`register_module_proxies`, by :mod:`.modules`), which host classes
sandboxed code may hold but never subclass (:func:`register_opaque`), and the classes sandboxed
``class`` statements created (:func:`sandbox_classes`) are kept here, in one place.
"""

from __future__ import annotations

import types
import weakref
from collections.abc import Callable
from typing import Any

from .violations import ForbiddenAttributeError

__all__ = [
    "OPAQUE_BASES",
    "SANDBOX_CLASSES",
    "module_view",
    "proxy_types",
    "register_module_proxies",
    "register_opaque",
    "sandbox_classes",
]

SANDBOX_CLASSES: weakref.WeakSet[type] = weakref.WeakSet()
"""Classes created by sandboxed ``class`` statements (their objects are writable)."""

OPAQUE_BASES: set[type] = set()
"""Host classes sandboxed code may hold but never subclass."""


def _no_module_view(module: types.ModuleType) -> Any:
    raise ForbiddenAttributeError("modules are not available in the sandbox")


_view: Callable[[types.ModuleType], Any] = _no_module_view
_proxy_types: tuple[type, ...] = ()


def register_module_proxies(view: Callable[[types.ModuleType], Any], *types_: type) -> None:
    """How sandboxed code sees a raw module (``view``), and the classes of those views.

    Told by :mod:`.modules` at its import (the proxies are built with
    :class:`~.attributes.GuardedFormatter`); until then a raw module is refused outright.
    """
    global _view, _proxy_types
    _view = view
    _proxy_types = (*_proxy_types, *types_)
    OPAQUE_BASES.update(types_)


def module_view(module: types.ModuleType) -> Any:
    """A raw module as sandboxed code sees it (its proxy, or a refusal)."""
    return _view(module)


def proxy_types() -> tuple[type, ...]:
    """The classes of module views (shown as ``module``; never writable, never subclassed)."""
    return _proxy_types


def register_opaque(cls: type) -> None:
    """Mark a host class sandboxed code may hold but never subclass."""
    OPAQUE_BASES.add(cls)


def sandbox_classes() -> weakref.WeakSet[type]:
    """Classes created by sandboxed ``class`` statements (their objects are writable)."""
    return SANDBOX_CLASSES
