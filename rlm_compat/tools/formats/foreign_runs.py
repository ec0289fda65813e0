"""Other implementations' trajectory logs as replayable steps, and the format detection.

Two producers are read, from their documented output shapes (no code of theirs is used):

``rlms`` (the paper's implementation; read from release 0.1.1's ``RLMLogger``): JSON lines, one
``{"type": "metadata", ...}`` line with the run's settings (``root_model``, ``max_depth``,
``max_iterations``, ``backend``, ``environment_type``...), then one ``{"type": "iteration",
"iteration": n, "prompt", "response", "code_blocks": [...], "final_answer", "iteration_time"}`` line
per iteration. Each code block is ``{"code", "result": {"stdout", "stderr", "locals",
"execution_time", "rlm_calls": [{"root_model", "prompt", "response", ...}], "final_answer"}}``:
one replayable step, its observation the stdout and stderr, failed when stderr is not empty, and
its sub-calls answered with the ``rlm_calls`` responses in order. A sub-call that ran a child RLM
(``max_depth`` > 1) holds the child's own iterations in its ``metadata``; they become a child node
whose context is the prompt (rlms gives a child RLM the prompt as its context). Its REPL also names
the context ``context_0``, which replay provides.

dspy.RLM (dspy 3.1's ``Prediction.trajectory``; dspy main at 00d9fbd calls it
``repl_trajectory`` and adds ``max_output_chars``): a list of ``{"reasoning", "code", "output"}``
entries, fences already stripped, a failure's output starting ``[Error]``. dspy writes no file
itself: a JSON file holding that list, a prediction dict with either key, a saved run whose
``iterations`` list holds the entries (explorer apps; its ``final_answer`` is the answer), or the
entries as JSON lines are read. Fields beyond the entry's three are ignored, with a notice.
Sub-call replies are not in it, so an ``llm_query`` in dspy code fails during replay, under every
profile alike. Its ``SUBMIT(...)`` is provided.

Newer rlms logs (alexzhang13/rlm after 0.1.1) add ``run_context`` lines (each run's prompt, which
is the context rlms gives the REPL: replay uses the first as the context) and a ``jupyter``
environment whose REPL names the context ``completion_context``; other line types and fields a
reader does not know are skipped with a notice (``RecordedRun.notices``), never refused.

Logs of applications built around these loops (dspy.RLM's verbose log, LA3D/rlm's event logs and
eval results, fabric-rlm's trajectories) are read by :mod:`.app_logs`; detection covers them too.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ...errors import TrajectoryError
from ...record.trajectory import SCHEMA_NAME, json_lines
from ..runs.steps import (
    RecordedNode,
    RecordedRun,
    RecordedStep,
    RecordedSubcall,
    RecordedTurn,
    from_trajectory,
)
from .app_logs import (
    APP_FORMATS,
    detect_app_format,
    from_dspy_log,
    from_fabric,
    from_la3d_eval,
    from_la3d_events,
)

__all__ = ["FORMATS", "detect_format", "from_dspy", "from_rlms", "load_run"]

FORMATS = ("rlm_compat", "rlms", "dspy", *APP_FORMATS)

RLMS_VERSION = "rlms 0.1.1 RLMLogger JSONL"
DSPY_VERSION = "dspy.RLM trajectory (dspy 3.1 Prediction.trajectory / main repl_trajectory)"
_DSPY_KEYS = ("trajectory", "repl_trajectory", "iterations")
_DSPY_ENTRY = {"reasoning", "code", "output"}


def load_run(path: str | os.PathLike[str], format: str | None = None) -> RecordedRun:
    """A trajectory file of any known format as replayable steps (``format`` None: detected)."""
    chosen = format or detect_format(path)
    if chosen == "rlm_compat":
        return from_trajectory(path)
    if chosen == "rlms":
        return from_rlms(path)
    if chosen == "dspy":
        return from_dspy(path)
    readers = {
        "dspy-log": from_dspy_log,
        "la3d-events": from_la3d_events,
        "la3d-eval": from_la3d_eval,
        "fabric-rlm": from_fabric,
    }
    if chosen in readers:
        return readers[chosen](path)
    raise TrajectoryError(f"unknown trajectory format {chosen!r}; choose one of {', '.join(FORMATS)}")


def detect_format(path: str | os.PathLike[str]) -> str:
    """One of FORMATS, from the file's first record (or the whole document); TrajectoryError otherwise."""
    text = _read(path)
    first = next((line for line in text.splitlines() if line.strip()), "")
    if not first:
        raise TrajectoryError(f"{path}: empty file, not a trajectory")
    try:
        record: Any = json.loads(first)
    except json.JSONDecodeError:
        try:
            record = json.loads(text)  # one JSON document over several lines (dspy's list)
        except json.JSONDecodeError as exc:
            if detect_app_format(text, None):
                return "dspy-log"  # a text log
            raise TrajectoryError(
                f"{path}: line {exc.lineno}: truncated or corrupt JSON ({exc.msg}); not a trajectory"
            ) from None
    if isinstance(record, dict):
        if record.get("schema") == SCHEMA_NAME:
            return "rlm_compat"
        if record.get("type") in ("metadata", "iteration"):
            return "rlms"
        app = detect_app_format(text, record)
        if app is not None:
            return app
        if ("code" in record and "output" in record) or any(k in record for k in _DSPY_KEYS):
            return "dspy"
    if isinstance(record, list):
        return "dspy"
    raise TrajectoryError(
        f"{path}: line 1: not a trajectory this rlm_compat reads (ours starts with a schema header, "
        "rlms' with a type metadata/iteration line, dspy.RLM's is a list of code/output entries or its "
        "verbose log; LA3D/rlm's event logs and eval results, fabric-rlm's trajectories); name the "
        f"format with --format if it is one of them ({', '.join(FORMATS)})"
    )


