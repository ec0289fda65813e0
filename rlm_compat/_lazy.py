"""Lazy import of litellm behind a module object that ``unittest.mock.patch`` can target.

Upstream's tests patch ``rlm.core.litellm.acompletion``; upstream imports litellm eagerly, which costs
seconds and (without ``LITELLM_LOCAL_MODEL_COST_MAP``) network retries. Here ``rlm_compat.core.litellm``
is a :class:`LazyModule`: attribute reads import the real module on first use, while attribute writes
and deletes (what ``patch`` does) land on the proxy itself and shadow the real attribute.
"""

from __future__ import annotations

import importlib
import os
import threading
import types
from typing import Any

__all__ = ["LazyModule", "ensure_offline_litellm"]

_PREFETCH_LOCK = threading.Lock()


def ensure_offline_litellm() -> None:
    """Keep litellm from fetching its model cost map over the network, unless the user chose otherwise."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


class LazyModule(types.ModuleType):
    """A stand-in module that imports ``target`` on first attribute read."""

    def __init__(self, target: str) -> None:
        super().__init__(target)
        object.__setattr__(self, "_lazy_target", target)
        object.__setattr__(self, "_lazy_module", None)
        object.__setattr__(self, "_lazy_lock", threading.Lock())

    def _lazy_load(self) -> types.ModuleType:
        module = self.__dict__["_lazy_module"]
        if module is None:
            with self.__dict__["_lazy_lock"]:
                module = self.__dict__["_lazy_module"]
                if module is None:
                    ensure_offline_litellm()
                    module = importlib.import_module(self.__dict__["_lazy_target"])
                    object.__setattr__(self, "_lazy_module", module)
        return module  # type: ignore[no-any-return]

    def is_overridden(self, name: str) -> bool:
        """Whether ``name`` was set on the proxy (``unittest.mock.patch``), shadowing the real one."""
        return name in self.__dict__

    def prefetch(self) -> None:
        """Start importing the real module in a background thread (once); returns at once.

        An RLM calls this when it is made, so the run's first model call finds litellm (seconds
        to import) already loaded or well on its way. A failed import is left for that call to
        raise, where it is reported.
        """
        with _PREFETCH_LOCK:  # not the import's lock, which is held for the whole import
            if self.__dict__.get("_lazy_prefetch") is not None or self.is_loaded:
                return
            thread = threading.Thread(target=self._prefetch, name="rlm-compat-import", daemon=True)
            object.__setattr__(self, "_lazy_prefetch", thread)
        thread.start()

    def _prefetch(self) -> None:
        try:
            self._lazy_load()
        except Exception:
            pass

    @property
    def is_loaded(self) -> bool:
        """Whether the real module has been imported through this proxy."""
        return self.__dict__["_lazy_module"] is not None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return getattr(self._lazy_load(), name)

    def __dir__(self) -> list[str]:
        return sorted(set(dir(self._lazy_load())) | set(self.__dict__))

    def __repr__(self) -> str:
        state = "loaded" if self.is_loaded else "not loaded"
        return f"<lazy module {self.__dict__['_lazy_target']!r} ({state})>"
