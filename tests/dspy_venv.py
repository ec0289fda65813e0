"""A venv that runs dspy.RLM 3.4.1 offline, for the tests that start the real thing.

dspy with ``pip install --no-deps --target`` (no resolver run: the test extras already hold the
rest of its requirements) and a venv whose ``.pth`` sees those packages and this environment's.
:data:`ENABLED` (``RLM_COMPAT_DSPY_TESTS=1``, set by ``.ci/run`` for the default Python) switches
the tests on; under ``RLM_COMPAT_CI=1`` a setup that fails is a failure, never a skip.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ENABLED = os.environ.get("RLM_COMPAT_DSPY_TESTS") == "1"
SKIP_REASON = "set RLM_COMPAT_DSPY_TESTS=1 (CI does, on the default Python)"

DEPENDENCIES = ("orjson", "diskcache", "json-repair", "tenacity", "cachetools", "cloudpickle", "gepa==0.1.4")
"""dspy 3.4.1's requirements beyond what the test extras already install."""


def need(condition: bool, why: str) -> None:
    """Skip when ``condition`` fails, or fail under CI."""
    if not condition:
        if os.environ.get("RLM_COMPAT_CI") == "1":
            pytest.fail(f"RLM_COMPAT_DSPY_TESTS=1 under CI, but {why}")
        pytest.skip(why)


def dspy_python(tmp_path: Path) -> str:
    """The python of a venv seeing this environment's packages plus dspy 3.4.1."""
    target = tmp_path / "dspy-packages"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target)]
    done = subprocess.run([*pip, "dspy==3.4.1", *DEPENDENCIES], capture_output=True, text=True, check=False)
    need(done.returncode == 0, f"pip could not fetch dspy 3.4.1: {done.stderr.strip()[-400:]}")
    venv = tmp_path / "venv-dspy-rlm"
    made = subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)],
        capture_output=True,
        text=True,
        check=False,
    )
    need(made.returncode == 0, f"python -m venv failed: {made.stderr}")
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    (venv / "lib" / version / "site-packages" / "rlm_test.pth").write_text(
        f"{target}\n{sysconfig.get_paths()['purelib']}\n{sysconfig.get_paths()['platlib']}\n"
    )
    return str(venv / "bin" / "python")
