"""The builtins mapping sandboxed code runs with, assembled from the guards.

The compile-time half (which names and syntax are refused, what is rewritten into a guard call)
lives in :mod:`.prep`; the guards the rewritten code calls in :mod:`.attributes`, :mod:`.writes`,
:mod:`.classes`, :mod:`.sizes` and :mod:`.iteration`. This module puts them, the module proxies,
output capture and the deadline ticks into one mapping per
:class:`~rlm_compat.profiles.Profile`, shared by all executors using it: the mappings are
never reachable from sandboxed code, and per-execution state is found through
:data:`.context.LOCAL`. Each executor runs its code with :func:`session_builtins`, a thin copy
whose output, ``dir()``, ``random`` and generator guards are bound to its :class:`~.context.Session`.
"""

from __future__ import annotations

import builtins
import collections
import datetime as _datetime
import dis
import functools
import operator
import sys
import types
from collections.abc import Callable
from typing import Any

from RestrictedPython.Guards import (
    guarded_delattr,
    guarded_iter_unpack_sequence,
    guarded_setattr,
    guarded_unpack_sequence,
)
from RestrictedPython.Utilities import reorder, same_type, test

from ...profiles import Profile
from .allowlists import ALLOWED_MODULES
from .attributes import (
    GuardedFormatter,
    checked_getattr,
    getattr_format_or_none,
    getattr_or_none,
    guarded_getattr,
    guarded_getattr_format,
    pattern_values,
    refuse_str_format,
    safe_dir,
    safe_getattr,
    safe_hasattr,
    safe_vars,
    session_dir,
    special_getattr,
    upstream_hasattr,
)
from .classes import SafeType, safe_super, sandbox_metaclass
from .context import Session
from .iteration import safe_iter
from .modules import (
    SESSION_KEY,
    SESSION_RANDOM,
    SessionRandom,
    module_proxy,
    rp_string_proxy,
)
from .names import BLOCKED_ATTRIBUTES
from .output import (
    print_collector_factory,
    sandbox_print,
    session_collector_factory,
    session_print,
    session_show,
    show,
)
from .registry import sandbox_classes
from .sizes import MAX_INT_BITS, MAX_SEQUENCE_ITEMS, guarded_lshift, guarded_mul, guarded_pow
from .violations import ForbiddenImportError, SandboxFileError, SandboxKeyboardInterrupt
from .writes import safe_delattr, safe_setattr, write_guard

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

_PLAIN_TYPES = frozenset({str, bytes, list, dict, tuple, set, frozenset, int, float, bool, complex})
"""Exact types whose attributes the compiler may read natively (see rewrites._FastPlain)."""


# --- imports --------------------------------------------------------------------------------


_IMPORT_NAME = dis.opmap["IMPORT_NAME"]

_STDLIB_INTERNAL = frozenset(
    {
        "time",
        "_strptime",
        "calendar",
        "locale",
        "linecache",
        "warnings",
        "tokenize",
        "unicodedata",
        "numbers",
        "collections",
        "decimal",
        "_pydecimal",
        "fractions",
        "copyreg",
        "re",
        "string",
        "encodings",
        "codecs",
        "_datetime",
        "datetime",
        "operator",
        "math",
        "contextvars",
    }
)
"""Modules the standard library's C code imports for itself while sandboxed code calls it
(``date.strftime`` imports ``time``, ``datetime.strptime`` imports ``_strptime``, a warning's
display ``linecache``). Those imports return the module to that C code, never to the sandbox."""


def _is_model_import() -> bool:
    """Whether the ``__import__`` call comes from an ``import`` statement of sandboxed code.

    C code imports through the builtins of the innermost Python frame (``PyImport_Import``),
    which during a sandboxed call is the sandboxed frame; its current instruction then is the
    call into C, not ``IMPORT_NAME``.
    """
    frame: types.FrameType | None = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back
    if frame is None:
        return True
    code = frame.f_code.co_code
    lasti = frame.f_lasti
    return not (0 <= lasti < len(code)) or code[lasti] == _IMPORT_NAME


def _internal_import(name: str, fromlist: Any, level: int) -> Any:
    if level == 0 and name in _STDLIB_INTERNAL:
        return builtins.__import__(name, None, None, fromlist, 0)
    raise ForbiddenImportError(f"the standard library's import of {name!r} is not allowed in the sandbox")


def guarded_import(
    name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0
) -> Any:
    """``__import__``: allowlisted modules only, handed out as their proxies; the standard
    library's own imports during a call (see :data:`_STDLIB_INTERNAL`) are not the model's."""
    if not _is_model_import():
        return _internal_import(name, fromlist, level)
    allowed = ", ".join(ALLOWED_MODULES)
    if level:
        raise ForbiddenImportError(f"relative imports are not allowed; allowed modules: {allowed}")
    if name not in ALLOWED_MODULES:
        raise ForbiddenImportError(
            f"import of {name!r} is not allowed in the sandbox; allowed modules: {allowed}"
        )
    proxy = module_proxy(name)
    if not fromlist and "." in name:
        proxy = module_proxy(name.partition(".")[0])
    for attr in fromlist or ():
        if attr == "*":
            continue
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
        if not _is_model_import():
            return _internal_import(name, fromlist, level)
        proxy = guarded_import(name, globals, locals, fromlist, level)
        return session_random if proxy is SESSION_RANDOM else proxy

    return import_


def no_open(*args: Any, **kwargs: Any) -> Any:
    """``open``: there is no file system in the sandbox; the data is in ``context``."""
    raise SandboxFileError(
        "open() is not available in the sandbox: there are no files here. The data you were "
        "given is in the variable `context` (print(type(context), len(context)) to see it); "
        "wrap text in io.StringIO(...) where a file object is needed."
    )