def from_rlms(path: str | os.PathLike[str]) -> RecordedRun:
    """An ``rlms`` JSONL log (see the module doc) as the steps of its root and child RLMs."""
    iterations: list[tuple[str, Any]] = []
    max_depth: int | None = None
    model = environment = ""
    prompts: list[Any] = []
    notes = _Notes()
    for line, record in json_lines(path):
        kind = record.get("type")
        notes.fields(kind, record, line)
        if kind == "metadata":
            depth = record.get("max_depth")
            max_depth = depth if isinstance(depth, int) and not isinstance(depth, bool) else None
            model = _string(record.get("root_model"))
            environment = _string(record.get("environment_type"))
        elif kind == "iteration":
            iterations.append((f"line {line}", record))
        elif kind == "run_context":
            prompts.append(record.get("prompt"))
        else:
            notes.skip(f"type {kind!r}", line)
    reader = _RlmsReader(str(path))
    root = reader.node("root", "", 0, iterations, model)
    if not reader.steps:
        skipped = "; ".join(notes.all())
        raise TrajectoryError(
            f"{path}: no code block in any iteration: nothing to replay"
            + (f" ({skipped})" if skipped else "")
        )
    context = prompts[0] if prompts and isinstance(prompts[0], str) else None
    if prompts and context is None:
        notes.add("the run's prompt is not a string; pass the context with --context-file")
    if len(prompts) > 1:
        notes.add(
            f"{len(prompts)} runs in one log (run_context lines): replayed as one REPL session "
            "over the first run's prompt, so later runs' steps that read their own prompt diverge"
        )
    return RecordedRun(
        path=str(path),
        format="rlms",
        format_version=RLMS_VERSION,
        nodes=(root, *reader.children),
        max_depth=max_depth,
        extra_names=("context_0", "completion_context") if environment == "jupyter" else ("context_0",),
        child_context="query",
        answer=root.answer,
        context=context,
        notices=notes.all(),
    )


