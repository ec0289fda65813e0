"""Run a recursive-llm test suite, unmodified, against rlm_compat with ``rlm`` aliased.

Two sources: a ysz/recursive-llm checkout (2fb46cc, cc7a826: its ``tests/`` as they are), or a
released version's sdist fetched from the package registry with pip into a temporary directory
(``recursive-llm==0.5.0``: its own ``tests/``, run with that version's API semantics selected).
Nothing of upstream's is copied into this repository and its own ``src/`` is never imported:
pytest starts in a subprocess with the alias plugin loaded before collection, and the
subprocess gets this very rlm_compat first on its path.

A released suite also tests the release's internals (its Codex transport, private helpers, its
worker function); those tests are listed one by one, each with its reason, in
``dropin_out_of_scope.toml`` and reported as out of scope, never counted as passes.

The release's system prompt is compared too (its suite never checks it, yet it is what a model
sees): its ``prompts.py`` is run by file path in a subprocess, outside the alias, over a grid of
context sizes, depths and ``max_depth`` values, and each text must equal rlm_compat's for that
release's ``prompt_version``; the result is one more row, ``rlm_compat::system_prompt``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from xml.etree import ElementTree

from ..compat import API_ENV, resolve_api
from ..prompts import build_system_prompt
from .shared.package_paths import import_root
from .shared.tooling_errors import ToolUsageError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]

__all__ = [
    "RELEASES",
    "Outcome",
    "Release",
    "SuiteReport",
    "compare_release_prompt",
    "download_release",
    "out_of_scope",
    "run_release_tests",
    "run_upstream_tests",
    "whole_files_out_of_scope",
]

PROFILES = ("fixed", "upstream")
OUT_OF_SCOPE_FILE = Path(__file__).with_name("dropin_out_of_scope.toml")


@dataclasses.dataclass(frozen=True)
class Release:
    """A released recursive-llm whose sdist carries its tests, and the API semantics it needs."""

    requirement: str
    api: str
    prompt_version: str | None = None


RELEASES: Mapping[str, Release] = {
    "0.5.0": Release("recursive-llm==0.5.0", api="0.5", prompt_version="0.5.0"),
}
"""Versions ``rlm-compat dropin-tests --release`` knows (each needs an out-of-scope list)."""


@dataclasses.dataclass(frozen=True)
class Outcome:
    """One test's result: ``passed``, ``failed``, ``skipped`` or ``out_of_scope`` (with why)."""

    test_id: str
    status: str
    detail: str = ""


@dataclasses.dataclass(frozen=True)
class SuiteReport:
    """Every test's outcome, grouped by file for the per-file table."""

    outcomes: tuple[Outcome, ...]

    def by_file(self) -> dict[str, dict[str, int]]:
        """``{file: {status: count}}`` in file order."""
        table: dict[str, dict[str, int]] = {}
        for outcome in self.outcomes:
            counts = table.setdefault(outcome.test_id.split("::", 1)[0], {})
            counts[outcome.status] = counts.get(outcome.status, 0) + 1
        return table

    @property
    def failures(self) -> tuple[Outcome, ...]:
        """In-scope tests that failed or errored (a module that failed to import counts once)."""
        return tuple(o for o in self.outcomes if o.status == "failed")

    def render(self) -> str:
        """The per-file table, then each failing test id with the first line of its error."""
        statuses = ("passed", "failed", "skipped", "out_of_scope")
        table = self.by_file()
        width = max([len("file"), *(len(f) for f in table)])
        lines = [f"{'file':<{width}}  " + "  ".join(f"{s:>12}" for s in statuses)]
        for file, counts in table.items():
            lines.append(f"{file:<{width}}  " + "  ".join(f"{counts.get(s, 0):>12}" for s in statuses))
        totals = {s: sum(c.get(s, 0) for c in table.values()) for s in statuses}
        lines.append(f"{'total':<{width}}  " + "  ".join(f"{totals[s]:>12}" for s in statuses))
        if self.failures:
            lines.append("")
            lines.append("failed:")
            lines.extend(f"  {o.test_id}: {o.detail}" for o in self.failures)
        return "\n".join(lines)


def run_upstream_tests(
    checkout: str | os.PathLike[str],
    *,
    profile: str = "fixed",
    api: str | None = None,
    pytest_args: Sequence[str] = (),
    python: str | None = None,
) -> int:
    """Run ``<checkout>/tests`` with ``rlm`` aliased to rlm_compat; returns pytest's exit code.

    ``api``: the API semantics preset to select (``"2fb46cc"`` default, ``"0.5"``), see
    :mod:`rlm_compat.compat`; it reaches the tests through ``$RLM_COMPAT_API``.
    """
    root = _checkout_root(checkout)
    return subprocess.call(_pytest_command(root, pytest_args, python), cwd=root, env=_env(profile, api))


