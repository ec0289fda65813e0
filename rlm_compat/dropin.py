"""Run ysz/recursive-llm's own test suite against rlm_compat, unmodified.

The tests import ``rlm``, ``rlm.core``, ``rlm.repl``, ``rlm.parser`` ... and patch
``rlm.core.litellm.acompletion``. :func:`install_alias` makes those names resolve to rlm_compat's
modules in ``sys.modules``; :func:`run_upstream_tests` starts pytest on a checkout's ``tests/``
in a subprocess with the alias installed through a tiny pytest plugin, so nothing of upstream's is
copied and its own ``src/`` is never imported.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from .errors import ConfigurationError

__all__ = ["ALIASED_MODULES", "install_alias", "run_upstream_tests"]

ALIASED_MODULES: tuple[str, ...] = ("core", "repl", "parser", "prompts", "types")


def install_alias(name: str = "rlm") -> None:
    """Make ``import rlm`` (and ``rlm.core`` ...) give rlm_compat's modules in this process."""
    package = importlib.import_module("rlm_compat")
    sys.modules[name] = package
    for sub in ALIASED_MODULES:
        sys.modules[f"{name}.{sub}"] = importlib.import_module(f"rlm_compat.{sub}")


def run_upstream_tests(
    checkout: str | os.PathLike[str],
    *,
    profile: str = "fixed",
    pytest_args: Sequence[str] = (),
    python: str | None = None,
) -> int:
    """Run ``<checkout>/tests`` with ``rlm`` aliased to rlm_compat; returns pytest's exit code."""
    root = Path(checkout).resolve()
    tests = root / "tests"
    if not tests.is_dir() or not (root / "src" / "rlm").is_dir():
        raise ConfigurationError(
            f"{root} does not look like a ysz/recursive-llm checkout (need tests/ and src/rlm/)"
        )
    if profile not in ("fixed", "upstream"):
        raise ConfigurationError(f"profile must be 'fixed' or 'upstream', not {profile!r}")
    env = dict(os.environ)
    env["RLM_COMPAT_PROFILE"] = profile
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    env.pop("PYTHONPATH", None)
    command = [
        python or sys.executable,
        "-m",
        "pytest",
        "-p",
        "rlm_compat._dropin_plugin",
        "-p",
        "no:cacheprovider",
        "--rootdir",
        str(root),
        str(tests),
        *pytest_args,
    ]
    return subprocess.call(command, cwd=root, env=env)
