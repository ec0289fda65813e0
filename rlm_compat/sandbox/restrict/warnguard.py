"""Warnings raised by sandboxed code never reach the host's filters, display or stderr.

Model code triggers warnings at run time (``re.compile('[[a]')``: FutureWarning; deprecated
stdlib calls) and when it is compiled (``'\\d'``: invalid escape sequence). Left alone they are
printed on the host's stderr, obey the host's filters (``-W error`` would turn them into
exceptions inside the model's code) and consume its "once" registries. They are dropped.

``warnings.catch_warnings()`` is process-global and not thread-safe on 3.10-3.13, so nothing is
swapped per step. Instead the interpreter's own lookup is routed, once: CPython's C warning
machinery reads ``warnings.filters`` as an attribute of the module for every warning, so the
module's class gains a ``filters`` property that answers a single catch-all "ignore" filter when
the warning comes from sandboxed code (a sandboxed frame is on the stack before any host
function's boundary, or a sandboxed program is being compiled in this thread), and the host's
own list otherwise. Python code in ``warnings`` itself (``simplefilter``, ``catch_warnings``)
always sees and sets the host's list.

The registry CPython keeps in the warning frame's globals (``__warningregistry__``) is kept out
of ``env`` by the executor placing ``None`` there for the duration of a step.
"""

from __future__ import annotations

import sys
import threading
import types
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["install", "quiet_compile", "register_host_boundary"]

_SANDBOX_FILTERS: list[tuple[Any, ...]] = [("ignore", None, Warning, None, 0)]
_WARNINGS_FILE = warnings.__file__


class _Quiet(threading.local):
    depth = 0


_QUIET = _Quiet()
_boundaries: frozenset[types.CodeType] = frozenset()
_lock = threading.Lock()


@contextmanager
def quiet_compile() -> Iterator[None]:
    """Warnings raised in this thread meanwhile come from compiling sandboxed source."""
    _QUIET.depth += 1
    try:
        yield
    finally:
        _QUIET.depth -= 1


def _from_sandbox() -> bool:
    if _QUIET.depth:
        return True
    frame: types.FrameType | None = sys._getframe(2)
    if frame is not None and frame.f_code.co_filename == _WARNINGS_FILE:
        return False  # warnings' own Python code reads and writes the host's list
    while frame is not None:
        code = frame.f_code
        if code.co_filename.startswith("<rlm-repl-"):
            return True
        if code in _boundaries:
            return False  # a host function called by sandboxed code: the host's warnings
        frame = frame.f_back
    return False


class _WarningsModule(types.ModuleType):
    """``warnings`` whose ``filters`` attribute depends on who is asking (see module docstring)."""

    @property
    def filters(self) -> Any:
        if _from_sandbox():
            return _SANDBOX_FILTERS
        return self.__dict__["filters"]

    @filters.setter
    def filters(self, value: Any) -> None:
        self.__dict__["filters"] = value


def register_host_boundary(code: types.CodeType) -> None:
    """Frames of ``code`` are host code called by sandboxed code (told by :mod:`..step.hostcall`)."""
    global _boundaries
    with _lock:
        _boundaries = _boundaries | {code}


def install() -> None:
    """Route sandboxed warnings away from the host (idempotent; the host sees no change)."""
    with _lock:
        module = sys.modules.get("warnings", warnings)
        if type(module) is types.ModuleType:
            module.__class__ = _WarningsModule
