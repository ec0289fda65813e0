"""The Markdown of docs/research/unofficial-baseline.md: a pure function of a record and the fixtures."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .baseline_facts import FACTS, Fact, Probe, all_probes
from .baseline_fixtures import fixture_summary
from .baseline_quick import quick_script
from .baseline_record import PEERS, PROFILES, quiet, same, upstream_for_profiles, upstream_keys, verdicts

_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")


def _text(value: Any) -> str:
    return _ADDRESS.sub("0x?", str(value))


def _describe(outcome: Mapping[str, Any]) -> list[str]:
    if "skip" in outcome:
        return [f"skipped: {outcome['skip']}"]
    if "failure" in outcome:
        return [f"no result: {outcome['failure']}"]
    if "steps" in outcome:
        out: list[str] = []
        many = len(outcome["steps"]) > 1
        for number, step in enumerate(outcome["steps"], 1):
            prefix = f"step {number}: " if many else ""
            if step.get("hang"):
                out.append(f"{prefix}hang (never returned)")
                continue
            if "error" in step:
                out.append(f"{prefix}raises {step['error']['type']}: {_text(step['error']['message'])}")
            else:
                text = _text(step["output"])
                shown = text.splitlines() or ["(empty string)"]
                out.append(f"{prefix}returns {shown[0]}")
                out += [f"{' ' * len(prefix)}        {line}" for line in shown[1:]]
            for name, value in step.get("env", {}).items():
                out.append(f"{' ' * len(prefix)}env {name} = {json.dumps(value, ensure_ascii=False)}")
        return out
    if "calls" in outcome:
        out = [f"model calls: {outcome['calls']}"]
        out += [f"prompt: {line}" for line in outcome["lines"]]
        if "answer" in outcome:
            out.append(f"answer: {json.dumps(outcome['answer'], ensure_ascii=False)}")
        if "error" in outcome:
            out.append(f"raises {outcome['error']['type']}: {_text(outcome['error']['message'])}")
        if outcome.get("hang"):
            out.append("hang (never returned)")
        return out
    answer = json.dumps(outcome.get("answer"), ensure_ascii=False)
    if "is_final" in outcome:
        return [f"parse_response -> {answer} (is_final {json.dumps(outcome['is_final'])})"]
    return [f"final answer -> {answer}"]


def _rows(record: Mapping[str, Any], probe: Probe) -> list[tuple[str, list[str]]]:
    """(label, lines) per implementation; 2fb46cc's Pythons with equal outcomes share a row."""
    results = record["results"]
    names = {i["key"]: i for i in record["implementations"]}
    rows: list[tuple[str, list[str]]] = []
    upstream = upstream_keys(record)
    groups: dict[str, list[str]] = {}
    for key in upstream:
        text = json.dumps(results[key].get(probe.id), sort_keys=True)
        groups.setdefault(text, []).append(key.split("@", 1)[1])
    for key in upstream:
        pythons = groups.get(json.dumps(results[key].get(probe.id), sort_keys=True))
        if pythons and key.split("@", 1)[1] == pythons[0]:
            rows.append((f"2fb46cc, Python {', '.join(pythons)}", _describe(results[key].get(probe.id, {}))))
    for key in names:
        if key in upstream:
            continue
        label = key if key in PEERS else f"rlm_compat {key}"
        if probe.kind == "parser" and key in PROFILES:
            label += " (rlm_compat.parser)"
        rows.append((label, _describe(results[key].get(probe.id, {"skip": "not recorded"}))))
    return rows


def _code_block(probe: Probe) -> list[str]:
    if probe.kind == "parser":
        lines = ["model reply:", *(f"  {line}" for line in probe.response.splitlines())]
        if probe.env:
            lines.append(f"env: {json.dumps(dict(probe.env))}")
        return _fence(lines, "text")
    if probe.kind == "loop":
        return _fence([f"scripted reply {n}: {reply}" for n, reply in enumerate(probe.replies, 1)], "text")
    lines = []
    if probe.env:
        lines.append(f"# env: {json.dumps(dict(probe.env))}")
    if probe.options:
        lines.append(f"# REPLExecutor(**{json.dumps(dict(probe.options))})")
    for number, step in enumerate(probe.steps, 1):
        if len(probe.steps) > 1:
            lines.append(f"# --- step {number}")
        lines += step.splitlines()
    return _fence(lines, "python")


