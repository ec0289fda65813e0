r"""Rebuild real_corpus/steps.jsonl from the sources listed in real_corpus/SOURCES.json.

Usage::

    python scripts/build_real_corpus.py SOURCES_DIR [--out real_corpus/steps.jsonl]

``SOURCES_DIR`` holds one git repository per source of SOURCES.json, named ``owner+name``: a
full clone from GitHub (the listed commits must be in it, so not ``--depth 1``), or a bare
repository at ``owner+name`` or ``owner+name/repo``. To make one from scratch::

    mkdir sources
    for repo in $(python -c "import json; print(*(s['repo'] for s in
                  json.load(open('real_corpus/SOURCES.json'))['sources']))"); do
        git clone -q "https://github.com/$repo" "sources/${repo/\//+}"
    done
    python scripts/build_real_corpus.py sources

Each listed file is read at its commit with ``git show`` (nothing is
checked out, nothing is run) and every code step in it becomes one JSON record with its
provenance (source, commit, path, model, licence) and how its environment is reconstructed for
replay. A run whose code steps repeat another run's exactly (a log copied to a second folder)
is kept once; a file listed at several commits (a notebook re-run and committed again) names its
runs with the commit. The records are the models' code as published: never edited, never generated.
"""

from __future__ import annotations

import argparse
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

from rlm_compat.errors import TrajectoryError  # noqa: E402
from rlm_compat.tools.formats.app_logs import (  # noqa: E402
    free_names,
    from_dspy_log,
    from_fabric,
    from_la3d_eval,
    from_la3d_events,
)
from rlm_compat.tools.formats.foreign_runs import from_dspy, from_rlms  # noqa: E402

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


def _read_with(reader: Any, data: bytes, suffix: str) -> Any:
    """A replay reader's reading of ``data`` (the readers take a path)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"file{suffix}"
        path.write_bytes(data)
        return reader(path)


def _step_records(node: Any) -> list[dict[str, Any]]:
    return [
        {"where": s.where, "code": s.code, "recorded_output": s.observation, "recorded_error": s.error}
        for s in node.steps
    ]


def _la3d_events(data: bytes) -> tuple[list[dict[str, Any]], str, int]:
    try:
        root = _read_with(from_la3d_events, data, ".jsonl").root
    except TrajectoryError:  # a log of a run that ran no code: no steps
        return [], "", 0
    return _step_records(root), root.query, root.context_chars or 0


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
    """LA3D/rlm's eval harness results: one run per trial, each iteration's code blocks in order,
    the code as the runner ran it (the replay reader's reading)."""
    try:
        run = _read_with(from_la3d_eval, data, ".json")
    except TrajectoryError:  # no trial ran code
        return []
    runs = []
    for node in run.nodes:
        steps = _step_records(node)
        tools = sorted({m for s in steps for m in _EVAL_TOOL.findall(s["code"])})
        env = {
            "context": {"kind": "placeholder", "chars": 0},
            "question": run.root.query or str(run.root.inputs.get("query", "")),
            "stand_ins": tools,
            "note": "dspy.RLM answering a SPARQL task over a remote endpoint: the run's context (ontology "
            "metadata) is not in the result file and stands empty; the SPARQL tools the code calls "
            "(sparql_query, res_head, query...) are stand-ins returning a fixed text; a markdown fence line "
            "at the code's start or end is dropped as the runner dropped it (kept where the recorded output "
            "is the syntax error it caused)",
        }
        suffix = f"#trial-{node.steps[0].where.split(',')[0].split()[-1]}" if len(run.nodes) > 1 else ""
        runs.append((suffix, steps, env))
    return runs


def _steps_fabric(data: bytes) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """fabric-rlm's ``Trajectory.write_jsonl`` (the replay reader's reading)."""
    root = _read_with(from_fabric, data, ".jsonl").root
    env = {
        "context": {"kind": "placeholder", "chars": 0},
        "variables": dict(root.inputs),
        "note": "fabric-rlm gives the REPL its signature's inputs as variables (no `context`): they are "
        "the recorded state after the first turn, less the names the run's code assigns",
    }
    return _step_records(root), env


PLACEHOLDER_CHARS = 8_000
"""The size of a placeholder input whose recorded size the log does not give (the real-corpus
tool caps every placeholder at this size anyway)."""


def _runs_dspy_log(data: bytes) -> list[tuple[str, list[dict[str, Any]], dict[str, Any]]]:
    """dspy.RLM's verbose log in a notebook's outputs: each run (a restart at iteration 1) is one
    corpus run, with the outputs where newer dspy logs them."""
    try:
        recorded = _read_with(from_dspy_log, data, ".ipynb")
    except TrajectoryError:  # no iteration record with code
        return []
    runs = []
    for number, node in enumerate(recorded.nodes, 1):
        if not node.steps[0].where.endswith(", iteration 1"):
            continue  # a run seen from its middle (concurrent runs' iterations interleaved)
        steps = _step_records(node)
        tools, inputs = free_names([s["code"] for s in steps])
        context = PLACEHOLDER_CHARS if "context" in inputs else 0
        env = {
            "context": {"kind": "placeholder", "chars": context},
            "placeholders": {name: PLACEHOLDER_CHARS for name in sorted(inputs - {"context"})},
            "stand_ins": sorted(tools),
            "note": "dspy.RLM (verbose log in a notebook's outputs): the signature's inputs the code reads "
            "and never assigns (context, docs, users...) hold placeholder text, their values are not in "
            "the log; the application's tools the code calls (regex_extract...) are stand-ins returning "
            "a fixed text; markdown fences are stripped as dspy strips them; where concurrent runs' "
            "iterations interleave in the log, only each run's first iteration is kept (the others "
            "cannot be assigned to their run)",
        }
        runs.append((f"#run-{number}" if len(recorded.nodes) > 1 else "", steps, env))
    return runs


READERS = {
    "rlms": _steps_rlms,
    "dspy": _steps_dspy,
    "la3d-events": _steps_la3d,
    "la3d-kag": _steps_kag,
    "fabric-rlm": _steps_fabric,
}
RUN_READERS = {"la3d-eval": _runs_la3d_eval, "dspy-log": _runs_dspy_log}
"""Readers of files holding several runs: each run is (trajectory suffix, steps, environment)."""


def build(sources_dir: Path) -> list[dict[str, Any]]:
    manifest = json.loads(SOURCES.read_text(encoding="utf-8"))
    records: list[dict[str, Any]] = []
    seen: set[str] = set()
    for source in manifest["sources"]:
        git_dir = _git_dir(sources_dir, source["repo"])
        paths = [entry["path"] for entry in source["files"]]
        for entry in source["files"]:
            data = _show(git_dir, entry["commit"], entry["path"])
            fmt = entry.get("format", source["format"])
            runs = RUN_READERS[fmt](data) if fmt in RUN_READERS else [("", *READERS[fmt](data))]
            for suffix, steps, env in runs:
                fingerprint = hashlib.sha256(json.dumps([s["code"] for s in steps]).encode()).hexdigest()
                if not steps or fingerprint in seen:
                    continue
                seen.add(fingerprint)
                at = f"@{entry['commit'][:8]}" if paths.count(entry["path"]) > 1 else ""
                trajectory = f"{source['repo']}/{entry['path']}{at}{suffix}"
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
