"""Find or make the ysz/recursive-llm clone that the live tests read from ``RLM_COMPAT_UPSTREAM``.

The live tests (drop-in suites, parser differential, REPL parity, conformance replay, API surface)
compare against the real upstream. So that they run on any machine, not only where someone cloned
it by hand, the hooks at the end (loaded by ``tests/conftest.py``) call :func:`resolve` once per
session, before the test modules are imported, and export the result:

1. ``RLM_COMPAT_UPSTREAM`` already set: used as it is (set it to an empty string for no live tests);
2. the git bundle ``../shared/upstream/recursive-llm.bundle`` beside the project: cloned;
3. GitHub (``RLM_COMPAT_UPSTREAM_URL`` overrides the address): cloned when the network allows;
4. otherwise none, and the live tests skip with the reason collected on the way — except under CI
   (``RLM_COMPAT_CI=1``, set by ``.ci/run``), where a missing or wrong checkout fails the run: a live
   test that skipped there would look like a pass.

A clone is cached under the system temp directory (one per user), checked out at 2fb46cc (the
tests read cc7a826 from its history), and reused while it has both commits and a clean tree.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

ENV = "RLM_COMPAT_UPSTREAM"
CI_ENV = "RLM_COMPAT_CI"
URL_ENV = "RLM_COMPAT_UPSTREAM_URL"
HOW_ENV = "RLM_COMPAT_UPSTREAM_HOW"
GITHUB = "https://github.com/ysz/recursive-llm"
PINNED = "2fb46cc"
COMMITS = ("2fb46cc", "cc7a826")
ROOT = Path(__file__).resolve().parent.parent
BUNDLE = ROOT.parent / "shared" / "upstream" / "recursive-llm.bundle"
CLONE_TIMEOUT = 180.0


@dataclass(frozen=True)
class Upstream:
    """Where the checkout is (None: there is none) and how it was found, or why not."""

    path: Path | None
    how: str


def _git(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true"}
    return subprocess.run(
        ["git", *args], capture_output=True, text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL
    )


def usable(path: Path) -> bool:
    """A clone with both pinned commits, at 2fb46cc, with nothing changed in its tree."""
    try:
        if any(_git("-C", str(path), "cat-file", "-e", f"{c}^{{commit}}").returncode for c in COMMITS):
            return False
        head = _git("-C", str(path), "rev-parse", "HEAD").stdout.strip()
        pinned = _git("-C", str(path), "rev-parse", f"{PINNED}^{{commit}}").stdout.strip()
        status = _git("-C", str(path), "status", "--porcelain")
    except (OSError, subprocess.TimeoutExpired):
        return False
    return bool(head) and head == pinned and status.returncode == 0 and not status.stdout.strip()


def _cache_root() -> Path:
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / f"rlm_compat-upstream-{uid}"


def _clone(source: str, cache: Path) -> tuple[Path | None, str]:
    """Clone ``source`` into a fresh directory, then move it into place (concurrent runs race safely)."""
    cache.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="clone-", dir=cache.parent))
    target = staging / "recursive-llm"
    failure = ""
    try:
        done = _git("clone", "-q", "--no-checkout", source, str(target), timeout=CLONE_TIMEOUT)
        if done.returncode != 0:
            failure = f"git clone {source} failed: {done.stderr.strip()[-300:]}"
        elif (done := _git("-C", str(target), "checkout", "-q", PINNED)).returncode != 0:
            failure = f"git checkout {PINNED} in a clone of {source} failed: {done.stderr.strip()[-300:]}"
    except subprocess.TimeoutExpired:
        failure = f"git clone {source} did not finish within {CLONE_TIMEOUT:.0f} s"
    except OSError as exc:
        failure = f"git could not run: {exc}"
    if failure:
        shutil.rmtree(staging, ignore_errors=True)
        return None, failure
    try:
        target.rename(cache)
    except OSError:  # another run put its clone there first, or an unusable one is in the way
        if not usable(cache):
            return target, ""
    shutil.rmtree(staging, ignore_errors=True)
    return cache, ""


def resolve() -> Upstream:
    """The checkout for the live tests, or None with the reason they skip."""
    given = os.environ.get(ENV)
    if given is not None:
        how = os.environ.get(HOW_ENV)
        if not given:
            return Upstream(None, how or f"{ENV} is set to an empty string (live upstream tests off)")
        return Upstream(Path(given), how or ENV)
    cache = _cache_root() / "recursive-llm"
    if usable(cache):
        return Upstream(cache, f"cached clone in {cache.parent}")
    reasons = []
    sources = []
    if BUNDLE.is_file():
        sources.append((str(BUNDLE), "the bundle beside the project"))
    else:
        reasons.append(f"no bundle at {BUNDLE}")
    url = os.environ.get(URL_ENV) or GITHUB
    sources.append((url, url))
    for source, label in sources:
        path, why = _clone(source, cache)
        if path is not None and usable(path):
            return Upstream(path, f"cloned from {label}")
        reasons.append(why or f"the clone of {label} lacks {' or '.join(COMMITS)}")
    return Upstream(None, "; ".join(reasons))


def under_ci() -> bool:
    return os.environ.get(CI_ENV) == "1"


def missing(reason: str) -> NoReturn:
    """Skip a live test for ``reason``; under CI fail it instead (see the module docstring)."""
    if under_ci():
        pytest.fail(f"{reason} ({CI_ENV}=1: the live upstream tests must run, not skip)", pytrace=False)
    pytest.skip(reason)


def export(upstream: Upstream) -> None:
    """Put the result where the tests and child processes (xdist workers too) read it."""
    os.environ[ENV] = str(upstream.path) if upstream.path else ""
    os.environ[HOW_ENV] = upstream.how


_FOUND: list[Upstream] = []


def pytest_configure(config: pytest.Config) -> None:
    """Resolve once per process; xdist workers inherit the exported path and reason."""
    _FOUND[:] = [resolve()]
    export(_FOUND[0])
    if _FOUND[0].path is None and under_ci():
        raise pytest.UsageError(f"{CI_ENV}=1 but no ysz/recursive-llm checkout could be had: {_FOUND[0].how}")


def pytest_report_header(config: pytest.Config) -> str:
    found = _FOUND[0]
    if found.path is None:
        return f"upstream checkout: none, the live upstream tests skip: {found.how}"
    return f"upstream checkout: {found.path} ({found.how})"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Live tests (marker ``upstream``) without a checkout skip with the reason none could be had."""
    if _FOUND and _FOUND[0].path is None:
        skip = pytest.mark.skip(reason=f"no ysz/recursive-llm checkout: {_FOUND[0].how}")
        for item in items:
            if item.get_closest_marker("upstream"):
                item.add_marker(skip, append=False)