def _verdict(record: Mapping[str, Any], probe: Probe, source: str) -> str:
    found = verdicts(record, probe)
    if not found:
        return ""
    yes = [v for v, ok in found.items() if ok]
    no = [v for v, ok in found.items() if not ok]
    if not no:
        return f"The {source} holds on 2fb46cc (Python {', '.join(yes)})."
    if not yes:
        return f"**Not as the {source} says** on 2fb46cc (Python {', '.join(no)}): see the output above."
    return (
        f"The {source} holds on 2fb46cc with Python {', '.join(yes)}; "
        f"**not on Python {', '.join(no)}** (output above)."
    )


def _fence(lines: list[str], info: str) -> list[str]:
    """A fenced block long enough to hold ``lines`` (snippets contain ``` fences themselves)."""
    ticks = "```"
    while any(ticks in line for line in lines):
        ticks += "`"
    return [ticks + info, *lines, ticks]


def _fact(record: Mapping[str, Any], number: int, fact: Fact) -> list[str]:
    lines = [f"### {number}. {fact.title}", ""]
    if fact.memo:
        lines += [f"Memo: {fact.memo}", ""]
    lines += [fact.claim, ""]
    located = record.get("source", {}).get(fact.id, [])
    if located:
        lines += ["In the 2fb46cc checkout (located with `ast`; names and lines only):", ""]
        lines += [f"* {line}" for line in located]
        lines.append("")
    for probe in fact.probes:
        lines += [f"`{probe.id}` ({probe.kind})", ""]
        lines += _code_block(probe)
        lines.append("")
        shown: list[str] = []
        for label, described in _rows(record, probe):
            shown.append(f"[{label}]")
            shown += [f"  {line}" for line in described]
        lines += [*_fence(shown, "text"), ""]
        source = "statement above" if probe.beyond_memo else "memo" if fact.memo else "brief"
        verdict = _verdict(record, probe, source)
        if verdict:
            lines += [verdict, ""]
    if fact.comment:
        lines += [fact.comment, ""]
    return lines


_COMMAND = (
    "rlm-compat baseline --upstream ../up/rlm-2fb46cc "
    "--python ../venvs/up310/bin/python --python ../venvs/up311/bin/python "
    "--python ../venvs/up312/bin/python --python ../venvs/up313/bin/python "
    "--peer recursive-llm-0.5.0=../venvs/rl050/bin/python --peer rlms-0.1.1=../venvs/rlms011/bin/python "
    "--out docs/research/unofficial-baseline.md"
)


def render(record: Mapping[str, Any], fixtures: Path) -> str:
    """The Markdown of docs/research/unofficial-baseline.md, from ``record`` and the fixtures."""
    lines = [*_intro_lines(), *_implementation_lines(record), *_summary_lines(record), "## The facts", ""]
    for number, fact in enumerate(FACTS, 1):
        lines += _fact(record, number, fact)
    lines += _fixture_lines(fixtures)
    return "\n".join(lines)


def _intro_lines() -> list[str]:
    """The title, how to reproduce the page, and how each kind of snippet runs."""
    return [
        "# The unofficial baseline (ysz/recursive-llm 2fb46cc), measured",
        "",
        "Generated by `rlm-compat baseline`; do not edit by hand. Every output below is what the "
        "implementation returned when the command ran; "
        "`tests/tools/research/test_research_baseline.py` re-runs "
        "the rlm_compat rows and re-renders this page, so it fails when either is out of date.",
        "",
        "This page checks, one by one, the facts of the design memo on the unofficial "
        "implementation (`shared/seeds/003`, in Japanese: the REPL's I/O protocol and its "
        "assumptions), and adds the defects the project brief names. The memo cites "
        "`docs/research/unofficial-baseline-run.md` as the evidence of its measurements on the "
        "paper's corpus; no such file exists in this repository, so every fact is measured again "
        "here on the pinned commit.",
        "",
        "Reproduce (from the repository root; checkout and venvs set up as in docs/conformance.md):",
        "",
        "```sh",
        _COMMAND,
        "# after a change to rlm_compat, the facts or the fixtures, without upstream:",
        "rlm-compat baseline --render-only --out docs/research/unofficial-baseline.md",
        "```",
        "",
        "## How each snippet runs",
        "",
        "Each snippet is a conformance case run through the implementation protocol "
        "(docs/protocol.md), by the same driver code that records the fixtures:",
        "",
        "* **REPL snippets**: a fresh `REPLExecutor(**options)`, the env loaded, then "
        "`executor.execute(step, env)` for each step; a row shows what `execute` returned or "
        "raised, and the env entries named under the snippet. 2fb46cc runs from the checkout's "
        "`src/` in its own venv; recursive-llm 0.5.0 the same way from its venv; rlms 0.1.1 through "
        "`LocalREPL().execute_code(code)` (its fence parser for fenced steps); rlm_compat through "
        "`REPLExecutor(profile=...)` in process.",
        "* **Parser snippets**: `rlm.parser.parse_response(reply, env)` (rlms: `find_final_answer`).",
        "* **Loop snippets**: `RLM('test-model').acompletion(query, context)` with "
        "`litellm.acompletion` replaced by a scripted model (2fb46cc and rlm_compat only; the "
        "peers' loops have another prompt and protocol).",
        "",
        "A step that runs longer than 3 s is reported as a hang. Memory addresses read `0x?`. "
        "Under each snippet, the verdict line compares 2fb46cc's outcome with what the memo "
        "states, per Python.",
        "",
    ]


