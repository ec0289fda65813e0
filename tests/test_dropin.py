"""Upstream's own test suite, unmodified, against rlm_compat (needs RLM_COMPAT_UPSTREAM).

RLM_COMPAT_UPSTREAM is a ysz/recursive-llm git clone (tests at 2fb46cc and cc7a826 are exported
from it with ``git archive``, read-only) or a plain checkout (its tests as they are).
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from xml.etree import ElementTree

import pytest

from rlm_compat.tools.dropin_tests import run_upstream_tests

UPSTREAM = os.environ.get("RLM_COMPAT_UPSTREAM")
pytestmark = pytest.mark.skipif(
    not UPSTREAM, reason="RLM_COMPAT_UPSTREAM (a ysz/recursive-llm checkout) is not set"
)
# once_per_ci: cc7a826 changes 2fb46cc's API names, prompt text and one model parameter, not its REPL:
# nothing there varies with the Python version (2fb46cc's suite runs on every Python).
COMMITS = ["2fb46cc", pytest.param("cc7a826", marks=pytest.mark.once_per_ci)]


def _export(commit: str, dest: Path) -> Path:
    assert UPSTREAM
    source = Path(UPSTREAM)
    if not (source / ".git").exists():
        return source
    archive = subprocess.run(
        ["git", "-C", str(source), "archive", "--format=tar", commit, "tests", "src", "pyproject.toml"],
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def _outcomes(checkout: Path, profile: str, tmp_path: Path) -> dict[str, str]:
    report = tmp_path / f"{profile}.txt"
    code = run_upstream_tests(
        checkout, profile=profile, pytest_args=["-q", "-rA", "-o", "addopts=", f"--junitxml={report}.xml"]
    )
    assert code in (0, 1), f"pytest could not run upstream's tests (exit {code})"
    return _junit_outcomes(Path(f"{report}.xml"))


def _junit_outcomes(path: Path) -> dict[str, str]:
    outcomes = {}
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        failed = case.find("failure") is not None or case.find("error") is not None
        skipped = case.find("skipped") is not None
        status = "failed" if failed else "skipped" if skipped else "passed"
        outcomes[f"{case.get('classname')}::{case.get('name')}"] = status
    return outcomes


@pytest.mark.parametrize("commit", COMMITS)
def test_all_upstream_tests_pass_in_profile_fixed(commit: str, tmp_path: Path) -> None:
    checkout = _export(commit, tmp_path / commit)
    outcomes = _outcomes(checkout, "fixed", tmp_path)
    assert len(outcomes) == 43
    assert {k: v for k, v in outcomes.items() if v != "passed"} == {}


# once_per_ci: upstream's own behaviour on every Python is in the conformance fixtures recorded
# under each one and replayed live by test_conformance.py; this runs upstream's suite itself (an
# interpreter importing litellm, ~20 s of CPU) to compare outcomes, on the default Python.
@pytest.mark.once_per_ci
@pytest.mark.parametrize("commit", COMMITS)
def test_profile_upstream_matches_upstream_itself(commit: str, tmp_path: Path) -> None:
    checkout = _export(commit, tmp_path / commit)
    ours = _outcomes(checkout, "upstream", tmp_path)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": str(checkout / "src")}
    junit = tmp_path / "theirs.xml"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-o",
            "addopts=",
            f"--junitxml={junit}",
            str(checkout / "tests"),
        ],
        cwd=checkout,
        env=env,
        capture_output=True,
    )
    theirs = _junit_outcomes(junit)
    assert len(theirs) == 43
    assert ours == theirs
