"""The names the sandbox judges, shared by the compiler and the runtime guards: data and two checks.

Which attribute names are refused outright, which special names only compute, which only code
of the sandbox's own classes may read, and which ``_names`` sandboxed code may bind. The
compile-time side (:mod:`.transformer`) and the runtime guards (:mod:`.attributes`,
:mod:`.classes`, :mod:`.writes`) read the same tables, so the two halves cannot drift.
"""

from __future__ import annotations

from typing import Any

from RestrictedPython.transformer import INSPECT_ATTRIBUTES

from .violations import ForbiddenAttributeError

__all__ = [
    "BLOCKED_ATTRIBUTES",
    "CLASS_DUNDERS",
    "INFO_DUNDERS",
    "OPERATOR_DUNDERS",
    "OWN_DUNDERS",
    "REFUSED_DUNDERS",
    "private_name_allowed",
    "refuse_name",
]

BLOCKED_ATTRIBUTES: frozenset[str] = frozenset(INSPECT_ATTRIBUTES | {"mro"})
"""Attribute names refused beyond the ``_`` prefix: frames, code, tracebacks, and ``mro()``
(which would hand out base classes, e.g. the unguarded ``string.Formatter``)."""


def refuse_name(name: Any) -> None:
    """Refuse an attribute name no guard hands out: not a str, ``_``-prefixed, or inspection."""
    if type(name) is not str:
        raise TypeError(f"attribute name must be a string, not {type(name).__name__}")
    if name.startswith("_") and name != "_":
        raise ForbiddenAttributeError(f'"{name}" is an invalid attribute name because it starts with "_"')
    if name in BLOCKED_ATTRIBUTES:
        raise ForbiddenAttributeError(f'"{name}" is a restricted name in the sandbox')


INFO_DUNDERS = frozenset({"__name__", "__qualname__", "__doc__", "__module__"})
"""Plain descriptive strings every object may show (``type(x).__name__``, ``f.__doc__``)."""

OPERATOR_DUNDERS = frozenset(
    {
        "__len__", "__iter__", "__next__", "__reversed__", "__contains__", "__getitem__",
        "__missing__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__hash__",
        "__bool__", "__str__", "__repr__", "__format__", "__call__", "__add__", "__radd__",
        "__sub__", "__rsub__", "__truediv__", "__rtruediv__", "__floordiv__", "__rfloordiv__",
        "__mod__", "__rmod__", "__divmod__", "__rdivmod__", "__neg__", "__pos__", "__abs__",
        "__invert__", "__and__", "__rand__", "__or__", "__ror__", "__xor__", "__rxor__",
        "__rshift__", "__rrshift__", "__index__", "__int__", "__float__", "__complex__",
        "__round__", "__trunc__", "__floor__", "__ceil__", "__matmul__", "__rmatmul__",
        "__length_hint__", "__sizeof__", "__fspath__",
    }
)  # fmt: skip
"""Special methods that only compute (what an operator or builtin call would run anyway)."""

OWN_DUNDERS = frozenset(
    {
        "__init__", "__new__", "__post_init__", "__init_subclass__", "__set_name__",
        "__setitem__", "__delitem__", "__enter__", "__exit__", "__mul__", "__rmul__",
        "__pow__", "__rpow__", "__lshift__", "__rlshift__", "__iadd__", "__isub__",
        "__imul__", "__itruediv__", "__ifloordiv__", "__imod__", "__ipow__", "__ilshift__",
        "__irshift__", "__iand__", "__ior__", "__ixor__", "__imatmul__", "__class_getitem__",
        "__get__", "__set__", "__delete__", "__aenter__", "__aexit__", "__copy__",
        "__deepcopy__", "__replace__", "__match_args__", "__slots__", "__dataclass_fields__",
        "__dataclass_params__", "__annotations__", "__wrapped__",
    }
)  # fmt: skip
"""Special names readable only where sandboxed code defined them (they mutate, build objects or
grow numbers past the size guards when found on a host type: ``int.__pow__``)."""

REFUSED_DUNDERS = frozenset(
    {
        "__getattribute__",
        "__getattr__",
        "__setattr__",
        "__delattr__",
        "__del__",
        "__reduce__",
        "__reduce_ex__",
        "__getstate__",
        "__setstate__",
        "__getnewargs__",
        "__getnewargs_ex__",
        "__subclasses__",
        "__subclasshook__",
        "__globals__",
        "__code__",
        "__closure__",
        "__builtins__",
        "__import__",
        "__build_class__",
        "__loader__",
        "__spec__",
        "__file__",
        "__cached__",
        "__path__",
        "__self__",
        "__func__",
        "__base__",
        "__bases__",
        "__mro__",
        "__mro_entries__",
        "__prepare__",
        "__instancecheck__",
        "__subclasscheck__",
        "__weakref__",
        "__traceback__",
        "__context__",
        "__cause__",
        "__defaults__",
        "__kwdefaults__",
        "__objclass__",
        "__metaclass__",
        "__dir__",
    }
)
"""Special names that lead out of the sandbox (classes of every object, function globals and
code, host frames, guard bypasses such as ``object.__setattr__``): refused on every object."""


CLASS_DUNDERS = OPERATOR_DUNDERS | OWN_DUNDERS | {"__doc__", "__qualname__"}
"""Special names a sandboxed class may define (in its body or in ``type(name, bases, dict)``)."""


def private_name_allowed(name: str) -> bool:
    """A ``_name`` sandboxed code may bind: not one of the guards' own (``_getattr_``, ``_print``,
    ``_rlm...``: they end with ``_`` or are spelled so), never a special ``__name__``."""
    if name.startswith("__") and name.endswith("__"):
        return False
    return not (name.endswith("_") or name == "_print" or name.startswith("_rlm"))
