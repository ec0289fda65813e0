"""The codebase stays ruff- and mypy-clean: checked here so CI fails loudly when it is not."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True)


@pytest.mark.skipif(
    shutil.which("ruff") is None and not Path(sys.executable).with_name("ruff").exists(),
    reason="ruff is not installed (pip install -e '.[test]')",
)
def test_ruff_clean() -> None:
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    paths = [p for p in ("rlm_compat", "tests", "benchmarks", "scripts", "noxfile.py") if (ROOT / p).exists()]
    result = _run(ruff, "check", *paths)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.skipif(
    shutil.which("ruff") is None and not Path(sys.executable).with_name("ruff").exists(),
    reason="ruff is not installed (pip install -e '.[test]')",
)
def test_ruff_format_clean() -> None:
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    paths = [p for p in ("rlm_compat", "tests", "benchmarks", "scripts", "noxfile.py") if (ROOT / p).exists()]
    result = _run(ruff, "format", "--check", *paths)
    assert result.returncode == 0, "run `ruff format` on:\n" + result.stdout + result.stderr


# once_per_ci: [tool.mypy] pins python_version = "3.10", so every interpreter checks the same thing
# (~50 s cold each)
@pytest.mark.once_per_ci
def test_mypy_strict_clean() -> None:
    pytest.importorskip("mypy", reason="mypy is not installed (pip install -e '.[test]')")
    result = _run(sys.executable, "-m", "mypy")
    assert result.returncode == 0, result.stdout + result.stderr
