"""``rlm-compat baseline``: measure the unofficial-baseline memo's facts and write the doc.

Every probe of :mod:`.baseline_facts` runs through the conformance suite's implementation
adapters (docs/protocol.md) on ysz/recursive-llm 2fb46cc (the checkout, under each Python
given), on the PyPI peers in their own venvs, and on rlm_compat's two profiles in process. The
outcomes are stored in a JSON record next to the Markdown; the Markdown is a pure function of
the record, the facts and the checked-in fixtures, so ``tests/tools/research/test_research_baseline.py`` can
re-run the rlm_compat part and re-render the doc without upstream, and the doc cannot rot
silently.
"""

from __future__ import annotations

import ast
import json
import platform
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ... import __version__
from ..tool_errors import ToolUsageError
from .baseline_facts import FACTS, Expect, Fact, Probe, all_probes

__all__ = [
    "RECORD_VERSION",
    "collect",
    "fixture_summary",
    "probe_definitions",
    "python_dependent",
    "render",
    "run_profiles",
    "verdicts",
]

RECORD_VERSION = 1
PROFILES = ("upstream", "fixed")
PEERS = ("recursive-llm-0.5.0", "rlms-0.1.1")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")


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
    from ..conformance.implementations import make_adapter

    chosen = list(all_probes() if probes is None else probes)
    return {profile: _run(make_adapter(profile), chosen) for profile in PROFILES}


def collect(checkout: Path, pythons: Sequence[str], peers: Mapping[str, str]) -> dict[str, Any]:
    """Run every probe everywhere; the JSON record the doc is rendered from.

    ``pythons`` are interpreters with RestrictedPython and litellm for the 2fb46cc checkout (as
    for ``rlm-compat record``); ``peers`` maps ``recursive-llm-0.5.0`` / ``rlms-0.1.1`` to the
    interpreter of its venv. No path is stored: the record names versions only.
    """
    from ..conformance.implementations import make_adapter

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
        key = f"2fb46cc@{_minor(version)}"
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
    chosen = next((p for p in pythons if _python_minor(p) == _minor(platform.python_version())), pythons[0])
    quick["2fb46cc"] = {
        "python": _python_minor(chosen),
        "stdout": run_quick(chosen, "2fb46cc", str(checkout.resolve() / "src")),
    }
    for profile in PROFILES:
        quick[profile] = {"python": _minor(platform.python_version()), "stdout": run_quick_here(profile)}
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


_CALLS = ("compile_restricted_exec", "exec", "eval")


