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

import os
import shutil
import subprocess
from pathlib import Path

import nox

PYTHONS = ["3.10", "3.11", "3.12", "3.13"]

OLDEST_PYTHON = PYTHONS[0]
# Not run on the oldest set: the browser tests (Chromium through playwright, a test tool that is
# newest in both runs; the HTML they drive is rendered by test_view.py on the floors too) and the
# soak (the sandbox under load, RestrictedPython's floor is covered by every sandbox test).
OLDEST_SKIPS = ("tests/test_view_browser.py", "tests/test_soak.py")

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


@nox.session(python=OLDEST_PYTHON)
def oldest(session: nox.Session) -> None:
    """The suite with every dependency at its floor: ``pip install -c FLOORS -e '.[test]'``."""
    session.env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    session.env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    floors = session.run("python", "scripts/dependency_floor.py", silent=True)
    constraints = Path(session.create_tmp()) / "floors.txt"
    constraints.write_text(str(floors), encoding="utf-8")
    session.log("dependency floors:\n" + str(floors))
    session.install("-q", "-c", str(constraints), "-e", ".[test]")
    session.run("python", "-m", "pip", "list", "--format=freeze", silent=False)
    ignores = [f"--ignore={path}" for path in OLDEST_SKIPS]
    session.run("python", "-m", "pytest", *ignores, *session.posargs)
