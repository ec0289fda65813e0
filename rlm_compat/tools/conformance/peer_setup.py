"""``rlm-compat conformance --setup``: throwaway venvs for the registry's PyPI peers.

A peer named without an interpreter (``--impl rlms-0.1.1``, ``--impl dspy-rlm``) gets a venv
``DIR/venv-NAME`` made with this Python's ``venv`` and pip from PyPI (reused when it exists), and
dspy-rlm also its offline Deno + Pyodide runtime ``DIR/dspy-runtime`` (npm; see
``rlm_compat.tools.conformance.dspy_runtime``). The layout is ``rlm-compat compare --setup``'s, so
one ``--setup-dir`` serves both commands.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path

from ..shared.peer_venv import peer_venv
from ..shared.tooling_errors import ToolUsageError
from .implementations import Implementation, find_dspy_runtime

__all__ = ["setup_peers"]

Entry = tuple[Implementation, "str | None"]


def setup_peers(
    entries: Sequence[Entry], directory: Path, progress: Callable[[str], None] = lambda message: None
) -> list[Entry]:
    """``entries`` (registry entry, interpreter) with a venv (and runtime) for each that needs one."""
    out: list[Entry] = []
    for entry, target in entries:
        if not entry.requirements:
            out.append((entry, target))
            continue
        if target is None:
            target = peer_venv(directory, entry.name, entry.requirements, progress)
        if entry.runtime and not entry.runtime_dir:
            entry = dataclasses.replace(entry, runtime_dir=str(_runtime(target, directory, progress)))
        out.append((entry, target))
    return out


def _runtime(python: str, directory: Path, progress: Callable[[str], None]) -> Path:
    try:
        return find_dspy_runtime(python)
    except ToolUsageError:
        pass
    from .dspy_runtime import prepare_dspy_runtime

    progress(f"dspy-rlm: Deno and Pyodide from npm into {directory / 'dspy-runtime'}")
    return prepare_dspy_runtime(directory / "dspy-runtime", python)
