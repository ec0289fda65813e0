"""The test matrix: README command 2 (``pip install -e '.[test]'`` then ``python -m pytest``) on
every supported Python.

``nox`` runs all four; ``nox -s tests-3.12`` one of them. ``nox -s oldest`` runs the suite on the
oldest Python with every dependency at the floor of its range (scripts/dependency_floor.py), the
other half of the dependency policy: the ranges in pyproject.toml are the ones tested.
``.ci/run`` runs the README's command on the default Python itself and the rest through these
sessions. Interpreters are found on
``PATH`` and, where pyenv is installed, in its versions directory (pyenv's shims only expose the
selected version, so ``python3.10`` is otherwise not found even when pyenv has it).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import nox

PYTHONS = ["3.10", "3.11", "3.12", "3.13"]

OLDEST_PYTHON = PYTHONS[0]
# Not run on the oldest set, which is also the oldest Python's only run in .ci/run: what does not
# change with a dependency's version nor with 3.10 against the newer Pythons — the browser tests
# (Chromium through playwright; the HTML they drive is rendered by test_view.py on the floors too),
# the worker's soak (the same transport code on every Python; the conformance
# run still checks every fixture against RestrictedPython's floor, in the worker), the OS
# hardening's escape corpus (the kernel's) and the xdist scheduling check (a test tool's).
OLDEST_SKIPS = (
    "tests/tools/view/test_view_browser.py",
    "tests/sandbox/isolate/test_soak.py",
    "tests/tools/test_escape_assumed.py",
    "tests/test_xdist_plan.py",
)

nox.options.sessions = ["tests"]
nox.options.default_venv_backend = "venv"
nox.options.error_on_missing_interpreters = True


def _pyenv_bins() -> list[str]:
    """``bin`` directories of pyenv's installed versions matching PYTHONS, newest patch first."""
    pyenv = shutil.which("pyenv")
    root = os.environ.get("PYENV_ROOT")
    if not root and pyenv:
        try:
            root = subprocess.run([pyenv, "root"], capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            root = None
    if not root and (Path.home() / ".pyenv").is_dir():  # installed, but not on this PATH
        root = str(Path.home() / ".pyenv")
    if not root or not (Path(root) / "versions").is_dir():
        return []
    bins = []
    for version in PYTHONS:
        found = sorted(
            (
                p
                for p in (Path(root) / "versions").glob(f"{version}.*")
                if (p / "bin" / f"python{version}").exists()
            ),
            key=lambda p: [int(part) if part.isdigit() else 0 for part in p.name.split(".")],
            reverse=True,
        )
        if found:
            bins.append(str(found[0] / "bin"))
    return bins


# Ahead of pyenv's shims, which would answer "python3.10: command not found" for an unselected version.
os.environ["PATH"] = os.pathsep.join([*_pyenv_bins(), os.environ.get("PATH", "")])


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    """README command 2 in a fresh venv of this Python; extra arguments go to pytest."""
    session.env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    session.env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    session.install("-q", "-e", ".[test]")
    session.run("python", "-m", "pytest", *session.posargs)


@nox.session
def docs(session: nox.Session) -> None:
    """The API reference and docs/ pages with warnings as errors (what .ci/run checks), built in
    a fresh venv of nox's own Python into the session's temporary directory (or the one given)."""
    session.env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    session.install("-q", "-e", ".[docs]")
    out = session.posargs[0] if session.posargs else str(Path(session.create_tmp()) / "html")
    session.run("python", "-m", "sphinx", "-q", "-W", "--keep-going", "-n", "-b", "html", "docs", out)


def _floor_script() -> Any:
    spec = importlib.util.spec_from_file_location(
        "dependency_floor", Path(__file__).parent / "scripts" / "dependency_floor.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@nox.session(python=OLDEST_PYTHON)
def oldest(session: nox.Session) -> None:
    """The suite with every dependency at its floor: ``pip install -c FLOORS -e '.[test]'``."""
    session.env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    session.env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    # computed here, by nox's own interpreter: the fresh venv has no TOML reader on 3.10
    floors = "".join(pin + "\n" for pin in _floor_script().floors())
    constraints = Path(session.create_tmp()) / "floors.txt"
    constraints.write_text(floors, encoding="utf-8")
    session.log("dependency floors:\n" + floors)
    session.install("-q", "-c", str(constraints), "-e", ".[test]")
    session.run("python", "-m", "pip", "list", "--format=freeze", silent=False)
    ignores = [f"--ignore={path}" for path in OLDEST_SKIPS]
    session.run("python", "-m", "pytest", *ignores, *session.posargs)
