"""The guards of attribute reads: by name (``obj.x``, ``getattr``, ``hasattr``, ``dir``, ``vars``)
and by template (``str.format``'s ``{0.x}``).

A read the compiler already vetted sees modules through their proxy; a name known only at run
time passes :func:`~.names.refuse_name`; a ``_name`` is answered as Python would only where it
cannot lead out (:func:`special_getattr`). ``str.format`` lives here because a template is an
attribute walk: its fields go through the same :func:`checked_getattr`.
"""

from __future__ import annotations

import _string  # type: ignore[import-not-found]
import builtins
import functools
import string
import types
from collections.abc import Callable
from typing import Any

from .classes import reveal
from .context import LOCAL, Session, own_state
from .names import (
    BLOCKED_ATTRIBUTES,
    INFO_DUNDERS,
    OPERATOR_DUNDERS,
    OWN_DUNDERS,
    refuse_name,
)
from .registry import SANDBOX_CLASSES, module_view, proxy_types
from .violations import ForbiddenAttributeError

__all__ = [
    "GuardedFormatter",
    "checked_getattr",
    "getattr_format_or_none",
    "getattr_or_none",
    "guarded_getattr",
    "guarded_getattr_format",
    "pattern_values",
    "refuse_str_format",
    "safe_dir",
    "safe_getattr",
    "safe_hasattr",
    "safe_vars",
    "session_dir",
    "special_getattr",
    "upstream_hasattr",
]

_Module = types.ModuleType


def guarded_getattr(obj: Any, name: str) -> Any:
    """``obj.name`` for a name the compiler already vetted: modules seen through their proxy."""
    if type(obj) is _Module:
        obj = module_view(obj)
    value = getattr(obj, name)
    if type(value) is _Module:
        return module_view(value)
    return value


def getattr_or_none(obj: Any, name: str) -> Any:
    """RestrictedPython's ``safer_getattr`` default: a missing attribute reads as None."""
    if type(obj) is _Module:
        obj = module_view(obj)
    value = getattr(obj, name, None)
    if type(value) is _Module:
        return module_view(value)
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
    refuse_name(name)
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
            obj = module_view(obj)
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
        obj = module_view(obj)
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
        obj = module_view(obj)
    if isinstance(obj, proxy_types()):
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


def _sandbox_defined(cls: type, name: str) -> bool:
    """Whether ``name`` is found on ``cls`` in a class sandboxed code created."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass in SANDBOX_CLASSES
    return False


def _own(obj: Any, name: str) -> bool:
    """Whether ``obj.name`` is something sandboxed code defined on its own object or class."""
    if isinstance(obj, builtins.type):
        return obj in SANDBOX_CLASSES and _sandbox_defined(obj, name)
    cls = builtins.type(obj)
    if cls not in SANDBOX_CLASSES:
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
    if start not in SANDBOX_CLASSES:
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
        own = target in SANDBOX_CLASSES if name == "__new__" else type(target) in SANDBOX_CLASSES
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
    :data:`~.names.REFUSED_DUNDERS` (and any special name not listed) is refused.
    """
    if type(obj) is _Module:
        obj = module_view(obj)
    dunder = name.startswith("__") and name.endswith("__") and len(name) > 4
    if not dunder:
        if _own(obj, name) or (name in _NAMEDTUPLE_API and _is_namedtuple(obj)):
            return getattr(obj, name)
        raise ForbiddenAttributeError(
            f'"{name}" is an invalid attribute name because it starts with "_" '
            "(private names work only on objects of classes defined in the sandbox)"
        )
    if name == "__class__":
        return reveal(builtins.type(obj))
    if name in INFO_DUNDERS or name in OPERATOR_DUNDERS:
        value = getattr(obj, name)
        if type(value) is _Module:
            return module_view(value)
        return value
    if name == "__dict__":
        if builtins.type(obj) in SANDBOX_CLASSES:
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


def pattern_values(*values: Any) -> Any:
    """The dotted names of one ``match`` statement's patterns, read through the guards first."""
    return types.SimpleNamespace(**{f"v{i}": v for i, v in enumerate(values)})
