"""``rlm-compat baseline``: measure the unofficial-baseline memo's facts and write the doc.

Every probe of :mod:`.baseline_facts` runs through the conformance suite's implementation
adapters (docs/protocol.md) on ysz/recursive-llm 2fb46cc (the checkout, under each Python
given), on the PyPI peers in their own venvs, and on rlm_compat's two profiles in process. The
outcomes are stored in a JSON record next to the Markdown; the Markdown is a pure function of
the record, the facts and the checked-in fixtures, so
``tests/tools/research/test_research_baseline.py`` can re-run the rlm_compat part and re-render the
doc without upstream, and the doc cannot rot silently.
"""

from __future__ import annotations

import platform
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .... import __version__
from ...shared.tooling_errors import ToolUsageError
from .baseline_facts import Probe, all_probes
from .baseline_fixtures import fixture_summary
from .baseline_page import render
from .baseline_quick import QUICK_CODE, python_minor, run_quick, run_quick_here
from .baseline_record import PEERS, PROFILES, minor, python_dependent, verdicts
from .baseline_source import revision, source_facts

__all__ = [
    "PEERS",
    "PROFILES",
    "QUICK_CODE",
    "RECORD_VERSION",
    "collect",
    "fixture_summary",
    "probe_definitions",
    "python_dependent",
    "render",
    "run_profiles",
    "run_quick_here",
    "verdicts",
]

RECORD_VERSION = 1


def probe_definitions() -> list[dict[str, Any]]:
    """The probes as data: stored in the record so a changed snippet is caught as stale."""
    return [{"id": p.id, "kind": p.kind, "case": p.case(), "grep": p.grep} for p in all_probes()]


def _reduce(probe: Probe, outcome: Mapping[str, Any]) -> dict[str, Any]:
    """What the doc shows of one outcome: the step results, the parser answer, or the loop's end."""
    if "result" not in outcome:
        return {key: outcome[key] for key in ("skip", "failure") if key in outcome}
    result = outcome["result"]
    if probe.kind == "repl":
        steps = []
        for step in result["steps"]:
            if "hang" in step:
                steps.append({"hang": True})
                continue
            kept: dict[str, Any] = {}
            if "error" in step:
                kept["error"] = {
                    k: step["error"][k] for k in ("type", "message", "isa") if k in step["error"]
                }
            else:
                kept["output"] = step["output"]
            env = step.get("env", {})
            kept["env"] = {name: env[name] for name in probe.show if name in env}
            steps.append(kept)
        return {"steps": steps}
    if probe.kind == "parser":
        if "parse_response" in result:
            return {"answer": result["parse_response"], "is_final": result.get("is_final")}
        return {"answer": result.get("answer")}
    calls = result.get("calls", [])
    lines: list[str] = []
    if probe.grep and calls:
        for message in calls[0].get("messages", []):
            content = str(message.get("content", ""))
            lines += [line.strip() for line in content.splitlines() if probe.grep in line]
    end: dict[str, Any] = {"calls": len(calls), "lines": lines}
    if result.get("hang"):
        end["hang"] = True
    for key in ("answer", "error"):
        if key in result:
            value = result[key]
            end[key] = {"type": value["type"], "message": value["message"]} if key == "error" else value
    return end


def _run(adapter: Any, probes: Sequence[Probe]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    try:
        for kind in ("repl", "parser", "loop"):
            chosen = [p for p in probes if p.kind == kind]
            if not chosen:
                continue
            outcomes = adapter.run_many(kind, [p.case() for p in chosen])
            for probe, outcome in zip(chosen, outcomes, strict=True):
                out[probe.id] = _reduce(probe, outcome)
    finally:
        adapter.stop()
    return out


def run_profiles(probes: Sequence[Probe] | None = None) -> dict[str, dict[str, Any]]:
    """rlm_compat's outcomes per profile, in this process (what the test re-runs)."""
    from ...conformance.implementations import make_adapter

    chosen = list(all_probes() if probes is None else probes)
    return {profile: _run(make_adapter(profile), chosen) for profile in PROFILES}


def collect(checkout: Path, pythons: Sequence[str], peers: Mapping[str, str]) -> dict[str, Any]:
    """Run every probe everywhere; the JSON record the doc is rendered from.

    ``pythons`` are interpreters with RestrictedPython and litellm for the 2fb46cc checkout (as
    for ``rlm-compat record``); ``peers`` maps ``recursive-llm-0.5.0`` / ``rlms-0.1.1`` to the
    interpreter of its venv. No path is stored: the record names versions only.
    """
    from ...conformance.implementations import make_adapter

    if not (checkout / "src" / "rlm" / "repl.py").is_file():
        raise ToolUsageError(f"{checkout} is not a ysz/recursive-llm checkout (no src/rlm/repl.py)")
    unknown = sorted(set(peers) - set(PEERS))
    if unknown:
        raise ToolUsageError(f"unknown peer(s) {unknown}; known: {', '.join(PEERS)}")
    probes = all_probes()
    implementations: list[dict[str, Any]] = []
    results: dict[str, dict[str, Any]] = {}
    for python in pythons:
        adapter = make_adapter(f"ysz-2fb46cc={python}", checkout=checkout)
        outcome = _run(adapter, probes)
        version = str(adapter.info.get("python", "?"))
        packages = adapter.info.get("packages", {})
        key = f"2fb46cc@{minor(version)}"
        implementations.append(
            {"key": key, "name": "ysz/recursive-llm 2fb46cc", "python": version, "packages": packages}
        )
        results[key] = outcome
    for name in PEERS:
        if name in peers:
            adapter = make_adapter(f"{name}={peers[name]}")
            results[name] = _run(adapter, probes)
            implementations.append(
                {
                    "key": name,
                    "name": name,
                    "python": str(adapter.info.get("python", "?")),
                    "packages": adapter.info.get("packages", {}),
                }
            )
    quick: dict[str, Any] = {}
    chosen = next((p for p in pythons if python_minor(p) == minor(platform.python_version())), pythons[0])
    quick["2fb46cc"] = {
        "python": python_minor(chosen),
        "stdout": run_quick(chosen, "2fb46cc", str(checkout.resolve() / "src")),
    }
    for profile in PROFILES:
        quick[profile] = {"python": minor(platform.python_version()), "stdout": run_quick_here(profile)}
    for profile, outcome in run_profiles(probes).items():
        implementations.append(
            {
                "key": profile,
                "name": f"rlm_compat {__version__} profile {profile}",
                "python": platform.python_version(),
                "packages": {},
            }
        )
        results[profile] = outcome
    return {
        "version": RECORD_VERSION,
        "revision": revision(checkout),
        "source": source_facts(checkout),
        "quick": quick,
        "probes": probe_definitions(),
        "implementations": implementations,
        "results": results,
    }
