"""The runtime guards sandboxed code calls, one small named function per concern.

Attribute reads, ``str.format``, writes, ``type()`` and classes, integer and repetition sizes,
``iter``: what the rewritten code of :mod:`.prep` calls and what :mod:`.policy` places in the
builtins mapping. This module sits below every other sandbox module that needs a guard, so it
imports none of them: what it must know of a higher one is told at that module's import
(:func:`register_module_proxies` by :mod:`.modules`, :func:`register_opaque` by host classes).
"""

from __future__ import annotations

import _string  # type: ignore[import-not-found]
import builtins
import collections
import functools
import math
import operator
import string
import types
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from RestrictedPython.transformer import INSPECT_ATTRIBUTES

from .context import LOCAL, Session, own_state
from .violations import ForbiddenAttributeError, ForbiddenWriteError, ResourceLimitError

__all__ = [
    "BLOCKED_ATTRIBUTES",
    "CLASS_DUNDERS",
    "MAX_INT_BITS",
    "MAX_SEQUENCE_ITEMS",
    "OPERATOR_DUNDERS",
    "OWN_DUNDERS",
    "REFUSED_DUNDERS",
    "GuardedFormatter",
    "SafeType",
    "check_bases",
    "checked_getattr",
    "private_name_allowed",
    "register_module_proxies",
    "register_opaque",
    "register_writable",
    "sandbox_classes",
    "special_getattr",
    "write_guard",
]

_Module = types.ModuleType

BLOCKED_ATTRIBUTES: frozenset[str] = frozenset(INSPECT_ATTRIBUTES | {"mro"})
"""Attribute names refused beyond the ``_`` prefix: frames, code, tracebacks, and ``mro()``
(which would hand out base classes, e.g. the unguarded ``string.Formatter``)."""

MAX_INT_BITS = 1 << 20
"""Largest integer result (in bits, about 315,000 digits) ``**`` / ``<<`` / ``*`` may build; one
multiplication at this size is still a few milliseconds of C time."""

MAX_SEQUENCE_ITEMS = 1 << 26
"""Largest ``str`` / ``list`` / ... repetition result (items) ``*`` may build."""


# --- modules, as modules.py shows them ------------------------------------------------------


def _no_module_view(module: types.ModuleType) -> Any:
    raise ForbiddenAttributeError("modules are not available in the sandbox")


_proxy_for_module: Callable[[types.ModuleType], Any] = _no_module_view
_PROXY_TYPES: tuple[type, ...] = ()


def register_module_proxies(view: Callable[[types.ModuleType], Any], *proxy_types: type) -> None:
    """How sandboxed code sees a raw module (``view``), and the classes of those views.

    Told by :mod:`.modules` at its import, since the proxies are built with
    :class:`GuardedFormatter` from here; until then a raw module is refused outright.
    """
    global _proxy_for_module, _PROXY_TYPES
    _proxy_for_module = view
    _PROXY_TYPES = (*_PROXY_TYPES, *proxy_types)
    _OPAQUE_BASES.update(proxy_types)


# --- attribute reading ----------------------------------------------------------------------


def _refuse_name(name: Any) -> None:
    if type(name) is not str:
        raise TypeError(f"attribute name must be a string, not {type(name).__name__}")
    if name.startswith("_") and name != "_":
        raise ForbiddenAttributeError(f'"{name}" is an invalid attribute name because it starts with "_"')
    if name in BLOCKED_ATTRIBUTES:
        raise ForbiddenAttributeError(f'"{name}" is a restricted name in the sandbox')


def guarded_getattr(obj: Any, name: str) -> Any:
    """``obj.name`` for a name the compiler already vetted: modules seen through their proxy."""
    if type(obj) is _Module:
        obj = _proxy_for_module(obj)
    value = getattr(obj, name)
    if type(value) is _Module:
        return _proxy_for_module(value)
    return value