def _implementation_lines(record: Mapping[str, Any]) -> list[str]:
    """The table of implementations measured, the revision checked, and the one-script run."""
    lines = [
        "| row | implementation | Python | packages |",
        "| --- | --- | --- | --- |",
    ]
    for info in record["implementations"]:
        packages = ", ".join(f"{k} {v}" for k, v in sorted(info.get("packages", {}).items()) if v)
        lines.append(f"| `{info['key']}` | {info['name']} | {info['python']} | {packages or '–'} |")
    return [*lines, "", *_revision_lines(record), "", *_quick_lines(record)]


def _summary_lines(record: Mapping[str, Any]) -> list[str]:
    """Per fact: whether the memo holds on 2fb46cc and how each other implementation compares."""
    lines = [
        "## Summary",
        "",
        "| # | fact | claims hold on 2fb46cc | rlm_compat upstream | rlm_compat fixed "
        "| recursive-llm 0.5.0 | rlms 0.1.1 |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for number, fact in enumerate(FACTS, 1):
        others = " | ".join(_summary_against(record, fact, key) for key in (*PROFILES, *PEERS))
        lines.append(f"| {number} | {fact.title} | {_summary_holds(record, fact)} | {others} |")
    lines += [
        "",
        "The last four columns compare each implementation's outcomes on the fact's snippets with "
        f"2fb46cc's on Python {(upstream_for_profiles(record) or '@?').split('@')[1]} (an error "
        "of a subclass of the recorded type counts as the same error; for the two peers a silent "
        "step's placeholder text counts as no output, and a parser snippet compares the final "
        "answer only). Where profile upstream differs, the difference is a registered safety "
        "deviation (docs/deviations.md); where profile fixed differs, a quirk is fixed. "
        "The cost of each quirk on real model code, and on the task suite "
        "(docs/research/tasks.md), is measured separately: see docs/research/quirk-ablation.md.",
        "",
        *_peer_lines(record),
    ]
    return lines


def _fixture_lines(fixtures: Path) -> list[str]:
    """What the recorded fixtures add beyond the memo."""
    return [
        "## What the conformance fixtures found",
        "",
        "The memo's facts are a handful of cases; `upstream_fixtures/` holds every case the "
        "recorder ran on 2fb46cc (inputs in `rlm_compat/tools/conformance/inputs/`; how they are "
        "recorded, and the matrix of every implementation against them, in docs/conformance.md):",
        "",
        *fixture_summary(fixtures),
        "",
        "Beyond the memo, the recordings show (each a group of cases in the matrix): comprehension "
        "bodies, lambdas and functions cannot see `env` (Python 3.10/3.11; only lambdas and "
        "functions on 3.12+); `+=`, unpacking, item and attribute writes, `class` and `*args` "
        "calls fail for want of RestrictedPython guards; a missing attribute reads as `None`; "
        "prints of an earlier step repeat in the next silent one; the last line runs twice; "
        "`timeout` is never enforced; and the injected `re` / `json` modules lead to `os`, "
        "`sys` and the real builtins (the escapes rlm_compat blocks in every profile, deviations "
        "of kind `safety`). Profile `upstream` reproduces every other recorded outcome, profile "
        "`fixed` differs only where a quirk switch is turned off (kind `fix`).",
        "",
    ]


def _quick_lines(record: Mapping[str, Any]) -> list[str]:
    """The paste-able script for the headline facts, with each implementation's real output."""
    quick = record.get("quick", {})
    if not quick:
        return []
    lines = [
        "## In one script",
        "",
        "The headline facts (`import re`, `re` without import, the comprehension, `+=`) as one "
        "plain script, run from the repository root:",
        "",
    ]
    for target in ("2fb46cc", *PROFILES):
        run = quick.get(target)
        if run is None:
            continue
        if target == "2fb46cc":
            command = (
                f"LITELLM_LOCAL_MODEL_COST_MAP=True PYTHONPATH=../up/rlm-2fb46cc/src "
                f"../venvs/up{run['python'].replace('.', '')}/bin/python - <<'EOF'"
            )
            title = f"2fb46cc, Python {run['python']}"
        else:
            command = "python - <<'EOF'"
            title = f"rlm_compat profile {target}, Python {run['python']}"
        lines += [f"{title}:", "", "```sh", command, *quick_script(target).splitlines(), "EOF", "```", ""]
        lines += ["```text", *run["stdout"].splitlines(), "```", ""]
    return lines


def _peer_lines(record: Mapping[str, Any]) -> list[str]:
    """Per peer: which snippets still behave as in 2fb46cc, which changed, which were not run."""
    key = upstream_for_profiles(record)
    results = record["results"]
    if key is None:
        return []
    lines = [
        "## The peers against 2fb46cc",
        "",
        "Outcomes compared as in the summary. Equal outcomes can have different causes (rlms never "
        "shows a last expression's value, so it agrees wherever 2fb46cc hides one); each "
        "snippet's rows below show which.",
        "",
    ]
    for peer in PEERS:
        if peer not in results:
            continue
        kept: list[str] = []
        changed: list[str] = []
        skipped: list[str] = []
        for probe in all_probes():
            outcome = results[peer].get(probe.id, {"skip": ""})
            if "skip" in outcome:
                skipped.append(probe.id)
            elif same(quiet(results[key].get(probe.id)), quiet(outcome)):
                kept.append(probe.id)
            else:
                changed.append(probe.id)
        lines.append(f"**{peer}** (compared with 2fb46cc on Python {key.split('@')[1]}):")
        lines.append("")
        for label, ids in (("as in 2fb46cc", kept), ("different", changed), ("not run", skipped)):
            if ids:
                lines.append(f"* {label} ({len(ids)}): " + ", ".join(f"`{i}`" for i in ids))
        lines.append("")
    return lines


MEMO_COMMIT = "2fb46cc59e64cddc0768ce0bf428138dab3016eb"
MEMO_SUBJECT = "initial RLM implementation"


def _revision_lines(record: Mapping[str, Any]) -> list[str]:
    """The memo's pinned revision against the checkout the snippets ran on."""
    found = record.get("revision", {})
    commit, subject = found.get("commit", "unknown"), found.get("subject", "")
    same = commit == MEMO_COMMIT and subject == MEMO_SUBJECT
    return [
        f"The memo pins `{MEMO_COMMIT}` (`{MEMO_SUBJECT}`). The checkout measured here is at "
        f"`{commit}` (`{subject}`): " + ("the same revision." if same else "**not the memo's revision**."),
    ]


def _summary_holds(record: Mapping[str, Any], fact: Fact) -> str:
    found: dict[str, bool] = {}
    for probe in fact.probes:
        for version, ok in verdicts(record, probe).items():
            found[version] = found.get(version, True) and ok
    if not found:
        return "–"
    no = [v for v, ok in found.items() if not ok]
    return "yes" if not no else f"**no** on {', '.join(no)}"


def _summary_against(record: Mapping[str, Any], fact: Fact, other: str) -> str:
    """How ``other`` compares with 2fb46cc on the facts' probes (peers: silent steps read as empty)."""
    key = upstream_for_profiles(record)
    results = record["results"]
    if key is None or other not in results:
        return "–"
    ran = [p for p in fact.probes if "skip" not in results[other].get(p.id, {"skip": ""})]
    if other in PEERS:
        differ = [p for p in ran if not same(quiet(results[key].get(p.id)), quiet(results[other][p.id]))]
    else:
        differ = [p for p in ran if not same(results[key].get(p.id), results[other][p.id])]
    skipped = len(fact.probes) - len(ran)
    note = f" ({skipped} not run)" if skipped else ""
    if not ran:
        return "not run"
    if not differ:
        return f"same{note}"
    return f"differs in {len(differ)} of {len(ran)}{note}"
