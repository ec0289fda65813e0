"""Rebuild real_corpus/steps.jsonl from the sources listed in real_corpus/SOURCES.json.

Usage::

    python scripts/build_real_corpus.py SOURCES_DIR [--out real_corpus/steps.jsonl]

``SOURCES_DIR`` holds one git repository per source, named ``owner+name`` (the layout the
research tools' ``fetch`` leaves under /work/.mirror: ``owner+name/repo``), or a plain clone
named ``owner+name``. Each listed file is read at its commit with ``git show`` (nothing is
checked out, nothing is run) and every code step in it becomes one JSON record with its
provenance (source, commit, path, model, licence) and how its environment is reconstructed for
replay. A run whose code steps repeat another run's exactly (a log copied to a second folder)
is kept once. The records are the models' code as published: never edited, never generated.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rlm_compat.tools.replay.foreign import from_dspy, from_rlms  # noqa: E402

SOURCES = ROOT / "real_corpus" / "SOURCES.json"


def _git_dir(base: Path, repo: str) -> Path:
    name = repo.replace("/", "+")
    for candidate in (base / name / "repo", base / name):
        if (candidate / "HEAD").exists() or (candidate / ".git").exists():
            return candidate
    raise SystemExit(f"{repo}: no git repository at {base / name} (fetch it first)")


def _show(git_dir: Path, commit: str, path: str) -> bytes:
    done = subprocess.run(
        [
            "git",
            f"--git-dir={git_dir / '.git'}" if (git_dir / ".git").exists() else f"--git-dir={git_dir}",
            "show",
            f"{commit}:{path}",
        ],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{git_dir}: cannot read {commit}:{path}: {done.stderr.decode(errors='replace')}")
    return done.stdout


def _steps_rlms(data: bytes) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "log.jsonl"
        path.write_bytes(data)
        run = from_rlms(path)
    steps = [
        {
            "where": s.where,
            "code": s.code,
            "recorded_output": s.observation,
            "recorded_error": s.error,
            "subcall_replies": [c.reply for c in s.subcalls],
        }
        for s in run.steps
        if s.node == "root"
    ]
    env = {
        "context": {"kind": "recorded", "text": run.context or ""},
        "aliases": ["context_0", "completion_context", "session_context_0"],
        "note": "rlms gives the REPL the run's prompt as its context: the first run_context prompt, "
        "recorded in the log; context_0, completion_context and session_context_0 are rlms' other "
        "names for it (local, jupyter and session REPLs)",
    }
    return steps, env


def _steps_dspy(data: bytes) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    document = json.loads(data)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.json"
        path.write_bytes(data)
        run = from_dspy(path)
    sizes = {
        v.get("name"): v.get("size_chars")
        for v in document.get("context_variables", [])
        if isinstance(v, dict)
    }
    steps = [
        {"where": s.where, "code": s.code, "recorded_output": s.observation, "recorded_error": s.error}
        for s in run.steps
    ]
    env = {
        "context": {"kind": "placeholder", "chars": int(sizes.get("context") or 0)},
        "question": str(document.get("question", "")),
        "note": "the run's context (package source files) is not published: a placeholder text of the "
        "recorded size stands in; question is the recorded question",
    }
    return steps, env


_LA3D_TOOL = re.compile(r"\b(sparql_\w+|g_\w+|ctx_\w+|endpoint_info)\s*\(")
"""The graph tools of LA3D/rlm's reasoningbank runs (experiments/reasoningbank/ctx/)."""

_KAG_TOOL = re.compile(r"\b(op_\w+|g_\w+|validate_graph|finalize_graph|graph_stats|query_contains)\s*\(")
"""The graph-building and graph-reading tools of LA3D/rlm's KAG runs (experiments/KAG/)."""

_EVAL_TOOL = re.compile(
    r"\b(sparql_\w+|res_\w+|query|describe_entity|search_entity|probe_relationships)\s*\("
)
"""The SPARQL tools of LA3D/rlm's eval harness runs (evals/runners/task_runner.py)."""