def getattr_or_none(obj: Any, name: str) -> Any:
    """RestrictedPython's ``safer_getattr`` default: a missing attribute reads as None."""
    if type(obj) is _Module:
        obj = _proxy_for_module(obj)
    value = getattr(obj, name, None)
    if type(value) is _Module:
        return _proxy_for_module(value)
    return value


def _format_method(obj: Any, name: str) -> Any:
    """``str.format`` / ``format_map`` routed through :class:`GuardedFormatter`, else None."""
    if isinstance(obj, str):
        return functools.partial(_FORMAT_BOUND[name], obj)
    if isinstance(obj, type) and issubclass(obj, str):
        return _FORMAT_BOUND[name]
    return None


def guarded_getattr_format(obj: Any, name: str) -> Any:
    """``obj.format`` / ``obj.format_map``: strings get the guarded formatter."""
    method = _format_method(obj, name)
    return method if method is not None else guarded_getattr(obj, name)


def getattr_format_or_none(obj: Any, name: str) -> Any:
    method = _format_method(obj, name)
    return method if method is not None else getattr_or_none(obj, name)


def refuse_str_format(obj: Any, name: str) -> Any:
    """2fb46cc's rule: ``str.format`` is refused as ``safer_getattr`` refuses it."""
    if isinstance(obj, str) or (isinstance(obj, type) and issubclass(obj, str)):
        raise NotImplementedError("Using the format*() methods of `str` is not safe")
    return getattr_or_none(obj, name)


def checked_getattr(obj: Any, name: Any) -> Any:
    """``getattr`` with a name known only at run time (builtin ``getattr``, format fields)."""
    if type(name) is str and name.startswith("_") and name != "_":
        return special_getattr(obj, name)
    _refuse_name(name)
    if name in _FORMAT_BOUND:
        return guarded_getattr_format(obj, name)
    return guarded_getattr(obj, name)


_MISSING = object()


def safe_getattr(obj: Any, name: Any, default: Any = _MISSING) -> Any:
    """The sandbox's ``getattr(obj, name[, default])``."""
    try:
        return checked_getattr(obj, name)
    except AttributeError:
        if default is _MISSING:
            raise
        return default


def _two_args(args: tuple[Any, ...]) -> tuple[Any, Any]:
    if len(args) != 2:
        raise TypeError(f"hasattr expected 2 arguments, got {len(args)}")
    return args[0], args[1]


def safe_hasattr(*args: Any) -> bool:
    """The sandbox's ``hasattr``: Python's answer, without handing anything out.

    ``hasattr(data, '__len__')`` is how model code asks "is this sized"; the answer is a bool,
    so any name is answered as Python would (an object's own ``__getattr__`` may run, as in
    Python). Modules answer for their proxy.
    """
    obj, name = _two_args(args)
    if type(name) is str and name.startswith("_"):
        if type(obj) is _Module:
            obj = _proxy_for_module(obj)
        return builtins.hasattr(obj, name)
    try:
        checked_getattr(obj, name)
    except AttributeError:
        return False
    return True


def upstream_hasattr(*args: Any) -> bool:
    """2fb46cc's plain ``hasattr`` (it only answers a bool), with modules seen via their proxy."""
    obj, name = _two_args(args)
    if type(obj) is _Module:
        obj = _proxy_for_module(obj)
    return builtins.hasattr(obj, name)


def safe_vars(*args: Any) -> Any:
    """``vars(obj)``: the ``__dict__`` of objects the sandbox made (refused for host objects)."""
    if len(args) != 1:
        raise TypeError("vars() in the sandbox takes exactly one argument (use dir() for names)")
    return special_getattr(args[0], "__dict__")


def safe_dir(*args: Any) -> list[str]:
    """``dir(obj)`` without private names; ``dir()`` lists the session's variables."""
    if not args:
        state = LOCAL.state
        env = state.env if state is not None else {}
        return sorted(k for k in env if isinstance(k, str) and not k.startswith("_"))
    (obj,) = args
    if type(obj) is _Module:
        obj = _proxy_for_module(obj)
    if isinstance(obj, _PROXY_TYPES):
        return builtins.dir(obj)
    return [n for n in builtins.dir(obj) if n not in BLOCKED_ATTRIBUTES]


