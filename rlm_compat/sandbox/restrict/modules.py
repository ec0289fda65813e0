"""Modules as sandboxed code sees them: read-only proxies holding an allowlist of attributes.

A proxy is built once per module from its allowlist (values copied at build time), so the real
module is never consulted while sandboxed code runs: no ``__getattr__`` forwarding, no target
``AttributeError`` (whose ``.obj`` would leak the module) and no route to ``re.enum``,
``json.codecs``, ``datetime.sys``... A raw module found anywhere (the loop puts the real ``re``
into the namespace) is looked at through the same proxy by the attribute guard.
"""

from __future__ import annotations

import importlib
import itertools
import random as _random
import sys
import threading
import types
from collections.abc import Callable, Iterator
from typing import Any

from .allowlists import ALLOWLISTS
from .attributes import GuardedFormatter
from .context import Session, own_state
from .regex import sandbox_re_functions
from .registry import register_module_proxies
from .violations import ForbiddenAttributeError, ForbiddenWriteError

__all__ = [
    "SESSION_KEY",
    "SESSION_RANDOM",
    "ModuleProxy",
    "SessionRandom",
    "module_proxy",
    "proxy_for_module",
    "real_module",
    "rp_string_proxy",
]

_REAL: dict[str, types.ModuleType] = {}
"""The module behind each allowlisted proxy, kept here rather than on the proxy itself."""


