"""Runtime guards and the builtins mapping, one small named function per concern.

The compile-time half (which names and syntax are refused, what is rewritten into a guard call)
lives in :mod:`.prep`; this module holds what the rewritten code calls. Everything is built once
per :class:`~rlm_compat.profiles.Profile` and shared by all executors using it: the mappings are
never reachable from sandboxed code, and per-execution state is found through
:data:`.context.LOCAL`. Each executor runs its code with :func:`session_builtins`, a thin copy
whose output, ``dir()``, ``random`` and generator guards are bound to its :class:`.Session`.
"""

from __future__ import annotations

import _string  # type: ignore[import-not-found]
import builtins
import collections
import datetime as _datetime
import functools
import math
import operator
import string
import types
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from RestrictedPython.Guards import (
    guarded_delattr,
    guarded_iter_unpack_sequence,
    guarded_setattr,
    guarded_unpack_sequence,
)
from RestrictedPython.transformer import INSPECT_ATTRIBUTES
from RestrictedPython.Utilities import reorder, same_type, test

from ..profiles import Profile
from .context import LOCAL, Session, own_state
from .modules import (
    ALLOWED_MODULES,
    SESSION_KEY,
    SESSION_RANDOM,
    ModuleProxy,
    SessionRandom,
    module_proxy,
    proxy_for_module,
    rp_string_proxy,
)
from .output import (
    print_collector_factory,
    sandbox_print,
    session_collector_factory,
    session_print,
    session_show,
    show,
)
from .violations import (
    ForbiddenAttributeError,
    ForbiddenImportError,
    ForbiddenWriteError,
    ResourceLimitError,
    SandboxKeyboardInterrupt,
)