def source_facts(checkout: Path) -> dict[str, list[str]]:
    """Where the memo's structural claims sit in the checkout, per fact id (read with ``ast``).

    Only names, line numbers and argument counts are reported: the doc never quotes upstream code.
    """
    found: dict[str, list[str]] = {}

    def note(fact: str, path: str, line: int, what: str) -> None:
        found.setdefault(fact, []).append(f"`{path}:{line}`: {what}")

    def parse(path: str) -> ast.Module | None:
        file = checkout / path
        return ast.parse(file.read_text(encoding="utf-8")) if file.is_file() else None

    repl = parse("src/rlm/repl.py")
    for node in ast.walk(repl) if repl else ():
        if isinstance(node, ast.ClassDef) and node.name == "REPLExecutor":
            note("executor", "src/rlm/repl.py", node.lineno, "class `REPLExecutor`")
        elif isinstance(node, ast.Call):
            func = node.func
            name = (
                func.id
                if isinstance(func, ast.Name)
                else func.attr
                if isinstance(func, ast.Attribute)
                else ""
            )
            if name in _CALLS:
                fact = "last_line" if name == "eval" else "executor"
                note(
                    fact,
                    "src/rlm/repl.py",
                    node.lineno,
                    f"call `{name}(...)` with {len(node.args)} positional argument(s)",
                )
        elif isinstance(node, ast.FunctionDef) and node.name == "_build_globals":
            for inner in ast.walk(node):
                if isinstance(inner, ast.Dict):
                    keys = [
                        k.value
                        for k in inner.keys
                        if isinstance(k, ast.Constant) and isinstance(k.value, str)
                    ]
                    if "re" in keys:
                        names = ", ".join(f"`{k}`" for k in keys)
                        note(
                            "injected",
                            "src/rlm/repl.py",
                            inner.lineno,
                            f"`_build_globals` dict with keys {names}",
                        )
        elif isinstance(node, ast.FunctionDef) and node.name == "_extract_code":
            note("fences", "src/rlm/repl.py", node.lineno, "method `_extract_code` (fence stripping)")
    parser = parse("src/rlm/parser.py")
    for node in parser.body if parser else ():
        if isinstance(node, ast.FunctionDef) and node.name in ("extract_final", "extract_final_var"):
            note("final", "src/rlm/parser.py", node.lineno, f"function `{node.name}`")
    prompts = parse("src/rlm/prompts.py")
    for node in ast.walk(prompts) if prompts else ():
        if isinstance(node, ast.FunctionDef) and node.name == "build_system_prompt":
            note("prompt", "src/rlm/prompts.py", node.lineno, "function `build_system_prompt`")
    tests = checkout / "tests" / "test_repl.py"
    tree = parse("tests/test_repl.py")
    if tree is not None:
        text = tests.read_text(encoding="utf-8")
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and "import os" in (
                ast.get_source_segment(text, node) or ""
            ):
                note(
                    "import_os", "tests/test_repl.py", node.lineno, f"test `{node.name}` executes `import os`"
                )
    for lines in found.values():
        lines.sort(key=lambda line: int(line.split(":")[1].split("`")[0]))
    return found