def session_dir(session: Session) -> Callable[..., list[str]]:
    """``dir`` for ``session``'s code: ``dir()`` lists its own step's variables, else nothing."""

    def dir_(*args: Any) -> list[str]:
        if args:
            return safe_dir(*args)
        state = own_state(session)
        env = state.env if state is not None else {}
        return sorted(k for k in env if isinstance(k, str) and not k.startswith("_"))

    dir_.__name__ = dir_.__qualname__ = "dir"
    return dir_


# --- names starting with "_" ---------------------------------------------------------------

_INFO_DUNDERS = frozenset({"__name__", "__qualname__", "__doc__", "__module__"})
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


def _sandbox_defined(cls: type, name: str) -> bool:
    """Whether ``name`` is found on ``cls`` in a class sandboxed code created."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass in _sandbox_classes
    return False


def _own(obj: Any, name: str) -> bool:
    """Whether ``obj.name`` is something sandboxed code defined on its own object or class."""
    if isinstance(obj, builtins.type):
        return obj in _sandbox_classes and _sandbox_defined(obj, name)
    cls = builtins.type(obj)
    if cls not in _sandbox_classes:
        return isinstance(obj, builtins.super) and _super_own(obj, name)
    own = getattr(obj, "__dict__", None)
    if type(own) is dict and name in own:
        return True
    return _sandbox_defined(cls, name)


_NAMEDTUPLE_API = frozenset({"_replace", "_asdict", "_fields", "_field_defaults", "_make"})
"""A namedtuple's public API: underscored only so as not to clash with field names."""


def _is_namedtuple(obj: Any) -> bool:
    """A namedtuple class or instance (a tuple subclass whose ``_fields`` is a tuple of str)."""
    cls = obj if isinstance(obj, builtins.type) else builtins.type(obj)
    if not issubclass(cls, tuple) or cls is tuple:
        return False
    fields = getattr(cls, "_fields", None)
    return type(fields) is tuple and all(type(f) is str for f in fields)


def _super_own(obj: builtins.super, name: str) -> bool:
    """``super().name`` inside a sandboxed class: bound to its own instance (``__init__``...)."""
    start = getattr(obj, "__thisclass__", None)
    if start not in _sandbox_classes:
        return False
    return name in OWN_DUNDERS and name not in {"__wrapped__", "__annotations__"}


_ON_OWN_OBJECTS = frozenset({"__init__", "__new__", "__setattr__", "__delattr__"})


def _on_own_objects(method: Any, name: str) -> Callable[..., Any]:
    """``Base.__init__(self, ...)`` / ``object.__setattr__(self, k, v)`` for a host ``Base``.

    The usual spelling of a base-class call in a sandboxed class (an exception's
    ``Exception.__init__(self, msg)``, a frozen dataclass's ``object.__setattr__``): applied
    to an object (for ``__new__``: a class) sandboxed code created it works, on anything else
    it is refused, and ``__setattr__`` / ``__delattr__`` still take no special names.
    """

    def on_own(target: Any, *args: Any, **kwargs: Any) -> Any:
        own = target in _sandbox_classes if name == "__new__" else type(target) in _sandbox_classes
        if not own:
            raise ForbiddenAttributeError(
                f"{name} of a built-in class applies only to classes and objects defined in the sandbox"
            )
        if name in ("__setattr__", "__delattr__") and args:
            key = args[0]
            if type(key) is not str or (key.startswith("__") and key.endswith("__")):
                raise ForbiddenAttributeError(f"{name} cannot set special names in the sandbox")
        return method(target, *args, **kwargs)

    on_own.__name__ = on_own.__qualname__ = name
    return on_own


