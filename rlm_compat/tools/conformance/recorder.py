"""``rlm-compat record``: run the inputs against upstream checkouts and write the fixtures.

The only writer of expectations. For each Python given, it starts the driver (``driver.py``) in
that interpreter with a checkout's ``src`` on ``sys.path`` and records REPL, loop and parser cases.
Loop cases go to the checkout matching their ``prompt_version`` (2fb46cc or cc7a826); REPL and
parser cases to the 2fb46cc checkout. REPL and loop cases are recorded twice, under
``PYTHONHASHSEED`` 0 and 1; a case whose result differs is marked ``hash_sensitive`` (its output
shows set order) and compared only by runners that use seed 0.

Checkouts are only read: never checked out, never written (no bytecode either). ``--check``
records into a temporary directory and fails on any byte of difference.
"""

from __future__ import annotations

import concurrent.futures
import json
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..shared.tooling_errors import ToolUsageError
from . import inputs as _inputs
from .fixtures import (
    PROVENANCE,
    FixtureSet,
    fixture_name,
    read_jsonl,
    sha256_file,
    write_jsonl,
)
from .protocol import DriverProcess

__all__ = [
    "UPSTREAM_REPOSITORY",
    "Checkout",
    "RecordError",
    "check",
    "diff_dirs",
    "record",
    "recorder_hashes",
    "verify_provenance",
]

UPSTREAM_REPOSITORY = "https://github.com/ysz/recursive-llm"
PINNED = "2fb46cc"
RECORDER_FILES = (
    "recorder.py",
    "driver.py",
    "case_isolation.py",
    "case_runs.py",
    "peer_backends.py",
    "values.py",
    "inputs.py",
    "protocol.py",
    "fixtures.py",
)
"""What a recording depends on besides upstream: this recorder, the driver's modules, the codecs."""
_PARSER_BATCH = 500

Progress = Callable[[str], None]


class RecordError(ToolUsageError):
    """Recording could not produce trustworthy fixtures (bad checkout, driver failure, ...)."""


@dataclass(frozen=True)
class Checkout:
    """An upstream checkout: path, full commit, and sha256 of every file under ``src/rlm``."""

    path: Path
    commit: str
    files: dict[str, str]

    @property
    def src(self) -> Path:
        return self.path / "src"

    @classmethod
    def inspect(cls, path: Path) -> Checkout:
        """Read a checkout's commit (``git rev-parse``, read-only) and hash its package files."""
        package = path / "src" / "rlm"
        if not (package / "__init__.py").is_file():
            raise RecordError(f"{path} is not a ysz/recursive-llm checkout (no src/rlm/__init__.py)")
        try:
            commit = subprocess.run(
                ["git", "-C", str(path), "rev-parse", "HEAD"],
                check=True,
                capture_output=True,
                text=True,
            ).stdout.strip()
        except (OSError, subprocess.CalledProcessError) as exc:
            raise RecordError(f"cannot read the commit of {path}: {exc}") from None
        files = {
            str(p.relative_to(path)): sha256_file(p)
            for p in sorted(package.rglob("*.py"))
            if "__pycache__" not in p.parts
        }
        return cls(path, commit, files)


@dataclass
class _Recording:
    """What one Python produced: results by kind and case id, and the drivers' self-descriptions."""

    python: str
    version: str = ""
    info: dict[str, Any] = field(default_factory=dict)
    results: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    hash_sensitive: set[str] = field(default_factory=set)
    failures: list[str] = field(default_factory=list)


def _by_prompt_version(checkouts: Sequence[Checkout]) -> dict[str, Checkout]:
    found: dict[str, Checkout] = {}
    for checkout in checkouts:
        for version in _inputs.PROMPT_VERSIONS:
            if checkout.commit.startswith(version):
                found[version] = checkout
    if PINNED not in found:
        commits = ", ".join(c.commit[:12] for c in checkouts) or "none"
        raise RecordError(f"an upstream checkout at commit {PINNED} is required (given: {commits})")
    return found


def _run_kind(
    driver: DriverProcess, kind: str, cases: list[_inputs.Case], batch: int
) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for start in range(0, len(cases), batch):
        chunk = [c.as_input() for c in cases[start : start + batch]]
        for reply in driver.run(kind, chunk):
            out[str(reply["id"])] = reply
    return out


