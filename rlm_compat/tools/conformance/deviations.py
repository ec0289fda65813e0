"""The deviations registry (``upstream_fixtures/deviations.toml``): where rlm_compat differs on purpose.

Each entry names cases (ids or globs), the rlm_compat profile it applies to, a kind and a reason::

    [[deviation]]
    cases = ["repl.hang.*"]
    profile = "upstream"            # or "fixed", or a list of both
    kind = "safety"                 # "fix" | "safety" | "runtime-difference" | "cosmetic"
    reason = "upstream never enforces its timeout; every profile stops the code after `timeout`"
    pythons = ["3.12"]              # optional: only on these Python versions
    expected = { steps = [...] }    # optional, single case only: the exact result required

The registry is strict, so it can never rot into a list of excuses:

* profile ``upstream`` may only carry ``safety``, ``runtime-difference`` and ``cosmetic`` entries
  (``cosmetic``: how the sandbox's own objects display, e.g. the print function and the module
  proxies, which are not upstream's objects): a behaviour that merely differs from upstream there
  is a bug, not a deviation;
* an entry's reason must be a sentence a reader understands (not empty, not just the kind);
* every entry must match at least one recorded case, and no case may match two entries of the
  same profile;
* a registered case that now matches upstream is an *unexpected pass* and fails the run, so a fix
  in the code forces the registry to be updated with it.
"""

from __future__ import annotations

import fnmatch
import functools
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..shared.tooling_errors import ToolUsageError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]

__all__ = [
    "DEVIATION_KINDS",
    "PROFILE_KINDS",
    "Deviation",
    "DeviationError",
    "Registry",
]

DEVIATION_KINDS = ("fix", "safety", "runtime-difference", "cosmetic")
PROFILE_KINDS: Mapping[str, tuple[str, ...]] = {
    "upstream": ("safety", "runtime-difference", "cosmetic"),
    "fixed": DEVIATION_KINDS,
}
_KEYS = {"cases", "profile", "kind", "reason", "expected", "pythons"}
_MIN_REASON = 25


class DeviationError(ToolUsageError):
    """The registry is malformed or inconsistent with the recorded cases."""


@dataclass(frozen=True)
class Deviation:
    """One registry entry (``number`` is its position in the file, from 1, for messages)."""

    number: int
    cases: tuple[str, ...]
    profiles: tuple[str, ...]
    kind: str
    reason: str
    pythons: tuple[str, ...] = ()
    expected: Any = None

    def matches(self, case_id: str, profile: str, python: str | None) -> bool:
        """Whether this entry covers ``case_id`` for ``profile`` on Python ``python``."""
        if profile not in self.profiles:
            return False
        if self.pythons and python not in self.pythons:
            return False
        return self.covers(case_id)

    def covers(self, case_id: str) -> bool:
        """Whether one of the entry's patterns matches ``case_id`` (profile and Python aside)."""
        return _matcher(self.cases).match(case_id) is not None

    def as_dict(self) -> dict[str, Any]:
        """The entry as plain data (JSON report, deviations schema)."""
        out: dict[str, Any] = {
            "cases": list(self.cases),
            "profile": list(self.profiles),
            "kind": self.kind,
            "reason": self.reason,
        }
        if self.pythons:
            out["pythons"] = list(self.pythons)
        if self.expected is not None:
            out["expected"] = self.expected
        return out


def _strings(value: Any, where: str, key: str) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(i, str) and i for i in items):
        raise DeviationError(f"{where}: {key} must be a non-empty string or list of strings")
    return tuple(items)


