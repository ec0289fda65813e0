"""What the conformance driver runs *inside* dspy's Pyodide to observe and reset its namespace.

dspy's runner (``dspy/primitives/runner.js``) executes every piece of code in one namespace,
Pyodide's ``__main__`` globals, and offers no way to read that namespace or start it afresh short
of a new Deno + Pyodide process (5-15 s). So the driver (``dspy_cases.py``) sends this module's
source once per process through the runner's own ``execute`` (with ``values.py``, the fixtures'
codec) and then, by further ``execute`` calls that each evaluate one expression and bind no name:

* :meth:`Observer.env`: the namespace as a case's env (tagged JSON text), without the names the
  runner binds before *every* execution (``sys``, ``io``, ``json``, its stdout buffers, its
  ``last_exception_args``, its own ``SUBMIT``) and without dunder names;
* :meth:`Observer.reset`: the namespace back to what it was right after start (names added are
  deleted, names rebound are restored, ``__annotations__`` emptied), pure-Python modules first
  imported by the case dropped from ``sys.modules`` (a later import runs them afresh), and the
  list of what it could *not* restore: an attribute of a module loaded before the case, a
  builtin, or one of ``sys``'s settings changed. The driver restarts the interpreter when that
  list is not empty, so no case sees another's leftovers.

Standard library only (it runs in Pyodide's CPython); ``encode`` is ``values.encode`` passed in.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, MutableMapping
from typing import Any

__all__ = ["RUNNER_NAMES", "Observer"]

RUNNER_NAMES = frozenset(
    {
        "sys",
        "io",
        "json",
        "old_stdout",
        "old_stderr",
        "buf_stdout",
        "buf_stderr",
        "last_exception_args",
        "_DSPyFinalOutput",
    }
)
"""Names runner.js's setup code binds in the namespace before every execution."""
_VOLATILE = frozenset(
    {
        ("sys", "stdout"),
        ("sys", "stderr"),
        ("sys", "last_exc"),
        ("sys", "last_type"),
        ("sys", "last_value"),
        ("sys", "last_traceback"),
    }
)
"""Module attributes that change by themselves: the runner swaps the streams, errors set last_*."""

Namespace = MutableMapping[str, Any]


def _fingerprint(skip: frozenset[str]) -> dict[str, dict[str, int]]:
    """For every loaded module but ``skip`` (the namespace's, the observer's): attribute -> id."""
    out: dict[str, dict[str, int]] = {}
    for name, module in list(sys.modules.items()):
        if module is None or name in skip:
            continue
        try:
            attributes = vars(module)
        except TypeError:
            continue
        out[name] = {k: id(v) for k, v in list(attributes.items()) if (name, k) not in _VOLATILE}
    return out


def _settings() -> tuple[Any, ...]:
    return (
        sys.getrecursionlimit(),
        sys.gettrace(),
        sys.getprofile(),
        tuple(sys.path),
        tuple(sys.meta_path),
        tuple(sys.path_hooks),
    )


class Observer:
    """The namespace's state right after start, and the two operations on it (module docstring)."""

    def __init__(self, namespace: Namespace, encode: Callable[[Any], Any], own: tuple[str, ...] = ()) -> None:
        self.encode = encode
        self.skip = frozenset({str(namespace.get("__name__", "__main__")), *own})
        self.names = dict(namespace)
        self.annotations = dict(namespace.get("__annotations__") or {})
        self.modules = set(sys.modules)
        self.fingerprint = _fingerprint(self.skip)
        self.settings = _settings()

    def _shown(self, name: str, value: Any) -> bool:
        """A case's own name: not dunder, not the runner's, not one the runtime bound at start
        (``SUBMIT``, Pyodide's ``_js_tool_call``...) still holding its start value."""
        if (name.startswith("__") and name.endswith("__")) or name in RUNNER_NAMES:
            return False
        return not (name in self.names and value is self.names[name])

    def env(self, namespace: Namespace) -> str:
        """The case's env as tagged JSON text (names in namespace order)."""
        shown = {k: self.encode(v) for k, v in list(namespace.items()) if self._shown(k, v)}
        return json.dumps(shown, ensure_ascii=False, allow_nan=False)

    def reset(self, namespace: Namespace) -> str:
        """Restore the start state; a JSON list of what could not be restored (empty: clean)."""
        for name in list(namespace):
            if name not in self.names:
                del namespace[name]
            elif namespace[name] is not self.names[name] and name not in RUNNER_NAMES:
                namespace[name] = self.names[name]
        for name, value in self.names.items():
            namespace.setdefault(name, value)
        annotations = namespace.get("__annotations__")
        if isinstance(annotations, dict):
            annotations.clear()
            annotations.update(self.annotations)
        for name in set(sys.modules) - self.modules:
            if str(getattr(sys.modules[name], "__file__", "") or "").endswith(".py"):
                del sys.modules[name]
        return json.dumps(self.leaks())

    def leaks(self) -> list[str]:
        """What differs from the start state outside the namespace (at most 20 named)."""
        found: list[str] = []
        now = _fingerprint(self.skip)
        for name, attributes in self.fingerprint.items():
            current = now.get(name)
            if current is None:
                found.append(f"module {name} unloaded")
                continue
            found += [
                f"{name}.{k}"
                for k in sorted(attributes.keys() | current.keys())
                if attributes.get(k) != current.get(k)
            ]
        if _settings() != self.settings:
            found.append("sys settings (recursion limit, trace, profile or import paths)")
        return found[:20]