def special_getattr(obj: Any, name: str) -> Any:
    """``obj._x`` / ``obj.__x__``: the reads that cannot lead out, as Python answers them.

    Descriptive dunders (``__name__``, ``__doc__``...) and computing special methods are read on
    any object; ``__class__`` is ``type(obj)`` as the sandbox shows it; ``__dict__``, single
    underscore names and mutating specials only where sandboxed code defined them (its own
    instances and classes, ``super()`` in its own methods). Everything in
    :data:`REFUSED_DUNDERS` (and any special name not listed) is refused.
    """
    if type(obj) is _Module:
        obj = _proxy_for_module(obj)
    dunder = name.startswith("__") and name.endswith("__") and len(name) > 4
    if not dunder:
        if _own(obj, name) or (name in _NAMEDTUPLE_API and _is_namedtuple(obj)):
            return getattr(obj, name)
        raise ForbiddenAttributeError(
            f'"{name}" is an invalid attribute name because it starts with "_" '
            "(private names work only on objects of classes defined in the sandbox)"
        )
    if name == "__class__":
        return _reveal(builtins.type(obj))
    if name in _INFO_DUNDERS or name in OPERATOR_DUNDERS:
        value = getattr(obj, name)
        if type(value) is _Module:
            return _proxy_for_module(value)
        return value
    if name == "__dict__":
        if builtins.type(obj) in _sandbox_classes:
            return obj.__dict__
    elif name in OWN_DUNDERS and _own(obj, name):
        return getattr(obj, name)
    elif name in _ON_OWN_OBJECTS and isinstance(obj, builtins.type):
        return _on_own_objects(getattr(obj, name), name)
    if name in OWN_DUNDERS or name == "__dict__":
        raise ForbiddenAttributeError(
            f'"{name}" is readable only on classes and objects defined in the sandbox'
        )
    raise ForbiddenAttributeError(f'"{name}" is a restricted name in the sandbox')


# --- str.format -----------------------------------------------------------------------------


class GuardedFormatter(string.Formatter):
    """``string.Formatter`` whose field lookups (``{0.attr}``, ``{0[key]}``) pass the guards.

    ``'{0.__class__}'.format(x)`` is the classic escape from template sandboxes
    (CVE-2023-41039 in RestrictedPython): attribute walks here go through
    :func:`checked_getattr` like any attribute in sandboxed code.
    """

    def get_field(self, field_name: str, args: Any, kwargs: Any) -> Any:
        first, rest = _string.formatter_field_name_split(field_name)
        obj = self.get_value(first, args, kwargs)
        for is_attr, key in rest:
            obj = checked_getattr(obj, key) if is_attr else obj[key]
        return obj, first


_FORMATTER = GuardedFormatter()


def _needs_guard(template: str) -> bool:
    """Whether a template walks attributes/items or nests fields (else native format is safe)."""
    try:
        for _, field, spec, _ in _string.formatter_parser(template):
            if field is not None and ("." in field or "[" in field):
                return True
            if spec and "{" in spec:
                return True
    except ValueError:
        return False  # malformed: let str.format raise its own error
    return False


def _safe_format(template: str, /, *args: Any, **kwargs: Any) -> str:
    if not isinstance(template, str):
        raise TypeError("format() needs a str template")
    if _needs_guard(template):
        return _FORMATTER.vformat(template, args, kwargs)
    return str.format(template, *args, **kwargs)


def _safe_format_map(template: str, mapping: Any, /) -> str:
    if not isinstance(template, str):
        raise TypeError("format_map() needs a str template")
    if _needs_guard(template):
        return _FORMATTER.vformat(template, (), mapping)
    return str.format_map(template, mapping)


_FORMAT_BOUND: dict[str, Callable[..., str]] = {
    "format": _safe_format,
    "format_map": _safe_format_map,
}


# --- writes ---------------------------------------------------------------------------------