_RLMS_FIELDS = {
    "metadata": {
        "type", "timestamp", "root_model", "max_depth", "max_iterations", "backend", "backend_kwargs",
        "environment_type", "environment_kwargs", "other_backends",
    },
    "iteration": {
        "type", "iteration", "timestamp", "prompt", "response", "code_blocks", "final_answer",
        "iteration_time",
    },
    "run_context": {
        "type", "timestamp", "prompt", "root_prompt", "environment_type", "environment_kwargs",
        "session_mode",
    },
}  # fmt: skip


class _Notes:
    """What a reader skipped, each kind said once with where it first happened and how often."""

    def __init__(self) -> None:
        self._seen: dict[str, list[Any]] = {}

    def add(self, text: str) -> None:
        self._seen.setdefault(text, [None, 0])[1] += 1

    def skip(self, what: str, line: int) -> None:
        entry = self._seen.setdefault(f"skipped lines of {what}", [line, 0])
        entry[1] += 1

    def fields(self, kind: Any, record: dict[str, Any], line: int) -> None:
        known = _RLMS_FIELDS.get(kind) if isinstance(kind, str) else None
        extra = sorted(set(record) - known) if known is not None else []
        if extra:
            entry = self._seen.setdefault(f"ignored fields of {kind} lines: {', '.join(extra)}", [line, 0])
            entry[1] += 1

    def all(self) -> tuple[str, ...]:
        out = []
        for text, (line, count) in self._seen.items():
            where = f" (first at line {line}, {count} line(s))" if line is not None else ""
            out.append(text + where)
        return tuple(out)


