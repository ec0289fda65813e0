"""Inputs for the HTML view tests and benchmark: real runs recorded through a loopback model server,
a compare output directory built from RunRecords of such runs, conformance results from a real
conformance run, and a synthetic trajectory of any size that validates against the schema.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from rlm_compat import RLM
from rlm_compat.testing import ScriptedChatServer
from rlm_compat.tools.research.base import Grade, RunRecord, RunSpec

XSS_SCRIPT = "<script>window.__xss = 'script'; alert(1)</script>"
XSS_IMG = '"><img src=x onerror="window.__xss=\'img\'">'
XSS = f"{XSS_SCRIPT} {XSS_IMG} </script><script>window.__xss='close'</script>"


def _run(path: Path, script: Any, *, query: str, context: str, profile: str = "fixed") -> str:
    """Run an RLM over litellm against a scripted 127.0.0.1 server, writing its trajectory."""
    with ScriptedChatServer(script) as server:
        rlm = RLM(
            "openai/gpt-4o-mini",
            api_base=server.base_url,
            api_key="sk-loopback",
            isolation="inline",
            profile=profile,
            trajectory_path=str(path),
        )
        result = rlm.try_complete_result(query, context)
    return str(getattr(result, "answer", "") or "")


def _turn(messages: list[dict[str, Any]]) -> int:
    return sum(1 for m in messages if m["role"] == "assistant")


def tree_trajectory(path: Path) -> Path:
    """A root that peeks, starts a child RLM and a leaf call, hits an error, then answers."""

    def script(request: dict[str, Any]) -> str:
        messages = request["messages"]
        if messages[0]["role"] != "system":
            return "leaf answer: " + str(messages[-1]["content"])[:30]
        if "Depth: 1" in messages[0]["content"]:
            return 'The child looked.\n```python\nFINAL("child found needle-42")\n```'
        turn = _turn(messages)
        if turn == 0:
            return "First I look at the context.\n```python\nprint(context[:60])\n```"
        if turn == 1:
            return (
                "Now I ask a child RLM and a leaf model.\n```python\n"
                "found = recursive_llm('find the needle', context[:200])\n"
                "leaf = llm_query('summarise: ' + context[:40])\n"
                "print(found)\nprint(leaf)\n```"
            )
        if turn == 2:
            return "```python\nratio = 1 / 0\n```"
        return 'FINAL("needle-42")'

    context = "haystack " * 40 + "needle-42 " + "haystack " * 40
    _run(path, script, query="Which needle is in the context?", context=context)
    return path


REPLAY_CONTEXT = "alpha beta gamma delta epsilon"


def replayable_trajectory(path: Path) -> Path:
    """A run under ``fixed`` whose code diverges under ``upstream`` in the root (the import is
    refused) and in its child RLM (``n += 1`` fails), while the step between them matches.
    Replay it with the context :data:`REPLAY_CONTEXT`."""

    def script(request: dict[str, Any]) -> str:
        messages = request["messages"]
        if "Depth: 1" in messages[0]["content"]:
            child = ["```python\nn = 0\nfor w in context.split():\n    n += 1\nprint(n)\n```", 'FINAL("2")']
            return child[_turn(messages)]
        root = [
            "```python\nimport re\nwords = re.findall(r'[a-z]+', context)\nprint(len(words))\n```",
            "```python\nhalf = recursive_llm('count the words', context[:11])\nprint('child says', half)\n```",
            'FINAL("5")',
        ]
        return root[_turn(messages)]

    assert _run(path, script, query="How many words?", context=REPLAY_CONTEXT) == "5"
    return path


def xss_trajectory(path: Path) -> Path:
    """Replies, code, observations, a sub-call prompt and the answer all carry script payloads."""

    def script(request: dict[str, Any]) -> str:
        messages = request["messages"]
        if messages[0]["role"] != "system":
            return f"leaf {XSS}"
        turn = _turn(messages)
        if turn == 0:
            payload = json.dumps(XSS)
            return f"Reply with {XSS}\n```python\nprint({payload})\nleaf = llm_query({payload})\nprint(leaf)\n```"
        return f"FINAL({json.dumps('answer ' + XSS)})"

    _run(path, script, query=f"query {XSS}", context=f"context {XSS}")
    return path


# The ablation fixture: a generator expression that reads a top-level name fails under upstream's
# separate scopes (on every Python: PEP 709 inlines list comprehensions, not generator expressions)
# and works with the switch off or in the fixed profile.
_COUNT = "letter = 'a'\nwords = context.split()\nprint(sum(1 for w in words if w.startswith(letter)))"
_FIRST = "words = context.split()\nprint(words[0])"
_TASKS = {
    "count-words": ("How many words start with 'a'?", "apple avocado banana apricot cherry", "3", _COUNT),
    "first-word": ("Which word comes first?", "kiwi apple avocado banana", "kiwi", _FIRST),
}
_CONFIGS = ("fixed", "upstream", "upstream-without:separate_scopes")


def _task_script(code: str) -> Any:
    def script(request: dict[str, Any]) -> str:
        return _task_reply(request, code)

    return script


def _task_reply(request: dict[str, Any], code: str) -> str:
    messages = request["messages"]
    turn = _turn(messages)
    if turn == 0:
        return f"```python\n{code}\n```"
    last = str(messages[-1]["content"])
    if "Error" in last or "error" in last:
        return 'FINAL("unknown")'
    return f"FINAL({json.dumps(last.strip())})"


def compare_dir(directory: Path, *, with_chart: bool = True) -> Path:
    """A compare output directory: runs.jsonl of real runs, their trajectories, summary.json, a PNG."""
    (directory / "trajectories").mkdir(parents=True, exist_ok=True)
    lines = []
    passed_by_config: dict[str, list[bool]] = {}
    for task_id, (query, context, expected, code) in _TASKS.items():
        for config in _CONFIGS:
            spec = RunSpec(suite="demo", task_id=task_id, config=config, model="scripted")
            relative = f"trajectories/{spec.run_id.replace('/', '__')}.jsonl"
            answer = _run(
                directory / relative, _task_script(code), query=query, context=context, profile=config
            )
            _, events = _read(directory / relative)
            passed = answer == expected
            passed_by_config.setdefault(config, []).append(passed)
            record = RunRecord(
                spec=spec,
                corpus_sha256="0" * 64,
                answer=answer,
                grade=Grade(passed, "exact match" if passed else f"expected {expected!r}", "exact", "1"),
                iterations=sum(1 for e in events if e["kind"] == "repl_step"),
                calls=sum(1 for e in events if e["kind"] == "model_call_end"),
                prompt_tokens=sum(
                    e["data"].get("prompt_tokens") or 0 for e in events if e["kind"] == "model_call_end"
                ),
                completion_tokens=sum(
                    e["data"].get("completion_tokens") or 0 for e in events if e["kind"] == "model_call_end"
                ),
                wall_seconds=events[-1]["elapsed_seconds"],
                trajectory=relative,
            )
            lines.append(json.dumps(record.to_json()))
    (directory / "runs.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (directory / "summary.json").write_text(
        json.dumps({"suite": "demo", "runs": len(lines)}), encoding="utf-8"
    )
    if with_chart:
        rates = [sum(v) / len(v) for v in passed_by_config.values()]
        (directory / "pass_rate.png").write_bytes(bar_chart_png(rates))
    return directory


def _read(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    from rlm_compat.record import read_trajectory

    return read_trajectory(path)


def bar_chart_png(rates: list[float], *, width: int = 240, height: int = 120) -> bytes:
    """A bar chart of ``rates`` (0..1) as a PNG, encoded with zlib: the test needs no plotting library."""
    import struct
    import zlib

    colours = [(37, 87, 199), (180, 35, 24), (23, 128, 61), (161, 92, 7)]
    slot = width // max(len(rates), 1)
    rows = []
    for y in range(height):
        row = bytearray(b"\x00")
        for x in range(width):
            index, offset = divmod(x, slot)
            inside = index < len(rates) and slot // 6 <= offset < slot - slot // 6
            filled = inside and height - y <= rates[index] * (height - 4)
            row += bytes(colours[index % len(colours)] if filled else (250, 250, 250))
        rows.append(bytes(row))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(b"".join(rows)))
        + chunk(b"IEND", b"")
    )


def synthetic_trajectory(path: Path, steps: int, *, seed: int = 0) -> Path:
    """A schema-valid trajectory whose root runs ``steps`` iterations; every 10th starts a leaf call.

    Texts vary in size (a few long observations among short ones), like a long real run; the
    last step's code holds the marker ``LAST_STEP_MARKER`` for search tests.
    """
    rng = random.Random(seed)
    lines: list[dict[str, Any]] = [
        {
            "schema": "rlm_compat.trajectory",
            "schema_version": 1,
            "run_id": "synthetic",
            "created_at": "2026-01-01T00:00:00+00:00",
            "redacted": False,
        }
    ]
    seq = 0
    clock = 0.0
    next_id = 2

    def emit(kind: str, node: str, parent: str, depth: int, data: dict[str, Any]) -> None:
        nonlocal seq, clock
        seq += 1
        clock += 0.001
        lines.append(
            {
                "sequence": seq,
                "kind": kind,
                "elapsed_seconds": round(clock, 6),
                "depth": depth,
                "node_id": node,
                "parent_id": parent,
                "data": data,
            }
        )

    emit("run_start", "rlm-1", "", 0, {"query": "synthetic query", "context_chars": 10**6, "config": {}})
    emit("rlm_start", "rlm-1", "", 0, {"model": "m", "query": "synthetic query", "context_chars": 10**6})
    for i in range(1, steps + 1):
        call = f"call-{next_id}"
        next_id += 1
        code = f"chunk = context[{i * 1000}:{(i + 1) * 1000}]\nhits = [l for l in chunk.splitlines() if 'ERROR' in l]\nprint(len(hits), {i})"
        if i == steps:
            code += "  # LAST_STEP_MARKER"
        reply = f"Step {i}: scanning the next chunk.\n```python\n{code}\n```"
        emit(
            "model_call_start",
            call,
            "rlm-1",
            0,
            {
                "model": "m",
                "is_leaf": False,
                "iteration": i,
                "message_count": 2 * i,
                "messages_digest": "sha256:0000000000000000",
                "messages": [],
                "attempt": 1,
            },
        )
        emit(
            "model_call_end",
            call,
            "rlm-1",
            0,
            {
                "model": "m",
                "is_leaf": False,
                "reply": reply,
                "prompt_tokens": 100 + i,
                "completion_tokens": 40,
                "total_tokens": 140 + i,
                "cached_tokens": None,
                "cost_usd": 0.0001,
                "latency_seconds": 0.5,
                "retries": 0,
            },
        )
        if i % 10 == 0:
            emit("subcall_start", "rlm-1", "", 0, {"function": "llm_query", "count": 1})
            leaf = f"call-{next_id}"
            next_id += 1
            emit(
                "model_call_start",
                leaf,
                "rlm-1",
                1,
                {
                    "model": "m",
                    "is_leaf": True,
                    "iteration": None,
                    "message_count": 1,
                    "messages_digest": "sha256:0000000000000000",
                    "messages": [{"role": "user", "content": f"summarise chunk {i}"}],
                    "attempt": 1,
                },
            )
            emit(
                "model_call_end",
                leaf,
                "rlm-1",
                1,
                {
                    "model": "m",
                    "is_leaf": True,
                    "reply": f"summary {i}",
                    "prompt_tokens": 5,
                    "completion_tokens": 2,
                    "total_tokens": 7,
                    "cached_tokens": None,
                    "cost_usd": 0.00001,
                    "latency_seconds": 0.1,
                    "retries": 0,
                },
            )
            emit(
                "subcall_end",
                "rlm-1",
                "",
                0,
                {"function": "llm_query", "count": 1, "errors": 0, "duration_seconds": 0.1},
            )
        size = 4000 if rng.random() < 0.05 else 60
        output = (f"{i} ERROR line " * (size // 14 + 1))[:size]
        emit(
            "repl_step",
            "rlm-1",
            "",
            0,
            {
                "iteration": i,
                "code": reply,
                "output": output,
                "error": False,
                "duration_seconds": 0.001,
                "runner": "inline",
            },
        )
    emit("final_answer", "rlm-1", "", 0, {"answer": "done", "method": "parsed"})
    emit("rlm_end", "rlm-1", "", 0, {"answer": "done", "iterations": steps})
    emit("run_end", "rlm-1", "", 0, {"answer": "done", "stats": {"llm_calls": next_id - 2}})
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    return path


CI_ENV = "RLM_COMPAT_CI"
CHROMIUM_ENV = "RLM_COMPAT_CHROMIUM"


def chromium_path() -> str | None:
    """The system's Chromium (``$RLM_COMPAT_CHROMIUM`` first); Playwright's own download is not used."""
    import os
    import shutil

    named = os.environ.get(CHROMIUM_ENV)
    if named:
        return named if Path(named).exists() else None
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def launch_args() -> list[str]:
    """Chromium refuses to run as root with its sandbox on (a CI container): turn it off there only."""
    import os

    return ["--no-sandbox"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
