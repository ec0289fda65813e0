"""Where model code runs: the restricted interpreter, the isolated worker, and one runner interface.

Two subsystems, kept apart as RestrictedPython keeps its transformer and its guards apart, and
what both share:

- :mod:`.restrict` — the interpreter-level layer: from a response to restricted bytecode
  (:mod:`.restrict.prep`), the runtime guards, the builtins mapping (:mod:`.restrict.policy`),
  the module proxies, print capture, warnings, the in-thread deadline. It holds on any OS.
- :mod:`.isolate` — the process layer: the killable worker, its fork server, its start, its
  channel, its resource limits and OS-level hardening, which must hold even if the restriction
  layer is escaped.
- :mod:`.step` — what both share: the step engine (:mod:`.step.inline`, run in the caller's
  thread or driven by the worker), host functions in the namespace (:mod:`.step.hostcall`),
  every observation text (:mod:`.step.texts`) and the sandbox's configuration
  (:mod:`.step.repl_config`: :class:`ReplConfig` and its :class:`Limits`, re-exported by
  :mod:`rlm_compat.config` where users import it).

At this level sits only what callers see: this facade and :mod:`.runner` (the runner interface
and the choice of runner). The package graph runs one way: the facade and the runner above
``isolate``, ``isolate`` above ``step``, ``step`` above ``restrict``; the fence rules the runner
shares with the loop and the CPython reference are :mod:`rlm_compat.fences`, below them all
(``Fence``, ``fenced_blocks`` and ``scan_fences`` are re-exported here, where they were first
imported from).

Code outside the sandbox imports from here only. The names below are loaded on first use, so
``import rlm_compat`` pays only for what the facade needs (the host-call marker and the runner
interface); the worker machinery and RestrictedPython's compiler load when a session starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..fences import Fence, fenced_blocks, scan_fences
from .runner import Runner, make_runner
from .step.hostcall import HostCall, host_call, namespace_listing
from .step.repl_config import (
    CONTEXT_SECONDS_PER_GB,
    ISOLATION_ENV,
    ISOLATIONS,
    START_METHOD_ENV,
    START_METHODS,
    Limits,
    ReplConfig,
    WorkerResourceLimits,
)

if TYPE_CHECKING:
    from .isolate.hardening import available_layers, describe_host, syscall_number
    from .isolate.process import ProcessRunner
    from .isolate.spawn import shared_contexts, start_worker
    from .isolate.templates import sharing_threshold
    from .isolate.zygote import recv_frame, send_frame
    from .restrict.allowlists import ALLOWED_MODULES
    from .restrict.modules import ModuleProxy, real_module
    from .step.inline import InlineRunner

_LAZY = {
    "InlineRunner": "step.inline",
    "ProcessRunner": "isolate.process",
    "available_layers": "isolate.hardening",
    "describe_host": "isolate.hardening",
    "syscall_number": "isolate.hardening",
    "start_worker": "isolate.spawn",
    "shared_contexts": "isolate.spawn",
    "sharing_threshold": "isolate.templates",
    "recv_frame": "isolate.zygote",
    "send_frame": "isolate.zygote",
    "ALLOWED_MODULES": "restrict.allowlists",
    "ModuleProxy": "restrict.modules",
    "real_module": "restrict.modules",
}


def __getattr__(name: str) -> Any:
    """The names of :data:`_LAZY`, imported from their home module on first use."""
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "ALLOWED_MODULES",
    "CONTEXT_SECONDS_PER_GB",
    "ISOLATIONS",
    "ISOLATION_ENV",
    "START_METHODS",
    "START_METHOD_ENV",
    "Fence",
    "HostCall",
    "InlineRunner",
    "Limits",
    "ModuleProxy",
    "ProcessRunner",
    "ReplConfig",
    "Runner",
    "WorkerResourceLimits",
    "available_layers",
    "describe_host",
    "fenced_blocks",
    "host_call",
    "make_runner",
    "namespace_listing",
    "real_module",
    "recv_frame",
    "scan_fences",
    "send_frame",
    "shared_contexts",
    "sharing_threshold",
    "start_worker",
    "syscall_number",
]
