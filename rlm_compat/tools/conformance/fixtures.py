"""Reading and writing the recorded fixtures (``upstream_fixtures/``) and their provenance.

One fixture file per kind and Python version (``repl.py3.11.jsonl``...), or one for all versions
when upstream behaved identically on each (``parser.jsonl``). A file is JSON Lines, one case per
line, sorted by id, each line ``{"id", "input", "expected"}`` (plus ``"hash_sensitive": true`` when
the recorded result changed with ``PYTHONHASHSEED``). Lines are canonical JSON (sorted keys, ASCII
escapes), so re-recording identical behaviour gives identical bytes and ``record --check`` can
compare files byte for byte.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..shared.package_paths import shipped_data
from ..shared.tooling_errors import ToolUsageError

__all__ = [
    "PROVENANCE",
    "FixtureError",
    "FixtureSet",
    "default_fixtures_dir",
    "dump_line",
    "fixture_name",
    "read_jsonl",
    "sha256_file",
    "write_jsonl",
]

PROVENANCE = "PROVENANCE.json"
DEVIATIONS = "deviations.toml"
_NAME = re.compile(r"^(?P<kind>repl|parser|loop)(\.py(?P<version>\d+\.\d+))?\.jsonl$")


class FixtureError(ToolUsageError):
    """A fixture directory or file is missing, malformed or inconsistent with its provenance."""


def default_fixtures_dir() -> Path:
    """Fixtures shipped in the wheel (``rlm_compat/_fixtures``), else the source tree's copy."""
    found = shipped_data("_fixtures", "upstream_fixtures", marker=PROVENANCE)
    if found is not None:
        return found
    raise FixtureError(
        "no recorded fixtures found (looked in rlm_compat/_fixtures and ./upstream_fixtures); "
        "pass --fixtures DIR or record them with `rlm-compat record --upstream PATH`"
    )


def fixture_name(kind: str, version: str | None) -> str:
    """``repl.py3.11.jsonl`` for a version-specific file, ``parser.jsonl`` for a shared one."""
    return f"{kind}.py{version}.jsonl" if version else f"{kind}.jsonl"


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def dump_line(record: dict[str, Any]) -> str:
    """The canonical JSON text of one fixture line (no newline)."""
    return json.dumps(record, sort_keys=True, ensure_ascii=True, separators=(",", ":"), allow_nan=False)


def write_jsonl(path: Path, records: Iterable[dict[str, Any]]) -> int:
    """Write records sorted by id; returns how many."""
    ordered = sorted(records, key=lambda r: str(r["id"]))
    path.write_text("".join(dump_line(r) + "\n" for r in ordered), encoding="ascii")
    return len(ordered)


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """The records of a fixture file, with line numbers in any error."""
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise FixtureError(f"{path.name}:{number}: invalid JSON ({exc})") from None
            if not isinstance(record, dict) or "id" not in record:
                raise FixtureError(f"{path.name}:{number}: a fixture line is an object with an id")
            yield record


@dataclass
class FixtureSet:
    """The fixture files of a directory, indexed by kind and Python version."""

    root: Path
    files: dict[str, dict[str | None, Path]] = field(default_factory=dict)

    @classmethod
    def open(cls, root: Path | None = None) -> FixtureSet:
        """Index ``root`` (default: :func:`default_fixtures_dir`)."""
        root = root if root is not None else default_fixtures_dir()
        if not root.is_dir():
            raise FixtureError(f"fixtures directory {root} does not exist")
        found = cls(root)
        for path in sorted(root.glob("*.jsonl")):
            match = _NAME.match(path.name)
            if match is None:
                raise FixtureError(f"unexpected fixture file name {path.name}")
            found.files.setdefault(match["kind"], {})[match["version"]] = path
        return found

    def provenance(self) -> dict[str, Any]:
        """The parsed PROVENANCE.json."""
        path = self.root / PROVENANCE
        try:
            data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise FixtureError(f"cannot read {path}: {exc}") from None
        return data

    def versions(self, kind: str) -> list[str]:
        """Python versions with a version-specific file for ``kind``, oldest first."""
        return sorted((v for v in self.files.get(kind, {}) if v), key=_version_key)

    def select(self, kind: str, python: str) -> tuple[Path | None, str | None, str | None]:
        """The file to use for ``kind`` on Python ``python`` (``"3.12"``).

        Returns ``(path, version used, note)``: the exact version's file, else the shared file,
        else the nearest recorded version with a note saying so; ``(None, None, note)`` if none.
        """
        by_version = self.files.get(kind, {})
        if python in by_version:
            return by_version[python], python, None
        if None in by_version:
            return by_version[None], None, None
        versions = self.versions(kind)
        if not versions:
            return None, None, f"no {kind} fixtures in {self.root}"
        wanted = _version_key(python)
        nearest = min(versions, key=lambda v: (abs(_version_key(v)[1] - wanted[1]), v))
        return (
            by_version[nearest],
            nearest,
            f"no {kind} fixtures recorded on Python {python}; using the nearest, {nearest}",
        )


def _version_key(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)