def _record_python(
    python: str,
    checkouts: dict[str, Checkout],
    cases: dict[str, list[_inputs.Case]],
    step_limit: float,
    progress: Progress,
) -> _Recording:
    rec = _Recording(python)
    for seed in (0, 1):
        for version, checkout in sorted(checkouts.items()):
            kinds = {"loop": [c for c in cases["loop"] if c.data["options"]["prompt_version"] == version]}
            if version == PINNED:
                kinds["repl"] = cases["repl"]
                if seed == 0:
                    kinds["parser"] = cases["parser"]
            if not any(kinds.values()):
                continue
            driver = DriverProcess(
                python,
                "ysz",
                paths=[str(checkout.src)],
                label=checkout.commit,
                step_limit=step_limit,
                hash_seed=seed,
            )
            with driver:
                info = driver.info
                if seed == 0:
                    rec.version = ".".join(str(info["python"]).split(".")[:2])
                    rec.info[version] = info
                    if info["files"] != {k.removeprefix("src/rlm/"): v for k, v in checkout.files.items()}:
                        raise RecordError(f"{python} imported an rlm package other than {checkout.path}")
                for kind, selected in kinds.items():
                    progress(f"{python} seed {seed}: {len(selected)} {kind} cases on {version}")
                    batch = _PARSER_BATCH if kind == "parser" else 1
                    replies = _run_kind(driver, kind, selected, batch)
                    _merge(rec, kind, replies, seed)
    return rec


def _merge(rec: _Recording, kind: str, replies: dict[str, dict[str, Any]], seed: int) -> None:
    bucket = rec.results.setdefault(kind, {})
    for case_id, reply in replies.items():
        if "failure" in reply:
            rec.failures.append(f"{case_id} (Python {rec.python}, seed {seed}): {reply['failure']}")
            continue
        if seed == 0:
            bucket[case_id] = reply["result"]
        elif bucket.get(case_id) != reply["result"]:
            rec.hash_sensitive.add(case_id)


def _lines(
    cases: list[_inputs.Case], results: dict[str, dict[str, Any]], sensitive: set[str]
) -> list[dict[str, Any]]:
    lines = []
    for case in cases:
        line: dict[str, Any] = {"id": case.id, "input": case.as_input(), "expected": results[case.id]}
        if case.id in sensitive:
            line["hash_sensitive"] = True
        lines.append(line)
    return lines


def _input_hashes() -> dict[str, str]:
    root = Path(__file__).with_name("inputs")
    hashes = {str(p.relative_to(root.parent)): sha256_file(p) for p in sorted(root.rglob("*.toml"))}
    generator = Path(__file__).with_name("parser_cases.py")
    if generator.is_file():
        hashes["parser_cases.py"] = sha256_file(generator)
    return hashes


def _parser_generation() -> dict[str, Any]:
    from . import parser_cases

    return {
        "count": parser_cases.DEFAULT_CASES,
        "seed": parser_cases.DEFAULT_SEED,
        "edge_cases": len(parser_cases.edge_cases()),
    }


def recorder_hashes() -> dict[str, str]:
    """sha256 of the recorder's own source files (a fixture is only as good as what wrote it)."""
    here = Path(__file__).parent
    return {name: sha256_file(here / name) for name in RECORDER_FILES}