class ModuleProxy:
    """Read-only stand-in for one module: its allowlisted attributes and nothing else."""

    def __init__(self, label: str, attrs: dict[str, Any], real: types.ModuleType | None) -> None:
        d = object.__getattribute__(self, "__dict__")
        d.update(attrs)
        d["_ModuleProxy__label"] = label
        if real is not None:
            _REAL[label] = real

    def __getattr__(self, name: str) -> Any:
        d = object.__getattribute__(self, "__dict__")
        label = d["_ModuleProxy__label"]
        real = _REAL.get(label)
        if real is None:
            raise ForbiddenAttributeError(f"module {label!r} is not available in the sandbox")
        if not name.startswith("__") and hasattr(real, name):
            raise ForbiddenAttributeError(f"'{label}.{name}' is not available in the sandbox")
        raise AttributeError(f"module {label!r} has no attribute {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        raise ForbiddenWriteError("modules are read-only in the sandbox")

    def __delattr__(self, name: str) -> None:
        raise ForbiddenWriteError("modules are read-only in the sandbox")

    def __dir__(self) -> list[str]:
        return _public(object.__getattribute__(self, "__dict__"))

    def __repr__(self) -> str:
        label = object.__getattribute__(self, "__dict__")["_ModuleProxy__label"]
        return f"<module {label!r} (sandboxed)>"

    def __reduce__(self) -> Any:
        raise TypeError("sandboxed modules cannot be pickled")


def real_module(proxy: ModuleProxy) -> types.ModuleType | None:
    """The module a proxy stands for (host-side only: comparisons, reports)."""
    return _REAL.get(object.__getattribute__(proxy, "__dict__")["_ModuleProxy__label"])


def _public(d: dict[str, Any]) -> list[str]:
    return sorted(k for k in d if not k.startswith("_"))


class SessionRandom:
    """``random`` for sandboxed code: the functions of its own session's ``Random``.

    The process-wide generator (which host code and other sessions share) is never reachable;
    ``random.seed(1)`` seeds only the session calling it, and only during one of its steps: code
    of a session running elsewhere (a function handed to another executor, called by the host)
    gets a throwaway generator. The shared instance (a raw ``random`` module seen through
    :func:`proxy_for_module`) finds the session from the calling sandboxed frame's builtins.
    """

    __slots__ = ("_session",)

    def __init__(self, session: Session | None = None) -> None:
        object.__setattr__(self, "_session", session)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in ALLOWLISTS["random"]:
            raise ForbiddenAttributeError(f"'random.{name}' is not available in the sandbox")
        if name == "Random":
            return _random.Random
        session = object.__getattribute__(self, "_session")
        if session is None:
            session = _calling_session()
        state = own_state(session) if session is not None else None
        rng = state.session.random if state is not None else _random.Random()
        return getattr(rng, name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise ForbiddenWriteError("modules are read-only in the sandbox")

    def __dir__(self) -> list[str]:
        return sorted(ALLOWLISTS["random"])

    def __repr__(self) -> str:
        return "<module 'random' (sandboxed, per session)>"

    def __reduce__(self) -> Any:
        raise TypeError("sandboxed modules cannot be pickled")


SESSION_KEY = "_rlm_session_"
"""Where a session's builtins layer names its session (sandboxed code cannot spell it)."""


def _calling_session() -> Session | None:
    """The session of the nearest sandboxed frame up the stack (None if there is none)."""
    frame: types.FrameType | None = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename.startswith("<rlm-repl-"):
            session = frame.f_builtins.get(SESSION_KEY)
            return session if isinstance(session, Session) else None
        frame = frame.f_back
    return None


SESSION_RANDOM = SessionRandom()


def _interruptible(factory: Callable[..., Iterator[Any]]) -> Callable[..., Iterator[Any]]:
    """An endless itertools iterator re-yielded from Python, so a timeout can stop its consumer.

    ``list(itertools.count())`` would otherwise be one endless C call that no timeout reaches.
    """

    def wrapper(*args: Any, **kwargs: Any) -> Iterator[Any]:
        # An explicit loop, not ``yield from``: resuming after ``yield from`` skips the check
        # for pending asynchronous exceptions, so the timeout would never land.
        for item in factory(*args, **kwargs):  # noqa: UP028
            yield item

    wrapper.__name__ = factory.__name__
    wrapper.__doc__ = factory.__doc__
    return wrapper


def _repeat(obj: Any, *times: Any) -> Iterator[Any]:
    if times:
        return itertools.repeat(obj, *times)
    return _interruptible(itertools.repeat)(obj)


def _overrides(name: str) -> dict[str, Any]:
    from . import stdlib

    if name == "urllib":
        return {"parse": module_proxy("urllib.parse")}
    return {
        **stdlib.overrides(),
        "re": sandbox_re_functions(),
        "string": {"Formatter": GuardedFormatter},
        "itertools": {
            "count": _interruptible(itertools.count),
            "cycle": _interruptible(itertools.cycle),
            "repeat": _repeat,
        },
    }.get(name, {})


_lock = threading.RLock()
_proxies: dict[str, Any] = {}
_by_module: dict[int, Any] = {}


def module_proxy(name: str) -> Any:
    """The proxy for allowlisted module ``name`` (built once, shared: it is immutable)."""
    proxy = _proxies.get(name)
    if proxy is not None:
        return proxy
    with _lock:
        proxy = _proxies.get(name)
        if proxy is None:
            proxy = _build(name)
            _proxies[name] = proxy
        return proxy


def _build(name: str) -> Any:
    if name == "random":
        return SESSION_RANDOM
    real = importlib.import_module(name)
    overrides = _overrides(name)
    attrs: dict[str, Any] = {"__name__": name, "__doc__": real.__doc__}
    for attr in ALLOWLISTS[name]:
        if attr in overrides:
            attrs[attr] = overrides[attr]
        elif hasattr(real, attr):
            value = getattr(real, attr)
            if not isinstance(value, types.ModuleType):
                attrs[attr] = value
    return ModuleProxy(name, attrs, real)


class _RPStringProxy(ModuleProxy):
    """``string`` as 2fb46cc predefines it (RestrictedPython's delegator): no ``Formatter``."""

    def __getattr__(self, name: str) -> Any:
        if name == "Formatter":
            raise NotImplementedError("string.Formatter is not safe")
        return ModuleProxy.__getattr__(self, name)


def rp_string_proxy() -> Any:
    """The ``string`` of RestrictedPython's utility builtins, on top of the ``string`` proxy."""
    proxy = _proxies.get("string:rp")
    if proxy is None:
        base = object.__getattribute__(module_proxy("string"), "__dict__")
        attrs = {k: v for k, v in base.items() if not k.startswith("_") and k != "Formatter"}
        proxy = _RPStringProxy("string", attrs, importlib.import_module("string"))
        _proxies["string:rp"] = proxy
    return proxy


_DENIED: dict[str, ModuleProxy] = {}


def proxy_for_module(module: types.ModuleType) -> Any:
    """How sandboxed code sees a raw module object it got hold of: proxy, or an empty one."""
    proxy = _by_module.get(id(module))
    if proxy is not None:
        return proxy
    name = getattr(module, "__name__", None)
    if isinstance(name, str) and name in ALLOWLISTS and sys.modules.get(name) is module:
        proxy = module_proxy(name)
        with _lock:
            _by_module[id(module)] = proxy
        return proxy
    label = name if isinstance(name, str) else "?"
    with _lock:
        denied = _DENIED.get(label)
        if denied is None:
            denied = ModuleProxy(label, {}, None)
            _DENIED[label] = denied
    return denied


register_module_proxies(proxy_for_module, ModuleProxy, SessionRandom)