_sandbox_classes: weakref.WeakSet[type] = weakref.WeakSet()
_ITEM_WRITABLE = (dict, list, bytearray, collections.deque)


def _checked_super(*args: Any) -> Any:
    if len(args) != 2:
        raise TypeError("super() in the sandbox works inside methods, or as super(Class, obj)")
    cls, obj = args
    if cls not in _sandbox_classes:
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


def sandbox_classes() -> weakref.WeakSet[type]:
    """Classes created by sandboxed ``class`` statements (their objects are writable)."""
    return _sandbox_classes


_EXTRA_WRITABLE: dict[type, Callable[[Any], bool]] = {}


def register_writable(cls: type, check: Callable[[Any], bool]) -> None:
    """Objects of host class ``cls`` that sandboxed code may modify when ``check`` says so
    (a session's own ``decimal.Context``: never the module-wide templates)."""
    _EXTRA_WRITABLE[cls] = check


def write_guard(ob: Any) -> Any:
    """``_write_``: the object an assignment / ``del`` may modify, or a refusal.

    Writable: containers (dict, list, bytearray, deque and subclasses such as Counter) and the
    classes and instances sandboxed code created. Modules, host classes, functions and every
    other shared object are read-only.
    """
    t = type(ob)
    if t is dict or t is list or t in _sandbox_classes:
        return ob
    if isinstance(ob, type):
        if ob in _sandbox_classes:
            return ob
    elif isinstance(ob, _ITEM_WRITABLE):
        return ob
    if t is types.FunctionType and ob.__code__.co_filename.startswith("<rlm-repl-"):
        return ob  # a function sandboxed code defined: its attributes are its own
    check = _EXTRA_WRITABLE.get(t)
    if check is not None and check(ob):
        return ob
    kind = "module" if isinstance(ob, _PROXY_TYPES) else t.__name__
    raise ForbiddenWriteError(f"cannot modify {kind!r} objects in the sandbox")


def _refuse_write_name(obj: Any, name: Any) -> None:
    """Private names may be written on sandbox-made objects; special names never."""
    own = builtins.type(obj) in _sandbox_classes or (
        isinstance(obj, builtins.type) and obj in _sandbox_classes
    )
    if type(name) is str and name.startswith("_") and not name.startswith("__") and own:
        return
    _refuse_name(name)


def safe_setattr(obj: Any, name: Any, value: Any) -> None:
    """The sandbox's ``setattr``: same name rules as attribute writes, same write guard."""
    _refuse_write_name(obj, name)
    setattr(write_guard(obj), name, value)


def safe_delattr(obj: Any, name: Any) -> None:
    """The sandbox's ``delattr``."""
    _refuse_write_name(obj, name)
    delattr(write_guard(obj), name)


def pattern_values(*values: Any) -> Any:
    """The dotted names of one ``match`` statement's patterns, read through the guards first."""
    return types.SimpleNamespace(**{f"v{i}": v for i, v in enumerate(values)})


# --- classes and type() -----------------------------------------------------------------------