_OPENING_FENCE = re.compile(r"\A\s*```[A-Za-z0-9_+-]*[ \t]*\n")
_CLOSING_FENCE = re.compile(r"(\n```[ \t]*)+\s*\Z")
_RECORDED_SYNTAX_ERROR = re.compile(r"\A\[Error\] (invalid syntax|SyntaxError|Syntax error)")


def _as_run(code: str, recorded_output: str) -> str:
    """The code as the runner executed it: LA3D's harness strips a markdown fence line at the start
    and the fence lines at the end of the code field, and its recorded output is that of the
    stripped code, except in the runs whose recorded output is a syntax error (there the fences
    were run as written)."""
    if _RECORDED_SYNTAX_ERROR.match(recorded_output):
        return code
    return _CLOSING_FENCE.sub("", _OPENING_FENCE.sub("", code, count=1), count=1)


def _la3d_events(data: bytes) -> tuple[list[dict[str, Any]], str, int]:
    steps: list[dict[str, Any]] = []
    question, chars = "", 0
    for number, line in enumerate(data.decode("utf-8").splitlines(), 1):
        if not line.strip():
            continue
        record = json.loads(line)
        body = record.get("data") if isinstance(record.get("data"), dict) else {}
        if record.get("event_type") == "run_start":
            question = str(body.get("task", ""))
            chars = int(body.get("context_size") or body.get("document_size") or 0)
        elif record.get("event_type") == "iteration" and isinstance(body.get("code"), str):
            output = body.get("output")
            steps.append(
                {
                    "where": f"line {number}",
                    "code": body["code"],
                    "recorded_output": output if isinstance(output, str) else None,
                    "recorded_error": None,
                }
            )
    return steps, question, chars


def _steps_la3d(data: bytes) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    steps, question, chars = _la3d_events(data)
    tools = sorted({m for s in steps for m in _LA3D_TOOL.findall(s["code"])})
    env = {
        "context": {"kind": "placeholder", "chars": chars},
        "question": question,
        "stand_ins": tools,
        "note": "dspy.RLM over an RDF graph: the context (a graph summary) is not published, a placeholder "
        "of the recorded size stands in; the graph tools the run's code calls (sparql_query, g_stats...) "
        "are stand-ins returning a fixed text, so code that needs their real results fails under every "
        "implementation alike",
    }
    return steps, env


def _steps_kag(data: bytes) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    steps, question, chars = _la3d_events(data)
    tools = sorted({m for s in steps for m in _KAG_TOOL.findall(s["code"])})
    env = {
        "context": {"kind": "placeholder", "chars": chars},
        "question": question,
        "stand_ins": tools,
        "note": "dspy.RLM building a knowledge graph from an OCR'd paper: the document is not in the log, "
        "a placeholder of the recorded size stands in; the run's `blocks` list is not reconstructed, so "
        "code that reads it fails under every implementation alike; the graph tools the code calls "
        "(op_create_node, g_search, validate_graph...) are stand-ins returning a fixed text",
    }
    return steps, env


def _runs_la3d_eval(data: bytes) -> list[tuple[str, list[dict[str, Any]], dict[str, Any]]]:
    """LA3D/rlm's eval harness results: one run per trial, each iteration's code blocks in order."""
    document = json.loads(data)
    runs = []
    for number, trial in enumerate(document.get("trial_results", []), 1):
        steps = []
        for turn in trial.get("transcript") or []:
            for block_number, block in enumerate(turn.get("code_blocks") or [], 1):
                result = block.get("result") if isinstance(block.get("result"), dict) else {}
                stdout, stderr = str(result.get("stdout") or ""), str(result.get("stderr") or "")
                steps.append(
                    {
                        "where": f"trial {number}, iteration {turn.get('iteration')}, "
                        f"code block {block_number}",
                        "code": _as_run(str(block.get("code", "")), stdout),
                        "recorded_output": stdout + stderr,
                        "recorded_error": bool(stderr.strip()) or stdout.startswith("[Error]"),
                    }
                )
        tools = sorted({m for s in steps for m in _EVAL_TOOL.findall(s["code"])})
        env = {
            "context": {"kind": "placeholder", "chars": 0},
            "question": str(document.get("task_query", "")),
            "stand_ins": tools,
            "note": "dspy.RLM answering a SPARQL task over a remote endpoint: the run's context (ontology "
            "metadata) is not in the result file and stands empty; the SPARQL tools the code calls "
            "(sparql_query, res_head, query...) are stand-ins returning a fixed text; a markdown fence line "
            "at the code's start or end is dropped as the runner dropped it (kept where the recorded output "
            "is the syntax error it caused)",
        }
        runs.append((f"#trial-{number}" if len(document["trial_results"]) > 1 else "", steps, env))
    return runs