class _RlmsReader:
    """Turns ``rlms`` iterations into nodes; a sub-call that ran a child RLM carries the child's
    iterations in its ``metadata`` (rlms 0.1.1 with ``max_depth`` > 1), which become a child node."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.steps = 0
        self.children: list[RecordedNode] = []

    def node(
        self, node_id: str, parent: str, depth: int, iterations: list[tuple[str, Any]], model: str
    ) -> RecordedNode:
        steps: list[RecordedStep] = []
        turns: list[RecordedTurn] = []
        for number, (where, record) in enumerate(iterations, 1):
            blocks = record.get("code_blocks") if isinstance(record, dict) else None
            if not isinstance(blocks, list):
                raise TrajectoryError(f"{self.path}: {where}: an iteration without a code_blocks list")
            first = len(steps) + 1
            for index, block in enumerate(blocks, 1):
                steps.append(self.step(node_id, depth, f"{where}, code block {index}", block, len(steps) + 1))
            iteration = record.get("iteration")
            turns.append(
                RecordedTurn(
                    iteration=iteration if isinstance(iteration, int) else number,
                    reply=_string(record.get("response")) or None,
                    steps=tuple(range(first, len(steps) + 1)),
                    where=where,
                    final_answer=_answer(record.get("final_answer")),
                    seconds=_seconds(record.get("iteration_time")),
                )
            )
        answer = next((t.final_answer for t in reversed(turns) if t.final_answer is not None), None)
        return RecordedNode(node_id, parent, depth, "", None, tuple(steps), tuple(turns), model, answer)

    def step(self, node_id: str, depth: int, where: str, block: Any, number: int) -> RecordedStep:
        path = self.path
        result = block.get("result") if isinstance(block, dict) else None
        code = block.get("code") if isinstance(block, dict) else None
        if not isinstance(code, str) or not isinstance(result, dict):
            raise TrajectoryError(f"{path}: {where}: a code block needs a code string and a result object")
        stdout, stderr = result.get("stdout") or "", result.get("stderr") or ""
        if not isinstance(stdout, str) or not isinstance(stderr, str):
            raise TrajectoryError(f"{path}: {where}: stdout and stderr should be strings")
        calls = result.get("rlm_calls") or []
        if not isinstance(calls, list):
            raise TrajectoryError(f"{path}: {where}: rlm_calls should be a list")
        subcalls = []
        for k, call in enumerate(c for c in calls if isinstance(c, dict)):
            reply = str(call.get("response", ""))
            prompt, model = _prompt(call.get("prompt")), _string(call.get("root_model"))
            seconds = _seconds(call.get("execution_time"))
            metadata = call.get("metadata")
            child_iterations = metadata.get("iterations") if isinstance(metadata, dict) else None
            if not isinstance(child_iterations, list):
                subcalls.append(RecordedSubcall("any", reply, prompt=prompt, model=model, seconds=seconds))
                continue
            child_id = f"{node_id}.{len(self.children) + 1}"
            child_where = f"{where}, sub-call {k + 1}"
            numbered = [(f"{child_where}, iteration {j}", it) for j, it in enumerate(child_iterations, 1)]
            self.children.append(self.node(child_id, node_id, depth + 1, numbered, model))
            subcalls.append(
                RecordedSubcall("child", reply, child=child_id, prompt=prompt, model=model, seconds=seconds)
            )
        self.steps += 1
        observation = stdout
        if stderr:
            observation += ("\n" if stdout and not stdout.endswith("\n") else "") + stderr
        return RecordedStep(
            node=node_id,
            number=number,
            where=where,
            code=code,
            observation=observation,
            error=bool(stderr.strip()),
            subcalls=tuple(subcalls),
            seq=self.steps,  # a child's steps count before the parent block that started them
        )


def from_dspy(path: str | os.PathLike[str]) -> RecordedRun:
    """A dspy.RLM trajectory (see the module doc) as the steps of one root node."""
    text = _read(path)
    entries: list[tuple[str, Any]]
    answer: str | None = None
    try:
        document: Any = json.loads(text)
    except json.JSONDecodeError:
        entries = [(f"line {line}", record) for line, record in json_lines(path)]
    else:
        if isinstance(document, dict) and "code" in document and "output" in document:
            entries = [(f"line {line}", record) for line, record in json_lines(path)]
        else:
            if isinstance(document, dict):
                answer = _answer(document.get("answer", document.get("final_answer")))
                key = next((k for k in _DSPY_KEYS if k in document), None)
                document = document.get(key) if key else None
            if not isinstance(document, list):
                raise TrajectoryError(
                    f"{path}: a dspy.RLM trajectory is a list of entries, or an object with "
                    f"{' or '.join(_DSPY_KEYS)}"
                )
            entries = [(f"entry {i}", entry) for i, entry in enumerate(document, 1)]
    steps: list[RecordedStep] = []
    turns: list[RecordedTurn] = []
    ignored: set[str] = set()
    for where, entry in entries:
        code = entry.get("code") if isinstance(entry, dict) else None
        output = entry.get("output") if isinstance(entry, dict) else None
        if not isinstance(code, str) or not isinstance(output, str):
            raise TrajectoryError(f"{path}: {where}: an entry needs code and output strings")
        ignored |= set(entry) - _DSPY_ENTRY
        number = len(steps) + 1
        steps.append(
            RecordedStep(
                node="root",
                number=number,
                where=where,
                code=code,
                observation=output,
                error=output.lstrip().startswith("[Error]"),
                seq=number,
            )
        )
        turns.append(RecordedTurn(number, _string(entry.get("reasoning")) or None, (number,), where))
    if not steps:
        raise TrajectoryError(f"{path}: the trajectory has no entries: nothing to replay")
    root = RecordedNode("root", "", 0, "", None, tuple(steps), tuple(turns), answer=answer)
    return RecordedRun(
        path=str(path),
        format="dspy",
        format_version=DSPY_VERSION,
        nodes=(root,),
        extra_names=("SUBMIT",),
        answer=answer,
        notices=(f"ignored fields of the entries: {', '.join(sorted(ignored))}",) if ignored else (),
    )


def _string(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _answer(value: Any) -> str | None:
    """A recorded final answer as text (rlms keeps what FINAL got, which need not be a string)."""
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _seconds(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _prompt(value: Any) -> str | None:
    """A sub-call's prompt: rlms keeps a string, or the message list it sent (the last one shown)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and isinstance(value[-1], dict):
        return _string(value[-1].get("content"))
    return None


def _read(path: str | os.PathLike[str]) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TrajectoryError(f"{path}: cannot read the file: {exc}") from None
