"""``rlm-compat conformance --setup``: throwaway venvs for the registry's PyPI peers.

A peer named without an interpreter (``--impl rlms-0.1.1``, ``--impl dspy-rlm``) gets a venv
``DIR/venv-NAME`` made with this Python's ``venv`` and pip from PyPI (reused when it exists), and
dspy-rlm also its offline Deno + Pyodide runtime ``DIR/dspy-runtime`` (npm; see
``rlm_compat.tools.research.dspy_runtime``). The layout is ``rlm-compat compare --setup``'s, so
one ``--setup-dir`` serves both commands.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from ..tool_errors import ToolUsageError
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
            venv = directory / f"venv-{entry.name}"
            if not (venv / "bin" / "python").exists():
                progress(f"{entry.name}: python -m venv {venv} && pip install {' '.join(entry.requirements)}")
                _run([sys.executable, "-m", "venv", str(venv)], f"creating the venv of {entry.name}")
                _run(
                    [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", *entry.requirements],
                    f"installing {' '.join(entry.requirements)} for {entry.name}",
                )
            target = str(venv / "bin" / "python")
        if entry.runtime and not entry.runtime_dir:
            entry = dataclasses.replace(entry, runtime_dir=str(_runtime(target, directory, progress)))
        out.append((entry, target))
    return out


def _runtime(python: str, directory: Path, progress: Callable[[str], None]) -> Path:
    try:
        return find_dspy_runtime(python)
    except ToolUsageError:
        pass
    from ..research.dspy_runtime import prepare_dspy_runtime

    progress(f"dspy-rlm: Deno and Pyodide from npm into {directory / 'dspy-runtime'}")
    return prepare_dspy_runtime(directory / "dspy-runtime", python)


def _run(argv: list[str], what: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ToolUsageError(f"--setup failed {what}: {(done.stderr or done.stdout).strip()[-800:]}")
