"""What the recorded fixtures and the deviations registry say about 2fb46cc, as Markdown lines."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def fixture_summary(root: Path) -> list[str]:
    """Markdown lines: what the recorded fixtures and the deviations registry say about 2fb46cc."""
    from ...conformance.deviations import Registry
    from ...conformance.fixtures import FixtureSet, read_jsonl

    fixtures = FixtureSet.open(root)
    provenance = fixtures.provenance()
    lines = [
        "| fixture file | cases | 2fb46cc steps | returned | raised | hung |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    repl_by_version: dict[str, dict[str, str]] = {}
    case_ids: set[str] = set()
    for kind in ("repl", "loop", "parser"):
        for version, path in sorted(fixtures.files.get(kind, {}).items(), key=lambda kv: kv[0] or ""):
            records = list(read_jsonl(path))
            case_ids.update(str(r["id"]) for r in records)
            tally: Counter[str] = Counter()
            for record in records:
                for step in record["expected"].get("steps", []):
                    tally["hang" if step.get("hang") else "error" if "error" in step else "output"] += 1
            if kind == "repl" and version:
                repl_by_version[version] = {
                    r["id"]: json.dumps(r["expected"], sort_keys=True) for r in records
                }
            steps = sum(tally.values())
            cells = [str(steps), str(tally["output"]), str(tally["error"]), str(tally["hang"])]
            if not steps:
                cells = ["–"] * 4
            lines.append(f"| `{path.name}` | {len(records)} | " + " | ".join(cells) + " |")
    versions = sorted(repl_by_version, key=lambda v: tuple(int(x) for x in v.split(".")))
    changed: Counter[str] = Counter()
    for case_id in repl_by_version[versions[0]] if versions else {}:
        seen = {repl_by_version[v].get(case_id) for v in versions}
        if len(seen) > 1:
            changed[case_id.split(".")[1]] += 1
    lines += [
        "",
        f"Recorded from {provenance.get('upstream', {}).get('repository', 'ysz/recursive-llm')} "
        f"on Python {', '.join(versions)}. REPL cases whose recording differs between those "
        f"Pythons: {sum(changed.values())}"
        + (
            " (by group: " + ", ".join(f"`{group}` {n}" for group, n in sorted(changed.items())) + ")."
            if changed
            else "."
        ),
        "",
        "What rlm_compat does differently on purpose (`upstream_fixtures/deviations.toml`; "
        "docs/deviations.md explains each):",
        "",
        "| kind | profiles | entries | recorded cases |",
        "| --- | --- | ---: | ---: |",
    ]
    registry = Registry.load(root / "deviations.toml")
    covered = {entry.number: sum(1 for i in case_ids if entry.covers(i)) for entry in registry.entries}
    groups: Counter[tuple[str, str]] = Counter()
    cases: Counter[tuple[str, str]] = Counter()
    for entry in registry.entries:
        key = (entry.kind, " + ".join(entry.profiles))
        groups[key] += 1
        cases[key] += covered[entry.number]
    for key in sorted(groups):
        lines.append(f"| `{key[0]}` | {key[1]} | {groups[key]} | {cases[key]} |")
    lines += ["", *_quirk_counts(registry.entries, covered)]
    return lines


def _quirk_counts(entries: Sequence[Any], covered: Mapping[int, int]) -> list[str]:
    """Per quirk switch: how many registered cases profile fixed answers differently because of it.

    A ``fix`` entry names the switch(es) whose documentation it quotes (``switch``); a case with
    several quirks counts for each of them.
    """
    from ....profiles import QUIRKS

    counts: Counter[str] = Counter()
    for entry in entries:
        if entry.kind != "fix":
            continue
        for quirk in QUIRKS:
            if f"`{quirk}`" in entry.reason:
                counts[quirk] += covered[entry.number]
    if not counts:
        return []
    lines = [
        "The quirks behind the `fix` entries: for each `Profile` switch (docs/repl.md), the "
        "number of recorded cases in which profile fixed answers differently because the switch "
        "is off there (a case exercising several quirks counts for each; `rlm-compat profiles` "
        "says what each switch does):",
        "",
        "| quirk switch | recorded cases |",
        "| --- | ---: |",
    ]
    lines += [f"| `{quirk}` | {n} |" for quirk, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    return lines