def run_release_tests(
    version: str = "0.5.0",
    *,
    profile: str = "fixed",
    pytest_args: Sequence[str] = (),
    python: str | None = None,
    workdir: str | os.PathLike[str] | None = None,
) -> SuiteReport:
    """Download ``recursive-llm==version``'s sdist and run its tests against rlm_compat.

    Its API semantics are selected; tests listed out of scope are deselected and reported as
    such. ``workdir``: where to download and unpack (default: a temporary directory, removed).
    """
    release = RELEASES.get(version)
    if release is None:
        raise ToolUsageError(
            f"no drop-in test setup for recursive-llm {version!r}; known: {sorted(RELEASES)}"
        )
    skipped = out_of_scope(version)
    ignored = whole_files_out_of_scope(version)
    with _directory(workdir) as where:
        root = download_release(release.requirement, where)
        junit = where / "junit.xml"
        args = [
            "-q",
            "--continue-on-collection-errors",
            "-o",
            "addopts=",
            f"--junitxml={junit}",
            *(f"--ignore={path}" for path in ignored),
            *(f"--deselect={test_id}" for test_id in sorted(skipped)),
            *pytest_args,
        ]
        code = subprocess.call(_pytest_command(root, args, python), cwd=root, env=_env(profile, release.api))
        if not junit.is_file():
            raise ToolUsageError(f"pytest could not run {release.requirement}'s tests (exit {code})")
        ran = junit_outcomes(junit)
        if release.prompt_version is not None:
            ran.append(compare_release_prompt(root, release.prompt_version, python))
    listed = [Outcome(t, "out_of_scope", why) for t, why in sorted(skipped.items())]
    return SuiteReport(tuple(sorted([*ran, *listed], key=lambda o: o.test_id)))


PROMPT_GRID = tuple(
    (size, depth, max_depth) for size in (0, 7, 1_234_567) for max_depth in range(4) for depth in range(4)
)
"""(context size, depth, max_depth) combinations compared with a release's system prompt."""

