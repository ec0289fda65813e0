"""Where model code runs: the restricted interpreter, the isolated worker, and one runner interface.

Two subsystems, kept apart as RestrictedPython keeps its transformer and its guards apart:

- :mod:`.restrict` — the interpreter-level layer: from a response to restricted bytecode
  (:mod:`.restrict.prep`), the runtime guards, the builtins mapping (:mod:`.restrict.policy`),
  the module proxies, print capture, warnings, the in-thread deadline. It holds on any OS.
- :mod:`.isolate` — the process layer: the killable worker, its fork server, its start, its
  channel, its resource limits and OS-level hardening, which must hold even if the restriction
  layer is escaped.

At this level sits what both share and what callers see: :mod:`.runner` (the interface and the
choice of runner), :mod:`.inline` (the step engine, run in the caller's thread or driven by the
worker), :mod:`.hostcall` (host functions in the namespace), :mod:`.texts` (every observation
text), :mod:`.fences` (the fence rules, shared with the loop and the CPython reference) and
:mod:`.repl_config` (the sandbox's configuration, :class:`ReplConfig` and its :class:`Limits`,
re-exported by :mod:`rlm_compat.config` where users import it).

Code outside the sandbox imports from here only. The names below are loaded on first use, so
``import rlm_compat`` pays only for what the facade needs (the host-call marker and the runner
interface); the worker machinery and RestrictedPython's compiler load when a session starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .hostcall import HostCall, host_call, namespace_listing
from .repl_config import (
    CONTEXT_SECONDS_PER_GB,
    ISOLATIONS,
    START_METHODS,
    Limits,
    ReplConfig,
    WorkerResourceLimits,
)
from .runner import Runner, make_runner

if TYPE_CHECKING:
    from .fences import Fence, fenced_blocks, scan_fences
    from .inline import InlineRunner
    from .isolate.hardening import available_layers, describe_host, syscall_number
    from .isolate.process import ProcessRunner
    from .isolate.spawn import start_worker
    from .isolate.zygote import recv_frame, send_frame
    from .restrict.allowlists import ALLOWED_MODULES
    from .restrict.modules import ModuleProxy, real_module

_LAZY = {
    "Fence": "fences",
    "fenced_blocks": "fences",
    "scan_fences": "fences",
    "InlineRunner": "inline",
    "ProcessRunner": "isolate.process",
    "available_layers": "isolate.hardening",
    "describe_host": "isolate.hardening",
    "syscall_number": "isolate.hardening",
    "start_worker": "isolate.spawn",
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
    "START_METHODS",
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
    "start_worker",
    "syscall_number",
]
