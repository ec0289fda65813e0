"""The guards of writes: which objects an assignment, ``del``, ``setattr`` or ``delattr`` may modify.

Containers and what sandboxed code created are writable; modules, host classes, functions and
every other shared object are read-only. Special names are never written.
"""

from __future__ import annotations

import builtins
import collections
import types
from collections.abc import Callable
from typing import Any

from .names import refuse_name
from .registry import SANDBOX_CLASSES, proxy_types
from .violations import ForbiddenWriteError

__all__ = ["register_writable", "safe_delattr", "safe_setattr", "write_guard"]

_ITEM_WRITABLE = (dict, list, bytearray, collections.deque)

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
    if t is dict or t is list or t in SANDBOX_CLASSES:
        return ob
    if isinstance(ob, type):
        if ob in SANDBOX_CLASSES:
            return ob
    elif isinstance(ob, _ITEM_WRITABLE):
        return ob
    if t is types.FunctionType and ob.__code__.co_filename.startswith("<rlm-repl-"):
        return ob  # a function sandboxed code defined: its attributes are its own
    check = _EXTRA_WRITABLE.get(t)
    if check is not None and check(ob):
        return ob
    kind = "module" if isinstance(ob, proxy_types()) else t.__name__
    raise ForbiddenWriteError(f"cannot modify {kind!r} objects in the sandbox")


def _refuse_write_name(obj: Any, name: Any) -> None:
    """Private names may be written on sandbox-made objects; special names never."""
    own = builtins.type(obj) in SANDBOX_CLASSES or (isinstance(obj, builtins.type) and obj in SANDBOX_CLASSES)
    if type(name) is str and name.startswith("_") and not name.startswith("__") and own:
        return
    refuse_name(name)


def safe_setattr(obj: Any, name: Any, value: Any) -> None:
    """The sandbox's ``setattr``: same name rules as attribute writes, same write guard."""
    _refuse_write_name(obj, name)
    setattr(write_guard(obj), name, value)


def safe_delattr(obj: Any, name: Any) -> None:
    """The sandbox's ``delattr``."""
    _refuse_write_name(obj, name)
    delattr(write_guard(obj), name)
