"""The restricted execution machinery behind :class:`rlm_compat.repl.REPLExecutor`.

Layout (transformer and guards kept apart, as in RestrictedPython): :mod:`.prep` turns a
response into restricted bytecode, :mod:`.guards` holds the runtime guards, :mod:`.policy`
assembles them into the builtins mapping, :mod:`.modules` the module proxies, :mod:`.output`
print capture, :mod:`.deadline` timeouts, and :mod:`.hostcall` the marker for host functions
placed in the namespace.
"""

from __future__ import annotations

from .fences import fenced_blocks
from .hardening import available_layers
from .hostcall import HostCall, host_call

__all__ = ["HostCall", "available_layers", "fenced_blocks", "host_call"]
