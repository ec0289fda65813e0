"""Logs of applications built on an RLM loop, as replayable steps.

:mod:`.foreign` reads what rlms and dspy.RLM write themselves; these are the shapes public projects
around them saved their runs in, read from the published files (no code of theirs is used):

``dspy-log``: dspy.RLM's ``verbose=True`` log (logger ``dspy.predict.rlm``, one ``RLM iteration
i/N`` record per iteration: ``Reasoning: ...``, then ``Code:`` and the code as the model wrote it;
newer dspy adds an ``Output (N chars):`` record with what the step printed), as a text file or in the
outputs of a Jupyter notebook (Qredence/fleet-rlm's, dspy's own tutorials). The code is run the way
dspy 3.1 runs it (a reply that is one whole fenced block loses its fence lines, any other runs as
written); a step whose output the log does not hold diverges only by failing to run. A run starts
at iteration 1: each run of the file is its own RLM node. Runs a threaded evaluation made at once
interleave their iterations in one log (1, 1, 2, 1, 3, 2...): they cannot be told apart, so each
step of such a log is a run of its own, never glued to another run's steps.

``la3d-events``: LA3D/rlm's event logs around dspy.RLM (``{"event_type", "timestamp", "data"}``
lines: ``run_start`` with the task, ``iteration`` with reasoning, code and output, tool calls and
results, ``run_complete``). ``la3d-eval``: its eval harness's results (one JSON object whose
``trial_results`` each hold a ``transcript`` of iterations with ``code_blocks`` {code, result
{stdout, stderr}}); each trial is its own node. The harness dropped a markdown fence line at the
start and at the end of the code before running it, except where the recorded output is the syntax
error the fences caused: replay runs what the harness ran.

``fabric-rlm``: pawarbi/fabric-rlm-core's ``Trajectory.write_jsonl`` (a ``{"metadata": {...}}`` line,
then one line per turn with code, stdout, stderr, error and the REPL's ``state`` after the turn);
the signature's inputs (the first turn's state less what the code assigns) are the node's inputs.

The applications' own tools (LA3D's ``sparql_query``..., fleet-rlm's ``peek``, ``grep``...) are
named in ``RecordedRun.tools``: their results are not in the logs, so replay makes each fail
saying so. Lines and fields a reader does not know are skipped with a notice, never refused.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import itertools
import json
import os
import re
from pathlib import Path
from typing import Any

from ...errors import TrajectoryError
from ..runs.steps import RecordedNode, RecordedRun, RecordedStep, RecordedTurn

__all__ = [
    "APP_FORMATS",
    "detect_app_format",
    "free_names",
    "from_dspy_log",
    "from_fabric",
    "from_la3d_eval",
    "from_la3d_events",
    "strip_fences",
]

APP_FORMATS = ("dspy-log", "la3d-events", "la3d-eval", "fabric-rlm")

_HEADER = re.compile(r"^(?:.*\bdspy\.predict\.rlm: )?RLM iteration (\d+)/(\d+)[ \t]*$", re.MULTILINE)
_WHOLE_FENCE = re.compile(r"```(python|py)?[ \t\r\f\v]*\n(?P<body>.*)\n```\s*", re.DOTALL)
_IN_NOTEBOOK = re.compile(r"RLM iteration \d+/\d+")
_OUTPUT_LINE = re.compile(r".*\bdspy\.predict\.rlm: Output \(([\d,]+) chars\):[ \t]*\n")
_LOG_LINE = re.compile(r"^\d{4}[/-]\d\d[/-]\d\d[ T]\d\d:\d\d:\d\d\S* ", re.MULTILINE)
_OPENING_FENCE = re.compile(r"\A\s*```[A-Za-z0-9_+-]*[ \t]*\n")
_CLOSING_FENCE = re.compile(r"(\n```[ \t]*)+\s*\Z")
_SYNTAX_ERROR = re.compile(r"\A\[Error\] (invalid syntax|SyntaxError|Syntax error)")
_LA3D_TOOLS = re.compile(
    r"\b(sparql_\w+|res_\w+|g_\w+|ctx_\w+|op_\w+|endpoint_info|validate_graph|finalize_graph"
    r"|graph_stats|query_contains|describe_entity|search_entity|probe_relationships)\s*\("
)
_LA3D_EVENTS = {"run_start", "iteration", "tool_call", "tool_result", "run_complete", "run_error"}
_FABRIC_TURN = {
    "turn", "code", "stdout", "stderr", "error", "submitted", "state", "response_text", "duration_s",
    "token_usage", "validation_errors", "turn_type", "prompt_tokens", "completion_tokens",
    "total_tokens", "cached_tokens", "reasoning_tokens", "lm_call_seconds", "worker_execute_seconds",
    "submit_payload",
}  # fmt: skip


def detect_app_format(text: str, first: Any) -> str | None:
    """The application format of a file whose first JSON record (or whole document) is ``first``."""
    if isinstance(first, dict):
        if "event_type" in first and "data" in first:
            return "la3d-events"
        if "trial_results" in first:
            return "la3d-eval"
        if isinstance(first.get("metadata"), dict) and "signature" in first["metadata"]:
            return "fabric-rlm"
        if "cells" in first and "nbformat" in first and _IN_NOTEBOOK.search(text):
            return "dspy-log"
    if first is None and _HEADER.search(text):
        return "dspy-log"
    return None


def strip_fences(code: str) -> str:
    """The code as dspy.RLM 3.1 runs it: a reply that is one whole markdown block (fenced by
    bare, ``python`` or ``py`` backticks) loses its fence lines; any other reply runs as written."""
    stripped = code.strip()
    match = _WHOLE_FENCE.fullmatch(stripped)
    return match.group("body") if match else stripped


class _Notices:
    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    def add(self, text: str) -> None:
        self.seen[text] = self.seen.get(text, 0) + 1

    def all(self) -> tuple[str, ...]:
        return tuple(t if n == 1 else f"{t} ({n} times)" for t, n in self.seen.items())


def _read(path: str | os.PathLike[str]) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TrajectoryError(f"{path}: cannot read the file: {exc}") from None


def _json(path: str | os.PathLike[str], text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise TrajectoryError(f"{path}: line {exc.lineno}: truncated or corrupt JSON ({exc.msg})") from None


def _lines(path: str | os.PathLike[str], text: str) -> list[tuple[int, dict[str, Any]]]:
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            record = _json(f"{path}: line {number}", line)
            if not isinstance(record, dict):
                raise TrajectoryError(f"{path}: line {number}: a JSON {type(record).__name__}, not an object")
            out.append((number, record))
    return out


def _node(index: int, steps: list[RecordedStep], turns: list[RecordedTurn], **more: Any) -> RecordedNode:
    """The ``index``-th run of a file: ``root`` first, then ``run-2``..., none a child of another."""
    node_id = "root" if index == 0 else f"run-{index + 1}"
    own = tuple(dataclasses.replace(s, node=node_id) for s in steps)
    return RecordedNode(node_id, "", 0, "", None, own, tuple(turns), **more)


def _run(
    path: str | os.PathLike[str], fmt: str, version: str, nodes: list[RecordedNode], **more: Any
) -> RecordedRun:
    if not any(n.steps for n in nodes):
        raise TrajectoryError(f"{path}: no code step in the file: nothing to replay")
    nodes = [n for n in nodes if n.steps]
    seq = 0
    for k, node in enumerate(nodes):  # recorded order across the file's runs
        steps = []
        for step in node.steps:
            seq += 1
            steps.append(dataclasses.replace(step, seq=seq))
        nodes[k] = dataclasses.replace(node, steps=tuple(steps))
    notices = tuple(more.pop("notices", ()))
    if len(nodes) > 1:
        notices += (f"{len(nodes)} runs in one file: each replayed in its own REPL session",)
    return RecordedRun(
        path=str(path), format=fmt, format_version=version, nodes=tuple(nodes), notices=notices, **more
    )


def _tools(steps: list[RecordedStep], pattern: re.Pattern[str]) -> tuple[str, ...]:
    return tuple(sorted({name for s in steps for name in pattern.findall(s.code)}))


def from_dspy_log(path: str | os.PathLike[str]) -> RecordedRun:
    """dspy.RLM's verbose log, as text or in a notebook's outputs (see the module doc)."""
    text = _read(path)
    notes = _Notices()
    streams = _notebook_streams(path, text, notes) if text.lstrip().startswith("{") else [("log", text)]
    runs: list[list[RecordedStep]] = []
    for where, stream in streams:
        records = _log_records(stream, where, notes)
        numbers = [n for n, _, _, _ in records]
        interleaved = any(b not in (1, a + 1) for a, b in itertools.pairwise(numbers))
        if interleaved:
            notes.add(
                f"{where}: the iterations of concurrent runs interleave (a multi-threaded evaluation): "
                "each step is replayed in its own REPL session, so a step that uses an earlier one's "
                "variables diverges"
            )
        for iteration, label, code, output in records:
            if interleaved or iteration == 1 or not runs:
                runs.append([])
            number = len(runs[-1]) + 1
            error = None if output is None else output.lstrip().startswith("[Error]")
            runs[-1].append(RecordedStep("root", number, label, code, output, error, seq=number))
    nodes = []
    for index, steps in enumerate(runs):
        turns = [RecordedTurn(i, None, (i,), s.where) for i, s in enumerate(steps, 1)]
        nodes.append(_node(index, steps, turns))
    called = set().union(*(free_names([s.code for s in steps])[0] for steps in runs)) if runs else set()
    if any(s.observation is None for steps in runs for s in steps):
        notes.add(
            "steps whose output the log does not hold (older dspy logs none) diverge only by not "
            "running (--json shows each step's new output and error)"
        )
    return _run(
        path, "dspy-log", "dspy.RLM verbose log (dspy.predict.rlm)", nodes,
        extra_names=("SUBMIT",), tools=tuple(sorted(called)), notices=notes.all(),
    )  # fmt: skip


def _log_records(stream: str, where: str, notes: _Notices) -> list[tuple[int, str, str, str | None]]:
    """Each ``RLM iteration`` record of one log stream: its number, where it is, the code as dspy
    ran it, and the output dspy logged after it (``Output (N chars):``, newer dspy), if any."""
    headers = list(_HEADER.finditer(stream))
    records = []
    for k, header in enumerate(headers):
        iteration = int(header.group(1))
        end = headers[k + 1].start() if k + 1 < len(headers) else len(stream)
        later = _LOG_LINE.search(stream, header.end() + 1, end)
        body = stream[header.end() + 1 : later.start() if later else end]
        _, marker, code = body.partition("\nCode:\n")
        if not marker:
            notes.add(f"{where}: an iteration record without a Code: part, skipped")
            continue
        output = None
        shown = _OUTPUT_LINE.match(stream, later.start()) if later else None
        if shown is not None:
            after = _LOG_LINE.search(stream, shown.end(), end)
            output = stream[shown.end() : after.start() if after else end].removesuffix("\n")
            if len(output) != int(shown.group(1).replace(",", "")):
                notes.add(f"{where}: a logged output is shortened: not compared")
                output = None
        records.append((iteration, f"{where}, iteration {iteration}", strip_fences(code), output))
    return records


_RLM_NAMES = frozenset({"llm_query", "llm_query_batched", "SUBMIT", "FINAL", "FINAL_VAR", "print"})


def free_names(codes: list[str]) -> tuple[set[str], set[str]]:
    """What a run's code uses without defining it (nor a builtin, nor the RLM's own functions):
    the names it calls (an application's tools) and the names it only reads (its input variables)."""
    defined: set[str] = set()
    called: set[str] = set()
    read: set[str] = set()
    for code in codes:
        try:
            tree = ast.parse(code)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                (defined if isinstance(node.ctx, (ast.Store, ast.Del)) else read).add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined.add(node.name)
            elif isinstance(node, ast.arg):
                defined.add(node.arg)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                defined.update((a.asname or a.name).split(".")[0] for a in node.names)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                defined.add(node.name)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                called.add(node.func.id)
    free = read - defined - set(dir(builtins)) - _RLM_NAMES
    return free & called, free - called


def _notebook_streams(path: str | os.PathLike[str], text: str, notes: _Notices) -> list[tuple[str, str]]:
    """Each code cell's log output (its stream text), in cell order."""
    document = _json(path, text)
    cells = document.get("cells") if isinstance(document, dict) else None
    if not isinstance(cells, list):
        raise TrajectoryError(f"{path}: a notebook needs a cells list")
    streams = []
    for number, cell in enumerate(cells, 1):
        outputs = cell.get("outputs") if isinstance(cell, dict) else None
        joined: dict[str, str] = {}  # Jupyter may split one stream into several outputs
        for output in outputs if isinstance(outputs, list) else []:
            if not isinstance(output, dict) or output.get("output_type") != "stream":
                continue
            chunk = output.get("text")
            chunk = "".join(c for c in chunk if isinstance(c, str)) if isinstance(chunk, list) else chunk
            if isinstance(chunk, str):
                name = str(output.get("name", ""))
                joined[name] = joined.get(name, "") + chunk
        streams += [(f"cell {number}", chunk) for chunk in joined.values() if _HEADER.search(chunk)]
    if not streams:
        notes.add("no cell output holds a dspy.RLM verbose log")
    return streams


def from_la3d_events(path: str | os.PathLike[str]) -> RecordedRun:
    """LA3D/rlm's event log of one dspy.RLM run (see the module doc)."""
    text = _read(path)
    notes = _Notices()
    steps: list[RecordedStep] = []
    turns: list[RecordedTurn] = []
    query, chars, answer, model = "", None, None, ""
    for number, record in _lines(path, text):
        kind = record.get("event_type")
        data = record.get("data")
        body: dict[str, Any] = data if isinstance(data, dict) else {}
        if kind not in _LA3D_EVENTS:
            notes.add(f"skipped lines of event_type {kind!r}")
        elif kind == "run_start":
            query = str(body.get("task", ""))
            model = str(body.get("model") or "")
            size = body.get("context_size") or body.get("document_size")
            chars = int(str(size)) if str(size or "").isdigit() else None
        elif kind == "run_complete" and isinstance(body.get("answer_preview"), str):
            answer = body["answer_preview"]
        elif kind == "iteration" and isinstance(body.get("code"), str):
            output = body.get("output")
            n = len(steps) + 1
            where = f"line {number}"
            steps.append(
                RecordedStep(
                    "root", n, where, body["code"], output if isinstance(output, str) else None, None, seq=n
                )
            )
            turns.append(RecordedTurn(n, str(body.get("reasoning") or "") or None, (n,), where))
    root = RecordedNode("root", "", 0, query, chars, tuple(steps), tuple(turns), model, answer)
    return _run(
        path, "la3d-events", "LA3D/rlm event log (run_start/iteration/tool_call lines)", [root],
        extra_names=("SUBMIT",), tools=_tools(steps, _LA3D_TOOLS), answer=answer,
        notices=(*notes.all(), "the run's context is not in the log (its size is): pass it, or --no-context"),
    )  # fmt: skip


def as_run_by_la3d(code: str, recorded_output: str) -> str:
    """The code as LA3D's eval harness ran it (see the module doc)."""
    if _SYNTAX_ERROR.match(recorded_output):
        return code
    return _CLOSING_FENCE.sub("", _OPENING_FENCE.sub("", code, count=1), count=1)


def from_la3d_eval(path: str | os.PathLike[str]) -> RecordedRun:
    """LA3D/rlm's eval results: each trial one node, in its own REPL session (see the module doc)."""
    document = _json(path, _read(path))
    trials = document.get("trial_results") if isinstance(document, dict) else None
    if not isinstance(trials, list):
        raise TrajectoryError(f"{path}: LA3D eval results need a trial_results list")
    nodes = []
    for index, trial in enumerate(t for t in trials if isinstance(t, dict)):
        steps: list[RecordedStep] = []
        turns: list[RecordedTurn] = []
        transcript = trial.get("transcript")
        for turn in transcript if isinstance(transcript, list) else []:
            first = len(steps) + 1
            blocks = turn.get("code_blocks") if isinstance(turn, dict) else None
            for k, block in enumerate(blocks if isinstance(blocks, list) else [], 1):
                if not isinstance(block, dict) or not isinstance(block.get("code"), str):
                    continue
                got = block.get("result")
                result: dict[str, Any] = got if isinstance(got, dict) else {}
                stdout, stderr = str(result.get("stdout") or ""), str(result.get("stderr") or "")
                n = len(steps) + 1
                where = f"trial {index + 1}, iteration {turn.get('iteration')}, code block {k}"
                failed = bool(stderr.strip()) or stdout.startswith("[Error]")
                code = as_run_by_la3d(block["code"], stdout)
                steps.append(RecordedStep("root", n, where, code, stdout + stderr, failed, seq=n))
            if isinstance(turn, dict):
                where = f"trial {index + 1}, iteration {turn.get('iteration')}"
                reply = turn.get("reasoning") or turn.get("response")
                turns.append(
                    RecordedTurn(
                        len(turns) + 1,
                        reply if isinstance(reply, str) else None,
                        tuple(range(first, len(steps) + 1)),
                        where,
                    )
                )
        answer = trial.get("answer")
        query = document.get("task_query")
        inputs = {"query": query} if isinstance(query, str) else {}
        nodes.append(
            _node(index, steps, turns, answer=answer if isinstance(answer, str) else None, inputs=inputs)
        )
    return _run(
        path, "la3d-eval", "LA3D/rlm eval results (trial_results with transcripts)", nodes,
        extra_names=("SUBMIT",), tools=_tools([s for n in nodes for s in n.steps], _LA3D_TOOLS),
    )  # fmt: skip


def from_fabric(path: str | os.PathLike[str]) -> RecordedRun:
    """fabric-rlm's ``Trajectory.write_jsonl`` (see the module doc)."""
    notes = _Notices()
    steps: list[RecordedStep] = []
    turns: list[RecordedTurn] = []
    first_state: dict[str, Any] | None = None
    answer = None
    for number, record in _lines(path, _read(path)):
        if "metadata" in record and "code" not in record:
            continue
        if not isinstance(record.get("code"), str):
            notes.add("skipped lines without code")
            continue
        extra = sorted(set(record) - _FABRIC_TURN)
        if extra:
            notes.add(f"ignored fields of turn lines: {', '.join(extra)}")
        stdout, stderr = str(record.get("stdout") or ""), str(record.get("stderr") or "")
        n = len(steps) + 1
        where = f"line {number}, turn {record.get('turn')}"
        error = record.get("error")
        observation = stdout + stderr + (f"{error}" if error and str(error) not in stderr else "")
        steps.append(RecordedStep("root", n, where, record["code"], observation, error is not None, seq=n))
        reply = record.get("response_text")
        turns.append(RecordedTurn(n, reply if isinstance(reply, str) else None, (n,), where))
        if first_state is None and isinstance(record.get("state"), dict):
            first_state = record["state"]
        payload = record.get("submit_payload")
        if record.get("submitted") and payload is not None:
            answer = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
    assigned: set[str] = set()
    for step in steps:
        try:
            tree = ast.parse(step.code)
        except SyntaxError:
            continue
        assigned |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    inputs = {k: v for k, v in (first_state or {}).items() if k not in assigned}
    root = RecordedNode("root", "", 0, "", None, tuple(steps), tuple(turns), answer=answer, inputs=inputs)
    return _run(
        path, "fabric-rlm", "fabric-rlm Trajectory.write_jsonl", [root],
        extra_names=("SUBMIT",), answer=answer, notices=notes.all(),
    )  # fmt: skip