def record(
    upstream: Sequence[Path],
    pythons: Sequence[str],
    out_dir: Path,
    *,
    step_limit: float = 3.0,
    progress: Progress = lambda _: None,
) -> dict[str, Any]:
    """Record every input case; write fixtures and PROVENANCE.json into ``out_dir``.

    Returns the provenance written. Raises RecordError, writing nothing, if any case could not be
    recorded (driver failure): expectations must never be partial.
    """
    if not pythons:
        raise RecordError("give at least one --python to record with")
    checkouts = _by_prompt_version([Checkout.inspect(Path(p)) for p in upstream])
    cases = _inputs.load_all()
    needed = {c.data["options"]["prompt_version"] for c in cases["loop"]}
    missing = sorted(needed - set(checkouts))
    if missing:
        raise RecordError(f"loop cases need upstream checkout(s) at {missing}; pass --upstream for each")

    recordings = _record_all(pythons, checkouts, cases, step_limit, progress)
    fixture_files, parser_identical = _write_fixtures(out_dir, cases, recordings)
    provenance = _provenance(checkouts, recordings, step_limit, parser_identical, fixture_files)
    (out_dir / PROVENANCE).write_text(
        json.dumps(provenance, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    return provenance


def _record_all(
    pythons: Sequence[str],
    checkouts: dict[str, Checkout],
    cases: dict[str, list[_inputs.Case]],
    step_limit: float,
    progress: Progress,
) -> list[_Recording]:
    """Each Python's recording (two at a time); RecordError if any case failed anywhere."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(_record_python, py, checkouts, cases, step_limit, progress) for py in pythons]
        recordings = [f.result() for f in futures]
    failures = [f for rec in recordings for f in rec.failures]
    if failures:
        shown = "\n  ".join(failures[:20])
        raise RecordError(f"{len(failures)} case(s) could not be recorded:\n  {shown}")
    versions = [rec.version for rec in recordings]
    if len(set(versions)) != len(versions):
        raise RecordError(f"two interpreters of the same Python version given: {versions}")
    return recordings


def _write_fixtures(
    out_dir: Path, cases: dict[str, list[_inputs.Case]], recordings: list[_Recording]
) -> tuple[dict[str, dict[str, Any]], bool]:
    """The fixture files (replacing stale ones): their counts and hashes, and whether one parser
    file serves every Python (parser results identical across versions)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.glob("*.jsonl"):
        stale.unlink()
    fixture_files: dict[str, dict[str, Any]] = {}

    def write(name: str, lines: list[dict[str, Any]]) -> None:
        count = write_jsonl(out_dir / name, lines)
        fixture_files[name] = {"cases": count, "sha256": sha256_file(out_dir / name)}

    for rec in recordings:
        for kind in ("repl", "loop"):
            write(fixture_name(kind, rec.version), _lines(cases[kind], rec.results[kind], rec.hash_sensitive))
    parser_results = [rec.results["parser"] for rec in recordings]
    parser_identical = all(r == parser_results[0] for r in parser_results)
    if parser_identical:
        write(fixture_name("parser", None), _lines(cases["parser"], parser_results[0], set()))
    else:
        for rec in recordings:
            write(fixture_name("parser", rec.version), _lines(cases["parser"], rec.results["parser"], set()))
    return fixture_files, parser_identical


def _provenance(
    checkouts: dict[str, Checkout],
    recordings: list[_Recording],
    step_limit: float,
    parser_identical: bool,
    fixture_files: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """PROVENANCE.json: upstream's checkouts, each Python's recording, the recorder, the inputs."""
    return {
        "format": 1,
        "upstream": {
            "repository": UPSTREAM_REPOSITORY,
            "checkouts": {
                version: {"commit": c.commit, "files": c.files} for version, c in sorted(checkouts.items())
            },
            "roles": {
                "repl": PINNED,
                "parser": PINNED,
                "loop": "the checkout named by each case's prompt_version",
            },
        },
        "recordings": {
            rec.version: {
                "python": next(iter(rec.info.values()))["python"],
                "packages": next(iter(rec.info.values()))["packages"],
                "hash_sensitive_cases": len(rec.hash_sensitive),
            }
            for rec in sorted(recordings, key=lambda r: r.version)
        },
        "parser_identical_across_versions": parser_identical,
        "recorder": {
            "files": recorder_hashes(),
            "step_limit_seconds": step_limit,
            "hash_seeds": [0, 1],
            "parser_cases": _parser_generation(),
        },
        "inputs": _input_hashes(),
        "fixtures": dict(sorted(fixture_files.items())),
    }


def check(
    upstream: Sequence[Path],
    pythons: Sequence[str],
    fixtures_dir: Path,
    *,
    step_limit: float = 3.0,
    progress: Progress = lambda _: None,
) -> list[str]:
    """Re-record into a temporary directory; the differences from ``fixtures_dir`` (empty = same)."""
    scratch = Path(tempfile.mkdtemp(prefix="rlm-record-check-"))
    try:
        record(upstream, pythons, scratch, step_limit=step_limit, progress=progress)
        return diff_dirs(fixtures_dir, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def diff_dirs(old: Path, new: Path) -> list[str]:
    """Human-readable differences between two fixture directories, case by case."""
    problems: list[str] = []
    names = sorted(
        {p.name for p in old.glob("*.jsonl")} | {p.name for p in new.glob("*.jsonl")} | {PROVENANCE}
    )
    for name in names:
        a, b = old / name, new / name
        if not a.exists() or not b.exists():
            problems.append(f"{name}: {'missing' if not a.exists() else 'no longer recorded'}")
            continue
        if a.read_bytes() == b.read_bytes():
            continue
        if name == PROVENANCE:
            problems.append(f"{name}: differs ({_json_diff(a, b)})")
            continue
        before = {r["id"]: r for r in read_jsonl(a)}
        after = {r["id"]: r for r in read_jsonl(b)}
        for case_id in sorted(before.keys() | after.keys()):
            if case_id not in after:
                problems.append(f"{name}: {case_id} no longer recorded")
            elif case_id not in before:
                problems.append(f"{name}: {case_id} is new")
            elif before[case_id] != after[case_id]:
                field_names = sorted(
                    k
                    for k in before[case_id].keys() | after[case_id].keys()
                    if before[case_id].get(k) != after[case_id].get(k)
                )
                problems.append(f"{name}: {case_id} differs in {field_names}")
    return problems


def _json_diff(a: Path, b: Path) -> str:
    left, right = json.loads(a.read_text()), json.loads(b.read_text())
    keys = sorted(k for k in left.keys() | right.keys() if left.get(k) != right.get(k))
    return "keys " + ", ".join(keys)


def verify_provenance(fixtures: FixtureSet) -> list[str]:
    """Problems with a fixture directory's PROVENANCE.json (file hashes, recorder hashes)."""
    problems = []
    provenance = fixtures.provenance()
    listed = provenance.get("fixtures", {})
    present = {p.name for p in fixtures.root.glob("*.jsonl")}
    for name in sorted(present - set(listed)):
        problems.append(f"{name} is not listed in {PROVENANCE}")
    for name, meta in sorted(listed.items()):
        path = fixtures.root / name
        if not path.is_file():
            problems.append(f"{name} is listed in {PROVENANCE} but missing")
        elif sha256_file(path) != meta["sha256"]:
            problems.append(f"{name}: sha256 differs from {PROVENANCE} (edited by hand?)")
    return problems