def _entry(number: int, raw: Mapping[str, Any]) -> Deviation:
    where = f"deviation #{number}"
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise DeviationError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(_KEYS)}")
    for key in ("cases", "profile", "kind", "reason"):
        if key not in raw:
            raise DeviationError(f"{where}: missing {key!r}")
    cases = _strings(raw["cases"], where, "cases")
    profiles = _strings(raw["profile"], where, "profile")
    kind = raw["kind"]
    if kind not in DEVIATION_KINDS:
        raise DeviationError(f"{where}: kind must be one of {list(DEVIATION_KINDS)}, not {kind!r}")
    for profile in profiles:
        if profile not in PROFILE_KINDS:
            raise DeviationError(f"{where}: profile must be one of {sorted(PROFILE_KINDS)}")
        if kind not in PROFILE_KINDS[profile]:
            raise DeviationError(
                f"{where} ({cases[0]}): profile {profile!r} may only register "
                f"{' / '.join(PROFILE_KINDS[profile])}, not {kind!r}: a difference from upstream "
                "in the upstream profile is a bug to fix, not a deviation"
            )
    reason = raw["reason"]
    if not isinstance(reason, str) or len(reason.strip()) < _MIN_REASON:
        raise DeviationError(
            f"{where} ({cases[0]}): reason must say why in a full sentence "
            f"(at least {_MIN_REASON} characters)"
        )
    pythons = _strings(raw["pythons"], where, "pythons") if "pythons" in raw else ()
    expected = raw.get("expected")
    if expected is not None and (len(cases) != 1 or any(c in cases[0] for c in "*?[")):
        raise DeviationError(f"{where}: 'expected' needs exactly one case id, without globs")
    return Deviation(number, cases, profiles, kind, reason.strip(), pythons, expected)


@dataclass(frozen=True)
class Registry:
    """All entries of a deviations file."""

    entries: tuple[Deviation, ...]
    source: str = "<memory>"

    @classmethod
    def parse(cls, text: str, source: str = "<memory>") -> Registry:
        """Parse and validate TOML text (entries under ``[[deviation]]``)."""
        try:
            document = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise DeviationError(f"{source}: {exc}") from None
        unknown = sorted(set(document) - {"deviation"})
        if unknown:
            raise DeviationError(f"{source}: unknown top-level key(s) {unknown}")
        raw = document.get("deviation", [])
        return cls(tuple(_entry(n, r) for n, r in enumerate(raw, 1)), source)

    @classmethod
    def load(cls, path: Path) -> Registry:
        """Read ``path``; a missing file is an empty registry."""
        if not path.is_file():
            return cls((), str(path))
        return cls.parse(path.read_text(encoding="utf-8"), str(path))

    def lookup(self, case_id: str, profile: str, python: str | None) -> Deviation | None:
        """The entry covering this case for this profile, or None."""
        found = [e for e in self.entries if e.matches(case_id, profile, python)]
        if len(found) > 1:
            numbers = ", ".join(f"#{e.number}" for e in found)
            raise DeviationError(f"{case_id} ({profile}) is matched by several entries: {numbers}")
        return found[0] if found else None

    def check_against(self, case_ids: Iterable[str]) -> list[str]:
        """Problems of the registry against the known case ids: stale patterns, overlaps."""
        ids = sorted(set(case_ids))
        problems = []
        for entry in self.entries:
            for pattern in entry.cases:
                if not any(_matcher((pattern,)).match(i) for i in ids):
                    problems.append(
                        f"deviation #{entry.number}: pattern {pattern!r} matches no recorded case"
                    )
        for profile in PROFILE_KINDS:
            for case_id in ids:
                hits = [e for e in self.entries if profile in e.profiles and e.covers(case_id)]
                overlapping = _overlapping(hits)
                if overlapping:
                    numbers = ", ".join(f"#{e.number}" for e in overlapping)
                    problems.append(f"{case_id} ({profile}) is matched by several entries: {numbers}")
        return problems


@functools.cache
def _matcher(patterns: tuple[str, ...]) -> re.Pattern[str]:
    """One compiled regex for an entry's globs (fnmatch's own cache is small on Python 3.10)."""
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns))


def _overlapping(entries: list[Deviation]) -> list[Deviation]:
    """Entries that could apply on the same Python version (entries for disjoint versions may share cases)."""
    clash: list[Deviation] = []
    for i, a in enumerate(entries):
        for b in entries[i + 1 :]:
            if not a.pythons or not b.pythons or set(a.pythons) & set(b.pythons):
                clash.extend(e for e in (a, b) if e not in clash)
    return clash
