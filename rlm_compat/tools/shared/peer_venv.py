"""Throwaway venvs for other implementations, as ``--setup`` makes them (conformance and compare).

``DIR/venv-NAME``, made with this Python's ``venv`` and filled by pip from PyPI, reused when it
exists; the layout is shared, so one ``--setup-dir`` serves ``rlm-compat conformance`` and
``rlm-compat compare``.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from .tooling_errors import ToolUsageError

__all__ = ["peer_venv", "setup_step"]


def peer_venv(
    directory: Path, name: str, requirements: Sequence[str], progress: Callable[[str], None]
) -> str:
    """The python of ``directory/venv-name`` holding ``requirements`` (made now if missing)."""
    venv = directory / f"venv-{name}"
    python = venv / "bin" / "python"
    if not python.exists():
        progress(f"{name}: python -m venv {venv} && pip install {' '.join(requirements)}")
        setup_step([sys.executable, "-m", "venv", str(venv)], f"creating the venv of {name}")
        setup_step(
            [str(python), "-m", "pip", "install", "-q", *requirements],
            f"installing {' '.join(requirements)} for {name}",
        )
    return str(python)


def setup_step(argv: list[str], what: str) -> None:
    """Run one setup command; a failure is a ToolUsageError quoting the end of its output."""
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ToolUsageError(f"--setup failed {what}: {(done.stderr or done.stdout).strip()[-800:]}")
