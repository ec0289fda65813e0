"""The restricted execution machinery behind :class:`rlm_compat.repl.REPLExecutor`."""

from __future__ import annotations

from .hostcall import HostCall, host_call

__all__ = ["HostCall", "host_call"]