def _assigned(code: str) -> set[str]:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return set()
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _steps_fabric(data: bytes) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """fabric-rlm's ``Trajectory.write_jsonl``: a metadata line, then one line per turn with the
    code, stdout, stderr, error and the REPL's state after the turn."""
    lines = [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]
    turns = [t for t in lines if isinstance(t.get("code"), str)]
    steps = [
        {
            "where": f"turn {t.get('turn')}",
            "code": t["code"],
            "recorded_output": str(t.get("stdout") or "") + str(t.get("stderr") or ""),
            "recorded_error": t.get("error") is not None,
        }
        for t in turns
    ]
    made = set().union(*(_assigned(t["code"]) for t in turns)) if turns else set()
    first = turns[0].get("state") if turns and isinstance(turns[0].get("state"), dict) else {}
    env = {
        "context": {"kind": "placeholder", "chars": 0},
        "variables": {k: v for k, v in first.items() if k not in made},
        "note": "fabric-rlm gives the REPL its signature's inputs as variables (no `context`): they are "
        "the recorded state after the first turn, less the names the run's code assigns",
    }
    return steps, env


READERS = {
    "rlms": _steps_rlms,
    "dspy": _steps_dspy,
    "la3d-events": _steps_la3d,
    "la3d-kag": _steps_kag,
    "fabric-rlm": _steps_fabric,
}
RUN_READERS = {"la3d-eval": _runs_la3d_eval}
"""Readers of files holding several runs: each run is (trajectory suffix, steps, environment)."""


def build(sources_dir: Path) -> list[dict[str, Any]]:
    manifest = json.loads(SOURCES.read_text(encoding="utf-8"))
    records: list[dict[str, Any]] = []
    seen: set[str] = set()
    for source in manifest["sources"]:
        git_dir = _git_dir(sources_dir, source["repo"])
        for entry in source["files"]:
            data = _show(git_dir, entry["commit"], entry["path"])
            fmt = entry.get("format", source["format"])
            runs = RUN_READERS[fmt](data) if fmt in RUN_READERS else [("", *READERS[fmt](data))]
            for suffix, steps, env in runs:
                fingerprint = hashlib.sha256(json.dumps([s["code"] for s in steps]).encode()).hexdigest()
                if not steps or fingerprint in seen:
                    continue
                seen.add(fingerprint)
                trajectory = f"{source['repo']}/{entry['path']}{suffix}"
                records.extend(_records(trajectory, source, entry, fmt, env, steps))
    return records


def _records(
    trajectory: str,
    source: dict[str, Any],
    entry: dict[str, Any],
    fmt: str,
    env: dict[str, Any],
    steps: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    records = []
    for index, step in enumerate(steps, 1):
        records.append(
            {
                "id": f"{trajectory}#{index}",
                "trajectory": trajectory,
                "index": index,
                "source": source["repo"],
                "commit": entry["commit"],
                "path": entry["path"],
                "model": entry["model"],
                "licence": source["licence"],
                "format": fmt,
                "environment": env,
                **step,
            }
        )
    return records


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sources_dir", type=Path, help="directory of fetched sources (owner+name/...)")
    parser.add_argument("--out", type=Path, default=ROOT / "real_corpus" / "steps.jsonl")
    args = parser.parse_args()
    records = build(args.sources_dir)
    with args.out.open("w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
    sources = {r["source"] for r in records}
    models = {r["model"] for r in records}
    trajectories = {r["trajectory"] for r in records}
    print(
        f"wrote {args.out}: {len(records)} code steps from {len(trajectories)} runs, "
        f"{len(sources)} sources, {len(models)} models"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