_PROMPT_SCRIPT = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("_release_prompts", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
grid = json.loads(sys.argv[2])
print(json.dumps([module.build_system_prompt(s, depth=d, max_depth=m) for s, d, m in grid]))
"""


def compare_release_prompt(root: Path, prompt_version: str, python: str | None = None) -> Outcome:
    """The release's ``build_system_prompt`` against rlm_compat's ``prompt_version`` over
    :data:`PROMPT_GRID`: row ``rlm_compat::system_prompt``, failed at the first difference."""
    test_id = "rlm_compat::system_prompt"
    found = [p for p in (root / "src" / "rlm" / "prompts.py", root / "rlm" / "prompts.py") if p.is_file()]
    if not found:
        return Outcome(test_id, "skipped", "the release has no rlm/prompts.py")
    done = subprocess.run(
        [python or sys.executable, "-I", "-c", _PROMPT_SCRIPT, str(found[0]), json.dumps(PROMPT_GRID)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if done.returncode != 0:
        return Outcome(test_id, "failed", f"the release's prompts.py failed: {done.stderr.strip()[-300:]}")
    texts = json.loads(done.stdout)
    for (size, depth, max_depth), theirs in zip(PROMPT_GRID, texts, strict=True):
        ours = build_system_prompt(size, depth, max_depth, version=prompt_version)
        if ours != theirs:
            at = next(i for i, (a, b) in enumerate(zip(ours + "\0", theirs + "\0", strict=False)) if a != b)
            start = max(0, at - 20)
            return Outcome(
                test_id,
                "failed",
                f"differs for size={size} depth={depth} max_depth={max_depth} at character {at}: "
                f"ours {ours[start : at + 40]!r}, the release's {theirs[start : at + 40]!r}",
            )
    return Outcome(test_id, "passed", f"identical for {len(PROMPT_GRID)} combinations")


def download_release(requirement: str, dest: Path) -> Path:
    """Fetch ``requirement``'s sdist with pip (no dependencies, no wheel) into ``dest``; unpack it."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "-q"]
    done = subprocess.run([*command, "-d", str(dest), requirement], capture_output=True, text=True)
    archives = sorted(dest.glob("*.tar.gz"))
    if done.returncode != 0 or not archives:
        raise ToolUsageError(
            f"could not download the sdist of {requirement} (pip exit {done.returncode}): "
            f"{done.stderr.strip()[-500:]}"
        )
    with tarfile.open(archives[0]) as archive:
        top = {m.name.split("/", 1)[0] for m in archive.getmembers()}
        if len(top) != 1:
            raise ToolUsageError(f"{archives[0].name} does not unpack into one directory")
        if not hasattr(tarfile, "data_filter"):
            raise ToolUsageError("unpacking a downloaded sdist safely needs Python >= 3.10.12")
        archive.extractall(dest, filter="data")
    return _checkout_root(dest / top.pop())


def out_of_scope(version: str) -> dict[str, str]:
    """``{test id: reason}`` for ``version``: its tests of internals rlm_compat does not reproduce."""
    data = tomllib.loads(OUT_OF_SCOPE_FILE.read_text(encoding="utf-8"))
    entries = data.get(version, {}).get("test", [])
    found: dict[str, str] = {}
    for entry in entries:
        test_id, reason = entry.get("id"), entry.get("reason")
        if not test_id or not reason or "*" in test_id:
            raise ToolUsageError(f"{OUT_OF_SCOPE_FILE.name}: every entry needs an exact id and a reason")
        found[test_id] = reason
    return found


def whole_files_out_of_scope(version: str) -> list[str]:
    """Test files every one of whose tests is listed out of scope (they are not even imported).

    A ``[[<version>.file]]`` entry gives a file's test count as the release collects it; it
    counts only when exactly that many ids of the file are listed, so no test hides behind it.
    """
    data = tomllib.loads(OUT_OF_SCOPE_FILE.read_text(encoding="utf-8"))
    listed = out_of_scope(version)
    files = []
    for entry in data.get(version, {}).get("file", []):
        path, count = entry.get("path"), entry.get("tests")
        ids = [t for t in listed if t.startswith(f"{path}::")]
        if not path or len(ids) != count:
            raise ToolUsageError(
                f"{OUT_OF_SCOPE_FILE.name}: file {path!r} has {count} tests but {len(ids)} ids are listed"
            )
        files.append(path)
    return files


def junit_outcomes(path: Path) -> list[Outcome]:
    """Outcomes from pytest's JUnit XML, with test ids as pytest prints them."""
    outcomes = []
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        classname, name = case.get("classname", ""), case.get("name", "")
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        if problem is not None:
            status, detail = "failed", (problem.get("message") or "").strip().splitlines()[:1]
        elif case.find("skipped") is not None:
            status, detail = "skipped", []
        else:
            status, detail = "passed", []
        outcomes.append(Outcome(_test_id(classname, name), status, detail[0][:200] if detail else ""))
    return outcomes


def _test_id(classname: str, name: str) -> str:
    """``tests.test_x.TestY`` + ``test_z`` -> ``tests/test_x.py::TestY::test_z``.

    A module that failed to import is reported with an empty class name and the module as name.
    """
    if not classname:
        return name.replace(".", "/") + ".py"
    parts = classname.split(".")
    for cut in range(len(parts), 0, -1):
        if parts[cut - 1].startswith("test"):
            path = "/".join(parts[:cut]) + ".py"
            return "::".join([path, *parts[cut:], name])
    return f"{classname}::{name}"


def _checkout_root(checkout: str | os.PathLike[str]) -> Path:
    root = Path(checkout).resolve()
    if not (root / "tests").is_dir() or not (root / "src" / "rlm").is_dir():
        raise ToolUsageError(
            f"{root} does not look like a ysz/recursive-llm checkout (need tests/ and src/rlm/)"
        )
    return root


def _pytest_command(root: Path, pytest_args: Sequence[str], python: str | None) -> list[str]:
    return [
        python or sys.executable,
        "-m",
        "pytest",
        "-p",
        "rlm_compat._dropin_plugin",
        "-p",
        "no:cacheprovider",
        "-o",
        "pythonpath=",  # the suite's own src/ must never be importable
        "--rootdir",
        str(root),
        str(root / "tests"),
        *pytest_args,
    ]


def _env(profile: str, api: str | None) -> dict[str, str]:
    """The subprocess's environment: profile, API preset, and this rlm_compat first on the path."""
    if profile not in PROFILES:
        raise ToolUsageError(f"profile must be one of {list(PROFILES)}, not {profile!r}")
    env = dict(os.environ)
    env["RLM_COMPAT_PROFILE"] = profile
    env[API_ENV] = resolve_api(api).name
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    env["PYTHONPATH"] = str(import_root())
    env.pop("RLM_COMPAT_ALIAS_SHIM", None)
    return env


class _directory:
    """A given directory, or a temporary one removed afterwards."""

    def __init__(self, given: str | os.PathLike[str] | None) -> None:
        self._given = None if given is None else Path(given)
        self._temp: tempfile.TemporaryDirectory[str] | None = None

    def __enter__(self) -> Path:
        if self._given is not None:
            self._given.mkdir(parents=True, exist_ok=True)
            return self._given
        self._temp = tempfile.TemporaryDirectory(prefix="rlm_compat-dropin-")
        return Path(self._temp.name)

    def __exit__(self, *exc: object) -> None:
        if self._temp is not None:
            self._temp.cleanup()