class _TypeMeta(type):
    """Makes :class:`SafeType` answer ``type(x)`` and ``isinstance(x, type)`` like ``type``."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs:
            return _reveal(builtins.type(args[0]))
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


def _reveal(t: type) -> type:
    if issubclass(t, builtins.type):
        return SafeType
    if t is builtins.super:
        return safe_super
    if issubclass(t, _PROXY_TYPES):
        return types.ModuleType
    return t


_OPAQUE_BASES: set[type] = {SafeType}


def register_opaque(cls: type) -> None:
    """Mark a host class sandboxed code may hold but never subclass."""
    _OPAQUE_BASES.add(cls)


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
        if issubclass(base, builtins.type) or base in _OPAQUE_BASES:
            raise ForbiddenWriteError(f"cannot subclass {base.__name__!r} in the sandbox")


def sandbox_metaclass(name: str, bases: tuple[Any, ...], ns: dict[str, Any], **kw: Any) -> type:
    """``__metaclass__``: every sandboxed ``class`` statement builds its class here."""
    check_bases(bases)
    cls = builtins.type(name, bases, ns, **kw)
    _sandbox_classes.add(cls)
    return cls


# --- size limits ----------------------------------------------------------------------------

try:
    iter(1, 2)  # type: ignore[call-overload]
except TypeError as _exc:  # this Python's own wording
    _ITER_NOT_CALLABLE = str(_exc)
_INTS = (int, bool)
_SEQUENCES = (str, bytes, bytearray, list, tuple)


def _too_big(what: str, size: float, limit: int) -> ResourceLimitError:
    return ResourceLimitError(
        f"refused: {what} would have about {int(size):,} {'bits' if what != 'repetition' else 'items'}"
        f" (sandbox limit {limit:,})"
    )


def guarded_pow(base: Any, exp: Any, *mod: Any) -> Any:
    """``**`` and ``pow()``: integer powers beyond :data:`MAX_INT_BITS` are refused first."""
    if not mod and type(base) in _INTS and type(exp) in _INTS and exp > 0 and abs(base) > 1:
        bits = exp * math.log2(abs(base))
        if bits > MAX_INT_BITS:
            raise _too_big("power", bits, MAX_INT_BITS)
    return pow(base, exp, *mod)


def guarded_lshift(a: Any, b: Any) -> Any:
    """``<<``: integer shifts beyond :data:`MAX_INT_BITS` are refused first."""
    if type(a) in _INTS and type(b) in _INTS and a and b > 0:
        bits = a.bit_length() + b
        if bits > MAX_INT_BITS:
            raise _too_big("shift", bits, MAX_INT_BITS)
    return operator.lshift(a, b)


def guarded_mul(a: Any, b: Any) -> Any:
    """``*`` (unless by a small number literal): huge repetitions and integers are refused first."""
    ta, tb = type(a), type(b)
    if ta is float or tb is float:
        return a * b
    if ta is int and tb is int:
        if a.bit_length() + b.bit_length() > MAX_INT_BITS:
            raise _too_big("product", a.bit_length() + b.bit_length(), MAX_INT_BITS)
        return a * b
    if ta in _INTS and isinstance(b, _SEQUENCES):
        count, seq = a, b
    elif tb in _INTS and isinstance(a, _SEQUENCES):
        count, seq = b, a
    else:
        if ta in _INTS and tb in _INTS:
            bits = a.bit_length() + b.bit_length()
            if bits > MAX_INT_BITS:
                raise _too_big("product", bits, MAX_INT_BITS)
        return a * b
    size = len(seq) * count
    if size > MAX_SEQUENCE_ITEMS:
        raise _too_big("repetition", size, MAX_SEQUENCE_ITEMS)
    return a * b


class callable_iterator:
    """``iter(fn, sentinel)`` stepping in Python, so a timeout can stop an endless one."""

    __slots__ = ("_done", "_fn", "_sentinel")
    __module__ = "builtins"  # shown as <class 'callable_iterator'>, like CPython's

    def __init__(self, fn: Any, sentinel: Any) -> None:
        self._fn = fn
        self._sentinel = sentinel
        self._done = False

    def __iter__(self) -> callable_iterator:
        return self

    def __next__(self) -> Any:
        if self._done:
            raise StopIteration
        value = self._fn()
        if value == self._sentinel:
            self._done = True
            raise StopIteration
        return value


def safe_iter(obj: Any, *sentinel: Any) -> Iterator[Any]:
    """``iter``; the two-argument form runs in Python so a timeout can stop an endless one."""
    if sentinel:
        if len(sentinel) > 1:
            raise TypeError(f"iter expected at most 2 arguments, got {1 + len(sentinel)}")
        if not callable(obj):
            raise TypeError(_ITER_NOT_CALLABLE)
        return callable_iterator(obj, sentinel[0])
    return iter(obj)


register_opaque(callable_iterator)
register_opaque(safe_super)
