"""The guards of classes: ``type()``, ``super()`` and the metaclass of every sandboxed ``class``.

A sandboxed class is built only from allowed names, on bases that are neither metaclasses nor
guard classes, and recorded so its objects are writable; ``type(x)`` never hands out a real
metaclass and ``super()`` never reaches past a host class.
"""

from __future__ import annotations

import builtins
import types
from typing import Any

from .names import CLASS_DUNDERS, private_name_allowed
from .registry import OPAQUE_BASES, SANDBOX_CLASSES, proxy_types, register_opaque
from .violations import ForbiddenAttributeError, ForbiddenWriteError

__all__ = ["SafeType", "check_bases", "reveal", "safe_super", "sandbox_metaclass"]


def _checked_super(*args: Any) -> Any:
    if len(args) != 2:
        raise TypeError("super() in the sandbox works inside methods, or as super(Class, obj)")
    cls, obj = args
    if cls not in SANDBOX_CLASSES:
        raise ForbiddenAttributeError("super() needs a class defined in the sandbox")
    return builtins.super(cls, obj)


class _SuperMeta(type):
    """Makes :class:`safe_super` answer ``super(...)`` and ``isinstance(x, super)`` like ``super``."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if kwargs:
            raise TypeError("super() takes no keyword arguments")
        return _checked_super(*args)

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, builtins.super)

    def __subclasscheck__(cls, sub: Any) -> bool:
        return issubclass(sub, builtins.super)

    def __repr__(cls) -> str:
        return "<class 'super'>"


class safe_super(metaclass=_SuperMeta):
    """``super`` for sandboxed classes only (never past a host class that guards by overriding).

    The compiler turns ``super()`` inside a method into ``super(__class__, self)``. A class
    (shown as ``<class 'super'>``) that is never instantiated: calling it returns a real
    ``super`` object.
    """


class _TypeMeta(type):
    """Makes :class:`SafeType` answer ``type(x)`` and ``isinstance(x, type)`` like ``type``."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs:
            return reveal(builtins.type(args[0]))
        if len(args) == 3 and not kwargs:
            return _type_new(*args)
        raise TypeError("type() takes 1 or 3 arguments")

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, builtins.type)

    def __subclasscheck__(cls, sub: Any) -> bool:
        return issubclass(sub, builtins.type)

    def __repr__(cls) -> str:
        return "<class 'type'>"


class SafeType(metaclass=_TypeMeta):
    """The sandbox's ``type``: never a real metaclass.

    ``type(name, bases, dict)`` builds a class only from plain names (a ``__str__`` or
    ``__getattr__`` key could run sandboxed code wherever the host touches the object);
    ``type(type)`` would hand the real power back, so metaclasses come back as this class.
    """


def reveal(t: type) -> type:
    """``type(x)`` as sandboxed code sees it: metaclasses, ``super`` and module views disguised."""
    if issubclass(t, builtins.type):
        return SafeType
    if t is builtins.super:
        return safe_super
    if issubclass(t, proxy_types()):
        return types.ModuleType
    return t


def _type_new(name: Any, bases: Any, ns: Any) -> type:
    if type(name) is not str or type(bases) is not tuple or type(ns) is not dict:
        raise TypeError("type(name, bases, dict) needs a str, a tuple and a dict")
    refused = sorted(
        repr(k)
        for k in ns
        if not isinstance(k, str)
        or (k.startswith("_") and k not in CLASS_DUNDERS and not private_name_allowed(k))
    )
    if refused:
        raise ForbiddenAttributeError(
            f"type(): these class attribute names are not allowed in the sandbox: {', '.join(refused)}"
        )
    ns = dict(ns)
    ns["__module__"] = "builtins"  # as when 2fb46cc's code calls type(): shown as <class 'X'>
    return sandbox_metaclass(name, bases, ns)


def check_bases(bases: tuple[Any, ...]) -> None:
    """Refuse bases a sandboxed class may not have: non-classes, metaclasses, guard classes."""
    for base in bases:
        if not isinstance(base, builtins.type):
            raise TypeError(f"cannot subclass {base!r}: it is not a class")
        if issubclass(base, builtins.type) or base in OPAQUE_BASES:
            raise ForbiddenWriteError(f"cannot subclass {base.__name__!r} in the sandbox")


def sandbox_metaclass(name: str, bases: tuple[Any, ...], ns: dict[str, Any], **kw: Any) -> type:
    """``__metaclass__``: every sandboxed ``class`` statement builds its class here."""
    check_bases(bases)
    cls = builtins.type(name, bases, ns, **kw)
    SANDBOX_CLASSES.add(cls)
    return cls


register_opaque(SafeType)
register_opaque(safe_super)
