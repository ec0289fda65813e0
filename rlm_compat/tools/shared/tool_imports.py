"""Custom tools named on a command line or in a config file: ``module:function`` or ``NAME=module:function``.

``rlm-compat run --tool`` and a served model's ``tools = [...]`` name Python functions importable
where the command runs (the current directory is on the path, as for ``python -m``). Each is
imported once, when the command starts, and given to the RLM as a custom tool
(:mod:`rlm_compat.custom_tools`): it runs in this process, called with plain data from the REPL.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Iterable
from typing import Any

from .tooling_errors import ToolUsageError

__all__ = ["import_tools", "parse_tool_spec"]


def parse_tool_spec(spec: str) -> tuple[str | None, str, str]:
    """``(name or None, module, attribute path)`` of ``[NAME=]module:function``."""
    name, _, target = spec.rpartition("=") if "=" in spec else (None, "", spec)
    module, colon, attribute = target.partition(":")
    if not colon or not module or not attribute:
        raise ToolUsageError(f"tool {spec!r}: expected module:function or NAME=module:function")
    return (name or None), module, attribute


def import_tools(specs: Iterable[str]) -> dict[str, Callable[..., Any]]:
    """The functions ``specs`` name, by tool name (the function's own name unless ``NAME=`` says)."""
    tools: dict[str, Callable[..., Any]] = {}
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    for spec in specs:
        name, module_name, attribute = parse_tool_spec(spec)
        try:
            target: Any = importlib.import_module(module_name)
            for part in attribute.split("."):
                target = getattr(target, part)
        except Exception as exc:  # the module's own code ran: whatever it raised, the tool is not there
            raise ToolUsageError(f"tool {spec!r}: cannot import it ({type(exc).__name__}: {exc})") from None
        if not callable(target):
            kind = type(target).__name__
            raise ToolUsageError(f"tool {spec!r}: {module_name}:{attribute} is a {kind}, not a function")
        name = name or str(getattr(target, "__name__", attribute.rsplit(".", 1)[-1]))
        if name in tools:
            raise ToolUsageError(f"tool {spec!r}: a second tool named {name!r} (give it NAME=...)")
        tools[name] = target
    return tools