# --- the builtins mapping -------------------------------------------------------------------

_RP_EXCEPTIONS = (
    "KeyboardInterrupt",
    "SystemExit",
    "ArithmeticError",
    "AssertionError",
    "AttributeError",
    "BaseException",
    "BufferError",
    "BytesWarning",
    "DeprecationWarning",
    "EOFError",
    "EnvironmentError",
    "Exception",
    "FloatingPointError",
    "FutureWarning",
    "GeneratorExit",
    "IOError",
    "ImportError",
    "ImportWarning",
    "IndentationError",
    "IndexError",
    "KeyError",
    "LookupError",
    "MemoryError",
    "NameError",
    "NotImplementedError",
    "OSError",
    "OverflowError",
    "PendingDeprecationWarning",
    "ReferenceError",
    "RuntimeError",
    "RuntimeWarning",
    "StopIteration",
    "SyntaxError",
    "SyntaxWarning",
    "SystemError",
    "TabError",
    "TypeError",
    "UnboundLocalError",
    "UnicodeDecodeError",
    "UnicodeEncodeError",
    "UnicodeError",
    "UnicodeTranslateError",
    "UnicodeWarning",
    "UserWarning",
    "ValueError",
    "Warning",
    "ZeroDivisionError",
)
"""RestrictedPython's safe exceptions. ``raise KeyboardInterrupt`` / ``SystemExit`` in sandboxed
code becomes a REPLError like any other; only a real interrupt propagates (see repl.py)."""

_EXTRA_EXCEPTIONS = (
    "RecursionError",
    "TimeoutError",
    "ModuleNotFoundError",
    "StopAsyncIteration",
    "BaseExceptionGroup",
    "ExceptionGroup",
    "BlockingIOError",
    "BrokenPipeError",
    "ChildProcessError",
    "ConnectionAbortedError",
    "ConnectionError",
    "ConnectionRefusedError",
    "ConnectionResetError",
    "EncodingWarning",
    "FileExistsError",
    "FileNotFoundError",
    "InterruptedError",
    "IsADirectoryError",
    "NotADirectoryError",
    "PermissionError",
    "ProcessLookupError",
    "ResourceWarning",
)
"""Exception classes beyond RestrictedPython's (those missing on the running Python skipped)."""

_FIXED_EXTRA_FUNCTIONS = ("memoryview", "aiter", "anext")

_UPSTREAM_NAMES = (
    "None",
    "False",
    "True",
    "Ellipsis",
    "abs",
    "bool",
    "callable",
    "chr",
    "complex",
    "divmod",
    "float",
    "hash",
    "hex",
    "id",
    "int",
    "isinstance",
    "issubclass",
    "len",
    "oct",
    "ord",
    "range",
    "repr",
    "round",
    "slice",
    "str",
    "list",
    "dict",
    "tuple",
    "set",
    "frozenset",
    "bytes",
    "bytearray",
    "enumerate",
    "zip",
    "map",
    "filter",
    "reversed",
    "next",
    "sorted",
    "sum",
    "min",
    "max",
    "any",
    "all",
    "bin",
    "ascii",
    "format",
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
def _warm_stdlib_caches() -> None:
    """Make the C datetime module's one-time import of ``_strptime`` happen now, in host code.

    On Python 3.10-3.12 ``datetime.strptime`` imports ``_strptime`` through the calling frame's
    ``__import__`` the first time any code in the process calls it, then keeps it: whether a
    sandboxed ``strptime`` works would depend on what the host did before. Warmed here, it
    always works (3.13 imports on every call, through :data:`_STDLIB_INTERNAL`).
    """
    _datetime.datetime.strptime("2000", "%Y")


@functools.cache
def builtins_for(profile: Profile) -> dict[str, Any]:
    """The ``__builtins__`` mapping for ``profile``: built once, shared, never handed out."""
    _warm_stdlib_caches()
    b = _names_code_sees(profile)
    b.update(_guard_calls(profile))
    return b


def _names_code_sees(profile: Profile) -> dict[str, Any]:
    """The builtins sandboxed code can name: Python's own, the guarded stand-ins, 2fb46cc's extras."""
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
        b.update(
            {
                n: getattr(builtins, n)
                for n in _EXTRA_EXCEPTIONS + _FIXED_EXTRA_FUNCTIONS
                if hasattr(builtins, n)
            }
        )
        b.update(getattr=safe_getattr, hasattr=safe_hasattr, dir=safe_dir, open=no_open, vars=safe_vars)
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
    if not profile.no_class_support:
        b["super"] = safe_super
    if not profile.imports_refused:
        b["__import__"] = guarded_import
    return b


def _guard_calls(profile: Profile) -> dict[str, Any]:
    """The guards the compiler's rewritten code calls (names sandboxed code cannot spell)."""
    from .deadline import deadline_tick, generator_tick

    b: dict[str, Any] = {}
    if not profile.no_getattr_builtin:
        b.update(_rlm_special_=special_getattr, _rlm_patterns_=pattern_values)
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
    return b


def allowed_builtin_names(profile: Profile) -> list[str]:
    """Names sandboxed code can use without importing anything (for docs and error texts)."""
    return sorted(n for n in builtins_for(profile) if not n.startswith("_"))


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
    b.update(
        {
            SESSION_KEY: session,
            "_rlm_print_": session_print(session),
            "_rlm_show_": session_show(session),
            "_print_": session_collector_factory(session),
            "_rlm_gtick_": session_generator_tick(session),
        }
    )
    for name, value in (
        ("dir", session_dir(session)),
        ("random", own_random),
        ("whrandom", own_random),
        ("__import__", session_import(own_random)),
    ):
        if name in b:
            b[name] = value
    return b