def revision(checkout: Path) -> dict[str, str]:
    """The checkout's commit and subject (``git log -1``), or why they are unknown."""
    import subprocess

    try:
        done = subprocess.run(
            ["git", "-C", str(checkout), "log", "-1", "--format=%H%n%s"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"commit": "unknown", "subject": f"git failed: {exc}"}
    if done.returncode != 0:
        return {"commit": "unknown", "subject": f"not a git checkout ({done.stderr.strip()[:200]})"}
    commit, _, subject = done.stdout.strip().partition("\n")
    return {"commit": commit, "subject": subject}


QUICK_CODE = (
    "import re",
    'print(re.findall(r"[A-Z]\\w+", context))',
    "chunks = [context[i:i+10] for i in range(0, len(context), 10)]",
    "count = 0\ncount += 1",
)
"""The headline facts as one plain script a reader can paste (the doc shows it and its output)."""


def quick_script(target: str) -> str:
    """The script for ``target``: ``2fb46cc`` (imports ``rlm``) or an rlm_compat profile name."""
    if target == "2fb46cc":
        head = ["from rlm.repl import REPLExecutor", "", "def new():", "    return REPLExecutor()"]
    else:
        head = [
            "from rlm_compat.repl import REPLExecutor",
            "",
            "def new():",
            f'    return REPLExecutor(profile="{target}")',
        ]
    return "\n".join(
        [
            *head,
            "",
            'env = {"context": "Hello World from the RLM baseline memo"}',
            "codes = [",
            *(f"    {json.dumps(code)}," for code in QUICK_CODE),
            "]",
            "for code in codes:",
            "    try:",
            '        print("->", repr(new().execute(code, env)))',
            "    except Exception as e:",
            '        print("->", type(e).__name__ + ":", e)',
            "",
        ]
    )


def run_quick(python: str, target: str, pythonpath: str | None = None) -> str:
    """Run :func:`quick_script` under ``python`` in an empty temporary directory; its stdout.

    Only the script's own lines come back (each starts with ``->``), so no path of this machine
    reaches the doc; a failure to run is a clear error with the tail of stderr.
    """
    import os
    import subprocess
    import tempfile

    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TMPDIR", "HOME")}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    env["PYTHONHASHSEED"] = "0"
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    with tempfile.TemporaryDirectory() as cwd:
        try:
            done = subprocess.run(
                [python, "-"],
                input=quick_script(target),
                capture_output=True,
                text=True,
                cwd=cwd,
                env=env,
                timeout=300,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ToolUsageError(f"cannot run the quick script with {python}: {exc}") from None
    if done.returncode != 0:
        raise ToolUsageError(
            f"the quick script failed under {python} (exit {done.returncode}): {done.stderr[-800:]}"
        )
    return "".join(line + "\n" for line in done.stdout.splitlines() if line.startswith("->"))


def run_quick_here(profile: str) -> str:
    """:func:`run_quick` for an rlm_compat profile with this interpreter and this rlm_compat."""
    import sys

    package_root = str(Path(__file__).resolve().parents[3])
    return run_quick(sys.executable, profile, package_root)


def _python_minor(python: str) -> str:
    """``3.11`` for an interpreter path (asked, not guessed from the name)."""
    import subprocess

    try:
        done = subprocess.run(
            [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise ToolUsageError(f"cannot run {python}: {exc}") from None
    return done.stdout.strip()


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _upstream_keys(record: Mapping[str, Any]) -> list[str]:
    return [i["key"] for i in record["implementations"] if i["key"].startswith("2fb46cc@")]


def python_dependent(record: Mapping[str, Any]) -> set[str]:
    """Probe ids whose 2fb46cc outcome differs between the recorded Pythons."""
    keys = _upstream_keys(record)
    return {
        probe["id"]
        for probe in record["probes"]
        if len({json.dumps(record["results"][k].get(probe["id"]), sort_keys=True) for k in keys}) > 1
    }


def _holds(expect: Expect, outcome: Mapping[str, Any]) -> bool:
    if "steps" in outcome:
        steps = outcome["steps"]
        if not steps:
            return False
        step = steps[expect.step] if -len(steps) <= expect.step < len(steps) else {}
        if expect.outcome == "hang":
            return bool(step.get("hang"))
        if expect.outcome == "output":
            return "output" in step and expect.contains in step["output"]
        if expect.outcome == "error":
            error = step.get("error")
            return error is not None and expect.contains in f"{error['type']}: {error['message']}"
        if expect.outcome == "env":
            return bool(step.get("env", {}).get(expect.name) == expect.value)
        return False
    if expect.outcome == "answer" and "answer" in outcome:
        wanted = expect.contains if expect.value is None and expect.contains else expect.value
        return bool(outcome["answer"] == wanted)
    return False


def verdicts(record: Mapping[str, Any], probe: Probe) -> dict[str, bool]:
    """Per 2fb46cc Python: whether the memo's expectation of ``probe`` holds as measured."""
    if probe.expect is None:
        return {}
    return {
        key.split("@", 1)[1]: _holds(probe.expect, record["results"][key].get(probe.id, {}))
        for key in _upstream_keys(record)
    }


# --- fixtures -------------------------------------------------------------------------------------


def fixture_summary(root: Path) -> list[str]:
    """Markdown lines: what the recorded fixtures and the deviations registry say about 2fb46cc."""
    from ..conformance.deviations import Registry
    from ..conformance.fixtures import FixtureSet, read_jsonl

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
    from ...profiles import QUIRKS

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


# --- rendering ------------------------------------------------------------------------------------


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
    upstream = _upstream_keys(record)
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
    implementations = record["implementations"]
    lines = [
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
        "| row | implementation | Python | packages |",
        "| --- | --- | --- | --- |",
    ]
    for info in implementations:
        packages = ", ".join(f"{k} {v}" for k, v in sorted(info.get("packages", {}).items()) if v)
        lines.append(f"| `{info['key']}` | {info['name']} | {info['python']} | {packages or '–'} |")
    lines += ["", *_revision_lines(record), "", *_quick_lines(record), "## Summary"]
    lines += [
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
        f"2fb46cc's on Python {(_upstream_for_profiles(record) or '@?').split('@')[1]} (an error "
        "of a subclass of the recorded type counts as the same error; for the two peers a silent "
        "step's placeholder text counts as no output, and a parser snippet compares the final "
        "answer only). Where profile upstream differs, the difference is a registered safety "
        "deviation (docs/deviations.md); where profile fixed differs, a quirk is fixed. "
        "The cost of each quirk on real model code, and on the task suite "
        "(docs/research/tasks.md), is measured separately: see docs/research/quirk-ablation.md.",
        "",
        *_peer_lines(record),
        "## The facts",
        "",
    ]
    for number, fact in enumerate(FACTS, 1):
        lines += _fact(record, number, fact)
    lines += [
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
    return "\n".join(lines)


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
    key = _upstream_for_profiles(record)
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
            elif _same(_quiet(results[key].get(probe.id)), _quiet(outcome)):
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


def _upstream_for_profiles(record: Mapping[str, Any]) -> str | None:
    """The 2fb46cc row recorded on the Python rlm_compat ran on (else the first)."""
    keys = _upstream_keys(record)
    python = next((i["python"] for i in record["implementations"] if i["key"] in PROFILES), "")
    wanted = f"2fb46cc@{_minor(python)}"
    return wanted if wanted in keys else (keys[0] if keys else None)


def _summary_holds(record: Mapping[str, Any], fact: Fact) -> str:
    found: dict[str, bool] = {}
    for probe in fact.probes:
        for version, ok in verdicts(record, probe).items():
            found[version] = found.get(version, True) and ok
    if not found:
        return "–"
    no = [v for v, ok in found.items() if not ok]
    return "yes" if not no else f"**no** on {', '.join(no)}"


_SILENT = "Code executed successfully (no output)"


def _quiet(outcome: Any) -> Any:
    """A peer's view: a silent step's placeholder reads as empty output, a parser row as its answer."""
    if isinstance(outcome, dict) and "is_final" in outcome:
        return {"answer": outcome.get("answer")}
    if isinstance(outcome, dict) and "steps" in outcome:
        steps = [
            {**step, "output": ""} if step.get("output") == _SILENT else step for step in outcome["steps"]
        ]
        return {**outcome, "steps": steps}
    return outcome


def _summary_against(record: Mapping[str, Any], fact: Fact, other: str) -> str:
    """How ``other`` compares with 2fb46cc on the facts' probes (peers: silent steps read as empty)."""
    key = _upstream_for_profiles(record)
    results = record["results"]
    if key is None or other not in results:
        return "–"
    ran = [p for p in fact.probes if "skip" not in results[other].get(p.id, {"skip": ""})]
    if other in PEERS:
        differ = [p for p in ran if not _same(_quiet(results[key].get(p.id)), _quiet(results[other][p.id]))]
    else:
        differ = [p for p in ran if not _same(results[key].get(p.id), results[other][p.id])]
    skipped = len(fact.probes) - len(ran)
    note = f" ({skipped} not run)" if skipped else ""
    if not ran:
        return "not run"
    if not differ:
        return f"same{note}"
    return f"differs in {len(differ)} of {len(ran)}{note}"


def _same(recorded: Any, ours: Any) -> bool:
    """Equal outcomes, an error of a subclass of the recorded type counting as the same error."""
    if isinstance(recorded, dict) and isinstance(ours, dict):
        if "type" in recorded and "message" in recorded and "type" in ours:
            return bool(
                recorded["message"] == ours.get("message")
                and (recorded["type"] == ours["type"] or recorded["type"] in ours.get("isa", ()))
            )
        return recorded.keys() == ours.keys() and all(_same(recorded[k], ours[k]) for k in recorded)
    if isinstance(recorded, list) and isinstance(ours, list):
        return len(recorded) == len(ours) and all(_same(a, b) for a, b in zip(recorded, ours, strict=True))
    return bool(recorded == ours)
