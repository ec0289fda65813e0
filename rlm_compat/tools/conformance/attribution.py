"""Explaining profile ``fixed``'s differences by the quirk switches that cause them.

Profile ``fixed`` differs from upstream on purpose, one quirk switch at a time (see
``rlm_compat.profiles``). For every case where it differs and deviations.toml says nothing, this
module flips each switch off *alone*, starting from profile ``upstream``, and records which flips
reproduce a difference on that case. The result is a set of ``fix`` entries, one per group of
switches, whose reason quotes the switches' own documentation — so a reader sees which upstream
quirk the case exercises and that ``fixed`` turns it off. Cases no single switch explains are
reported separately for a human to look at; they are never registered automatically.

Maintainers run ``rlm-compat conformance --suggest-deviations`` after a behaviour change and paste
(or review) the printed TOML into upstream_fixtures/deviations.toml.
"""

from __future__ import annotations

import ast
import inspect
import itertools
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ...profiles import QUIRKS, Profile
from . import result_diff as _compare
from .adapters import ProfileAdapter
from .suite_runner import RunReport

__all__ = ["Attribution", "attribute_fixed", "render_suggestions", "switch_documentation"]


def switch_documentation() -> dict[str, str]:
    """Each quirk switch's docstring, read from the Profile class source (one line each)."""
    tree = ast.parse(inspect.getsource(Profile))
    docs: dict[str, str] = {}
    body = tree.body[0].body if isinstance(tree.body[0], ast.ClassDef) else []
    for node, following in itertools.pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            docs[node.target.id] = " ".join(following.value.value.split())
    return docs


@dataclass
class Attribution:
    """On one Python: which switch groups explain which cases, and which cases stay unexplained."""

    python: str
    by_switches: dict[tuple[str, ...], list[str]]
    unexplained: list[str]

    def to_json(self) -> dict[str, Any]:
        """Plain data, to merge attributions made on several Pythons."""
        return {
            "python": self.python,
            "by_switches": [[list(k), sorted(v)] for k, v in sorted(self.by_switches.items())],
            "unexplained": sorted(self.unexplained),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Attribution:
        return cls(
            str(data["python"]),
            {tuple(k): list(v) for k, v in data["by_switches"]},
            list(data["unexplained"]),
        )


def attribute_fixed(
    report: RunReport,
    lines: dict[str, dict[str, Any]],
    python: str,
    switches: Sequence[str] = QUIRKS,
    progress: Callable[[str], None] = lambda _: None,
) -> Attribution:
    """Attribute the unexplained results of ``rlm_compat-fixed`` in ``report`` to switches.

    ``lines`` maps case id to its fixture line (for the input and the recorded expectation).
    """
    fixed = next((i for i in report.implementations if i.name == "rlm_compat-fixed"), None)
    candidates = [] if fixed is None else [r for r in fixed.results if r.status == "unexplained"]

    def differs(profile: Profile, result: Any) -> bool:
        line = lines[result.id]
        outcome = adapter_for[profile.name].run(result.kind, line["input"])
        return (
            "result" not in outcome
            or _compare.compare(result.kind, line["expected"], outcome["result"], "exact") is not None
        )

    adapter_for: dict[str, ProfileAdapter] = {}
    baseline = Profile.upstream()
    adapter_for[baseline.name] = ProfileAdapter(baseline)
    progress(f"baseline: profile upstream on {len(candidates)} case(s)")
    # A case profile upstream already gets wrong is a bug or a safety block, not a switch's doing.
    unexplained = [r.id for r in candidates if differs(baseline, r)]
    targets = [r for r in candidates if r.id not in set(unexplained)]
    hits: dict[str, list[str]] = defaultdict(list)
    for switch in switches:
        progress(f"flipping {switch} on {len(targets)} case(s)")
        flipped = Profile.upstream().replace(**{switch: False})
        adapter_for[flipped.name] = ProfileAdapter(flipped)
        for result in targets:
            if differs(flipped, result):
                hits[result.id].append(switch)
    groups: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for result in targets:
        if hits[result.id]:
            groups[tuple(hits[result.id])].append(result.id)
        else:
            unexplained.append(result.id)
    return Attribution(python, dict(groups), unexplained)


def _toml_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_suggestions(attributions: Sequence[Attribution], versions: Sequence[str]) -> str:
    """TOML ``[[deviation]]`` entries (kind ``fix``, profile ``fixed``) merged over Pythons.

    A case attributed on every recorded version gets an entry without ``pythons``; one that
    differs only on some versions (PEP 709 inlined comprehensions on 3.12+, for instance) gets
    ``pythons = [...]`` listing them.
    """
    docs = switch_documentation()
    switches_of: dict[str, set[str]] = defaultdict(set)
    pythons_of: dict[str, set[str]] = defaultdict(set)
    unexplained: dict[str, set[str]] = defaultdict(set)
    for attribution in attributions:
        for switches, cases in attribution.by_switches.items():
            for case in cases:
                switches_of[case].update(switches)
                pythons_of[case].add(attribution.python)
        for case in attribution.unexplained:
            unexplained[case].add(attribution.python)
    everywhere = set(versions)
    groups: dict[tuple[tuple[str, ...], tuple[str, ...]], list[str]] = defaultdict(list)
    for case, found in switches_of.items():
        pythons = () if pythons_of[case] >= everywhere else tuple(sorted(pythons_of[case]))
        ordered = tuple(s for s in QUIRKS if s in found)
        groups[(ordered, pythons)].append(case)
    out: list[str] = []
    missing = sorted(everywhere - {a.python for a in attributions})
    if missing:
        out += [f"# WARNING: no attribution from Python {', '.join(missing)}; run there too", ""]
    for (switches, pythons), cases in sorted(groups.items()):
        quirks = "; ".join(f"`{s}`: {docs.get(s, 'see rlm_compat.profiles')}" for s in switches)
        reason = f"profile fixed turns off the upstream quirk(s) this case exercises — {quirks}"
        out += [
            "[[deviation]]",
            'profile = "fixed"',
            'kind = "fix"',
            f"reason = {_toml_string(reason)}",
            *([f"pythons = [{', '.join(_toml_string(p) for p in pythons)}]"] if pythons else []),
            "cases = [",
            *[f"  {_toml_string(c)}," for c in sorted(cases)],
            "]",
            "",
        ]
    if unexplained:
        out.append(
            "# not explained by a single switch, or profile upstream differs too "
            "(a bug, or a safety entry to write by hand):"
        )
        out += [f"#   {c} (Python {', '.join(sorted(p))})" for c, p in sorted(unexplained.items())]
    return "\n".join(out) + "\n"
