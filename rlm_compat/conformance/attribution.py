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

from ..profiles import QUIRKS, Profile
from . import compare as _compare
from .adapters import ProfileAdapter
from .runner import RunReport

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
    """Which switch groups explain which cases, and which cases stay unexplained."""

    by_switches: dict[tuple[str, ...], list[str]]
    unexplained: list[str]


def attribute_fixed(
    report: RunReport,
    lines: dict[str, dict[str, Any]],
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
        return "result" not in outcome or _compare.compare(
            result.kind, line["expected"], outcome["result"], "exact"
        ) is not None

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
    return Attribution(dict(groups), unexplained)


def _toml_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_suggestions(attribution: Attribution) -> str:
    """TOML ``[[deviation]]`` entries (kind ``fix``, profile ``fixed``) for the attributed cases."""
    docs = switch_documentation()
    out = []
    for switches, cases in sorted(attribution.by_switches.items()):
        quirks = "; ".join(f"`{s}`: {docs.get(s, 'see rlm_compat.profiles')}" for s in switches)
        reason = (
            f"profile fixed turns off the upstream quirk(s) this case exercises — {quirks}"
        )
        out += [
            "[[deviation]]",
            'profile = "fixed"',
            'kind = "fix"',
            f"reason = {_toml_string(reason)}",
            "cases = [",
            *[f"  {_toml_string(c)}," for c in sorted(cases)],
            "]",
            "",
        ]
    if attribution.unexplained:
        out.append("# not explained by a single switch, or profile upstream differs too "
                   "(a bug, or a safety entry to write by hand):")
        out += [f"#   {c}" for c in sorted(attribution.unexplained)]
    return "\n".join(out) + "\n"