__all__ = [
    "BLOCKED_ATTRIBUTES",
    "MAX_INT_BITS",
    "MAX_SEQUENCE_ITEMS",
    "GuardedFormatter",
    "SafeType",
    "builtins_for",
    "checked_getattr",
    "sandbox_classes",
    "session_builtins",
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


# --- attribute reading ----------------------------------------------------------------------


def _refuse_name(name: Any) -> None:
    if type(name) is not str:
        raise TypeError(f"attribute name must be a string, not {type(name).__name__}")
    if name.startswith("_"):
        raise ForbiddenAttributeError(
            f'"{name}" is an invalid attribute name because it starts with "_"'
        )
    if name in BLOCKED_ATTRIBUTES:
        raise ForbiddenAttributeError(f'"{name}" is a restricted name in the sandbox')


def guarded_getattr(obj: Any, name: str) -> Any:
    """``obj.name`` for a name the compiler already vetted: modules seen through their proxy."""
    if type(obj) is _Module:
        obj = proxy_for_module(obj)
    value = getattr(obj, name)
    if type(value) is _Module:
        return proxy_for_module(value)
    return value


def getattr_or_none(obj: Any, name: str) -> Any:
    """RestrictedPython's ``safer_getattr`` default: a missing attribute reads as None."""
    if type(obj) is _Module:
        obj = proxy_for_module(obj)
    value = getattr(obj, name, None)
    if type(value) is _Module:
        return proxy_for_module(value)
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
    """The sandbox's ``hasattr``: True only for what ``getattr`` would hand out."""
    obj, name = _two_args(args)
    try:
        checked_getattr(obj, name)
    except AttributeError:
        return False
    return True


def upstream_hasattr(*args: Any) -> bool:
    """2fb46cc's plain ``hasattr`` (it only answers a bool), with modules seen via their proxy."""
    obj, name = _two_args(args)
    if type(obj) is _Module:
        obj = proxy_for_module(obj)
    return builtins.hasattr(obj, name)


def safe_dir(*args: Any) -> list[str]:
    """``dir(obj)`` without private names; ``dir()`` lists the session's variables."""
    if not args:
        state = LOCAL.state
        env = state.env if state is not None else {}
        return sorted(k for k in env if isinstance(k, str) and not k.startswith("_"))
    (obj,) = args
    if type(obj) is _Module:
        obj = proxy_for_module(obj)
    return [n for n in builtins.dir(obj) if not n.startswith("_") and n not in BLOCKED_ATTRIBUTES]


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


def safe_super(*args: Any) -> Any:
    """``super`` for sandboxed classes only (never past a host class that guards by overriding).

    The compiler turns ``super()`` inside a method into ``super(__class__, self)``.
    """
    if len(args) != 2:
        raise TypeError("super() in the sandbox works inside methods, or as super(Class, obj)")
    cls, obj = args
    if cls not in _sandbox_classes:
        raise ForbiddenAttributeError("super() needs a class defined in the sandbox")
    return builtins.super(cls, obj)


def sandbox_classes() -> weakref.WeakSet[type]:
    """Classes created by sandboxed ``class`` statements (their objects are writable)."""
    return _sandbox_classes


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
    kind = "module" if isinstance(ob, _PROXY_TYPES) else t.__name__
    raise ForbiddenWriteError(f"cannot modify {kind!r} objects in the sandbox")


def safe_setattr(obj: Any, name: Any, value: Any) -> None:
    """The sandbox's ``setattr``: same name rules as attribute reads, same write guard."""
    _refuse_name(name)
    setattr(write_guard(obj), name, value)


def safe_delattr(obj: Any, name: Any) -> None:
    """The sandbox's ``delattr``."""
    _refuse_name(name)
    delattr(write_guard(obj), name)


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


_PROXY_TYPES = (ModuleProxy, SessionRandom)


def _reveal(t: type) -> type:
    if issubclass(t, builtins.type):
        return SafeType
    if issubclass(t, _PROXY_TYPES):
        return types.ModuleType
    return t


_OPAQUE_BASES: set[type] = {ModuleProxy, SessionRandom, SafeType}


def register_opaque(cls: type) -> None:
    """Mark a host class sandboxed code may hold but never subclass."""
    _OPAQUE_BASES.add(cls)


def _type_new(name: Any, bases: Any, ns: Any) -> type:
    if type(name) is not str or type(bases) is not tuple or type(ns) is not dict:
        raise TypeError("type(name, bases, dict) needs a str, a tuple and a dict")
    private = sorted(k for k in ns if not isinstance(k, str) or k.startswith("_"))
    if private:
        raise ForbiddenAttributeError(
            f"type(): class attribute names may not start with '_' in the sandbox: {private}"
        )
    ns = dict(ns)
    ns["__module__"] = "builtins"  # as when 2fb46cc's code calls type(): shown as <class 'X'>
    return sandbox_metaclass(name, bases, ns)


def sandbox_metaclass(name: str, bases: tuple[Any, ...], ns: dict[str, Any], **kw: Any) -> type:
    """``__metaclass__``: every sandboxed ``class`` statement builds its class here."""
    if kw:
        raise TypeError("class keyword arguments are not supported in the sandbox")
    for base in bases:
        if not isinstance(base, builtins.type):
            raise TypeError(f"cannot subclass {base!r}: it is not a class")
        if issubclass(base, builtins.type) or base in _OPAQUE_BASES:
            raise ForbiddenWriteError(f"cannot subclass {base.__name__!r} in the sandbox")
    cls = builtins.type(name, bases, ns)
    _sandbox_classes.add(cls)
    return cls


# --- size limits ----------------------------------------------------------------------------

try:
    iter(1, 2)  # type: ignore[call-overload]
except TypeError as _exc:  # this Python's own wording
    _ITER_NOT_CALLABLE = str(_exc)
_INTS = (int, bool)
_PLAIN_TYPES = frozenset({str, bytes, list, dict, tuple, set, frozenset, int, float, bool, complex})
"""Exact types whose attributes the compiler may read natively (see prep._FastPlain)."""
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


# --- imports --------------------------------------------------------------------------------


def guarded_import(
    name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0
) -> Any:
    """``__import__``: allowlisted modules only, handed out as their proxies."""
    allowed = ", ".join(ALLOWED_MODULES)
    if level:
        raise ForbiddenImportError(f"relative imports are not allowed; allowed modules: {allowed}")
    if name not in ALLOWED_MODULES:
        raise ForbiddenImportError(
            f"import of {name!r} is not allowed in the sandbox; allowed modules: {allowed}"
        )
    proxy = module_proxy(name)
    for attr in fromlist or ():
        if not isinstance(attr, str) or attr.startswith("_") or attr not in builtins.dir(proxy):
            raise ForbiddenImportError(
                f"cannot import name {attr!r} from {name!r} in the sandbox; "
                f"available: {', '.join(builtins.dir(proxy))}"
            )
    return proxy


def session_import(session_random: SessionRandom) -> Callable[..., Any]:
    """``__import__`` for one session: ``import random`` gives that session's generator."""

    def import_(
        name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0
    ) -> Any:
        proxy = guarded_import(name, globals, locals, fromlist, level)
        return session_random if proxy is SESSION_RANDOM else proxy

    return import_


# --- the builtins mapping -------------------------------------------------------------------

_RP_EXCEPTIONS = (
    "KeyboardInterrupt", "SystemExit",
    "ArithmeticError", "AssertionError", "AttributeError", "BaseException", "BufferError",
    "BytesWarning", "DeprecationWarning", "EOFError", "EnvironmentError", "Exception",
    "FloatingPointError", "FutureWarning", "GeneratorExit", "IOError", "ImportError",
    "ImportWarning", "IndentationError", "IndexError", "KeyError", "LookupError", "MemoryError",
    "NameError", "NotImplementedError", "OSError", "OverflowError", "PendingDeprecationWarning",
    "ReferenceError", "RuntimeError", "RuntimeWarning", "StopIteration", "SyntaxError",
    "SyntaxWarning", "SystemError", "TabError", "TypeError", "UnboundLocalError",
    "UnicodeDecodeError", "UnicodeEncodeError", "UnicodeError", "UnicodeTranslateError",
    "UnicodeWarning", "UserWarning", "ValueError", "Warning", "ZeroDivisionError",
)
"""RestrictedPython's safe exceptions. ``raise KeyboardInterrupt`` / ``SystemExit`` in sandboxed
code becomes a REPLError like any other; only a real interrupt propagates (see repl.py)."""

_EXTRA_EXCEPTIONS = (
    "RecursionError", "TimeoutError", "ModuleNotFoundError", "StopAsyncIteration",
)

_UPSTREAM_NAMES = (
    "None", "False", "True", "Ellipsis", "abs", "bool", "callable", "chr", "complex", "divmod",
    "float", "hash", "hex", "id", "int", "isinstance", "issubclass", "len", "oct", "ord",
    "range", "repr", "round", "slice", "str", "list", "dict", "tuple", "set", "frozenset",
    "bytes", "bytearray", "enumerate", "zip", "map", "filter", "reversed", "next", "sorted",
    "sum", "min", "max", "any", "all", "bin", "ascii", "format",
)
"""Builtins 2fb46cc's namespace resolves (safe_builtins plus its own additions), taken as-is."""

_FIXED_EXTRA_NAMES = ("object", "property", "staticmethod", "classmethod", "NotImplemented")


def _injected() -> dict[str, Any]:
    """What 2fb46cc injects by name, in every profile (modules as proxies)."""
    return {
        "re": module_proxy("re"),
        "json": module_proxy("json"),
        "math": module_proxy("math"),
        "datetime": _datetime.datetime,
        "timedelta": _datetime.timedelta,
        "Counter": collections.Counter,
        "defaultdict": collections.defaultdict,
    }


@functools.cache
def builtins_for(profile: Profile) -> dict[str, Any]:
    """The ``__builtins__`` mapping for ``profile``: built once, shared, never handed out."""
    from .deadline import deadline_tick, generator_tick

    b: dict[str, Any] = {name: getattr(builtins, name) for name in _UPSTREAM_NAMES}
    b.update({name: getattr(builtins, name) for name in _RP_EXCEPTIONS})
    b["KeyboardInterrupt"] = SandboxKeyboardInterrupt
    b.update(
        type=SafeType,
        pow=guarded_pow,
        iter=safe_iter,
        setattr=safe_setattr,
        delattr=safe_delattr,
        __build_class__=builtins.__build_class__,
        __name__="__main__",
        __warningregistry__=None,  # placed in env during steps: see warnguard
    )
    if profile.no_getattr_builtin:
        b["hasattr"] = upstream_hasattr
    else:
        b.update({name: getattr(builtins, name) for name in _FIXED_EXTRA_NAMES})
        b.update({name: getattr(builtins, name) for name in _EXTRA_EXCEPTIONS})
        b.update(getattr=safe_getattr, hasattr=safe_hasattr, dir=safe_dir)
    if profile.rp_utility_builtins:
        b.update(
            string=rp_string_proxy(),
            random=SESSION_RANDOM,
            whrandom=SESSION_RANDOM,
            same_type=same_type,
            test=test,
            reorder=reorder,
        )
    b.update(_injected())

    # guards the rewritten code calls
    if profile.str_format_refused:
        fmt: Callable[[Any, str], Any] = refuse_str_format
    elif profile.missing_attr_is_none:
        fmt = getattr_format_or_none
    else:
        fmt = guarded_getattr_format
    b.update(
        _getattr_=getattr_or_none if profile.missing_attr_is_none else guarded_getattr,
        _rlm_getattr_format_=fmt,
        _rlm_getattr_strict_=guarded_getattr,
        _rlm_getattr_format_strict_=guarded_getattr_format,
        _rlm_type_=builtins.type,
        _rlm_plain_types_=_PLAIN_TYPES,
        _rlm_writable_types_=frozenset() if profile.no_write_guard else frozenset({dict, list}),
        _getitem_=operator.getitem,
        _getiter_=iter,
        _iter_unpack_sequence_=guarded_iter_unpack_sequence,
        _print_=print_collector_factory,
        _rlm_print_=sandbox_print,
        _rlm_show_=show,
        _rlm_tick_=deadline_tick,
        _rlm_gtick_=generator_tick,
        _rlm_pow_=guarded_pow,
        _rlm_lshift_=guarded_lshift,
        _rlm_mul_=guarded_mul,
    )
    if profile.no_write_guard:
        # 2fb46cc's setattr/delattr: RestrictedPython's full_write_guard (dict and list only).
        b.update(setattr=guarded_setattr, delattr=guarded_delattr)
    else:
        b["_write_"] = write_guard
    if not profile.no_unpack_guard:
        b["_unpack_sequence_"] = guarded_unpack_sequence
    if not profile.no_class_support:
        b["__metaclass__"] = sandbox_metaclass
        b["super"] = safe_super
    if not profile.imports_refused:
        b["__import__"] = guarded_import
    return b


def allowed_builtin_names(profile: Profile) -> list[str]:
    """Names sandboxed code can use without importing anything (for docs and error texts)."""
    return sorted(n for n in builtins_for(profile) if not n.startswith("_"))


register_opaque(callable_iterator)


def session_builtins(profile: Profile, session: Session) -> dict[str, Any]:
    """The ``__builtins__`` of one executor: :func:`builtins_for` with session-bound guards.

    Functions and generators capture their builtins when they are made, so whatever code of
    ``session`` runs later (a finalizer in another executor's step, a function the host moved
    into another env) still reaches these guards, which act only in ``session``'s own steps.
    Built once per executor: a dict copy, nothing per step.
    """
    from .deadline import session_generator_tick
    from .warnguard import install

    install()
    b = dict(builtins_for(profile))
    own_random = SessionRandom(session)
    b.update({
        SESSION_KEY: session,
        "_rlm_print_": session_print(session),
        "_rlm_show_": session_show(session),
        "_print_": session_collector_factory(session),
        "_rlm_gtick_": session_generator_tick(session),
    })
    for name, value in (("dir", session_dir(session)), ("random", own_random),
                        ("whrandom", own_random), ("__import__", session_import(own_random))):
        if name in b:
            b[name] = value
    return b
