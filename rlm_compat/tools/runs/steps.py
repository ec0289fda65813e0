"""A recorded run as replayable steps: the code each RLM node ran, in order, with what it saw.

Replay (:mod:`rlm_compat.tools.replay.replayer`) re-executes model-written code; it needs, per RLM
node, the code of every REPL step, the observation the recording got back, and what each sub-call the
code made returned (``llm_query`` replies, child RLM answers), so the same code can be served the
same answers again. This module is that shape (:class:`RecordedRun`) and its reader for our own
trajectory files (:func:`from_trajectory`); :mod:`rlm_compat.tools.replay.foreign` reads ``rlms``' and
dspy.RLM's logs into the same shape.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any

from ...errors import TrajectoryError
from ...record.trajectory import SCHEMA_NAME, SCHEMA_VERSION, read_trajectory_lines

__all__ = [
    "RecordedNode",
    "RecordedRun",
    "RecordedStep",
    "RecordedSubcall",
    "RecordedToolCall",
    "RecordedTurn",
    "from_trajectory",
]

SUBCALL_KINDS = ("leaf", "child", "any")
"""``leaf``: a plain model call (``llm_query``...); ``child``: a child RLM (``recursive_llm``,
``rlm_query``); ``any``: a foreign format that records the reply but not which function got it."""


@dataclass(frozen=True)
class RecordedSubcall:
    """What one model-calling function returned to the code during the recording."""

    kind: str
    reply: str | None = None
    """The text the function returned (None when it failed)."""
    error: str = ""
    """``"<Type>: <message>"`` of a failed call, raised again when the code asks for it."""
    child: str = ""
    """For ``child``: the node id of the RLM that answered, replayed in its turn."""
    prompt: str | None = None
    """What the code asked (foreign formats that keep it; shown by ``rlm-compat view``, not replayed)."""
    model: str = ""
    seconds: float | None = None


@dataclass(frozen=True)
class RecordedToolCall:
    """What one custom tool call returned to the code during the recording (our format only)."""

    function: str
    result: str | None
    """The result as tagged JSON text (:mod:`rlm_compat.plain_json`); None: it failed."""
    error: str = ""
    """``"<Type>: <message>"`` of a failed call, raised again when the code makes it."""


@dataclass(frozen=True)
class RecordedStep:
    """One REPL step: the code (a whole model reply in our format) and what the recording saw."""

    node: str
    number: int
    """1-based position among its node's steps."""
    where: str
    """Where in the file it was recorded (``line 7``, ``line 3, code block 2``, ``entry 4``)."""
    code: str
    observation: str | None
    """The recorded output the model read next (None: the format keeps none)."""
    error: bool | None
    """Whether the recording reported the step as failed (None: the format does not say)."""
    subcalls: tuple[RecordedSubcall, ...] = ()
    tool_calls: tuple[RecordedToolCall, ...] = ()
    seq: int = 0
    """Position in the whole run's recorded order (across nodes)."""


@dataclass(frozen=True)
class RecordedTurn:
    """One model reply of a foreign log and the steps that ran its code.

    Replay needs only the steps; ``rlm-compat view`` shows a foreign run from the same reading
    (no second parser of those formats), so the reply around the code, the iterations that ran no
    code (a bare ``FINAL(...)``) and their timing are kept here.
    """

    iteration: int
    reply: str | None
    """The model's whole reply (``rlms``' ``response``; dspy.RLM's ``reasoning``)."""
    steps: tuple[int, ...]
    """The ``number`` of each step of the node that ran this reply's code, in order."""
    where: str
    final_answer: str | None = None
    seconds: float | None = None


@dataclass(frozen=True)
class RecordedNode:
    """One RLM of the tree (the root, or a child a parent's code started) and its steps."""

    node_id: str
    parent_id: str
    depth: int
    query: str
    context_chars: int | None
    steps: tuple[RecordedStep, ...]
    turns: tuple[RecordedTurn, ...] = ()
    """The model's replies (foreign formats; ours are read for viewing from the events instead)."""
    model: str = ""
    answer: str | None = None
    inputs: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Variables the producer's REPL gave this node besides the context (fabric-rlm's signature
    inputs), where the log holds their values; replay defines them."""


@dataclass(frozen=True)
class RecordedRun:
    """Everything replay needs from one trajectory file, whatever its format."""

    path: str
    format: str
    """``rlm_compat``, ``rlms`` or ``dspy``."""
    format_version: str
    """The schema or the producer's version this reading follows."""
    nodes: tuple[RecordedNode, ...]
    """Root first, then the others in the order they started."""
    profile: str | None = None
    """The profile the recording ran under (our format only)."""
    isolation: str | None = None
    api: str | None = None
    """The API preset the recording ran with (``2fb46cc``, ``0.5``; our format only)."""
    max_depth: int | None = None
    repl_timeout: float | None = None
    max_output_chars: int | None = None
    child_context: str = "context"
    """What a child RLM's context is: the ``context`` argument of ``rlm_query`` (ours), or its
    ``query`` (``rlms``: a child RLM answers the prompt it was given, as its context)."""
    extra_names: tuple[str, ...] = ()
    """Names the producer's REPL defines that ours does not, provided during replay
    (``context_0``: an alias of ``context``; ``SUBMIT``: dspy.RLM's way to answer)."""
    answer: str | None = None
    """The run's final answer, when the format records one."""
    context: str | None = None
    """The root's context text, when the format keeps it (``rlms``' ``run_context`` prompt)."""
    tools: tuple[str, ...] = ()
    """Functions the producer's REPL gave the code whose results the log does not hold (an
    application's own tools): replay defines each to fail, saying so."""
    custom_tools: tuple[tuple[str, str, str | None], ...] = ()
    """The recording's custom tools (our format): ``(name, "function" | "value", value)``, the
    value as tagged JSON text when the recording kept it (a function's calls are answered from
    each step's :attr:`RecordedStep.tool_calls`)."""
    notices: tuple[str, ...] = ()
    """What the reader skipped or assumed (unknown line types, ignored fields, several runs in one
    log): said to the user, never a refusal."""

    @property
    def steps(self) -> tuple[RecordedStep, ...]:
        """Every step of every node, in recorded order."""
        return tuple(sorted((s for n in self.nodes for s in n.steps), key=lambda s: s.seq))

    @property
    def root(self) -> RecordedNode:
        """The node the run started with."""
        return self.nodes[0]


def from_trajectory(path: str | os.PathLike[str]) -> RecordedRun:
    """Read one of our trajectory files (schema ``rlm_compat.trajectory`` v1) as replayable steps.

    Each ``repl_step`` is a step of its node; the leaf calls and child RLMs a node started before
    a step are that step's sub-calls (a node runs one step at a time, so everything it starts
    between two steps belongs to the second). Raises TrajectoryError naming the line for a
    redacted file or events that do not fit together (a step of a node that never started).
    """
    header, events = read_trajectory_lines(path)
    if header.get("redacted"):
        raise TrajectoryError(
            f"{path}: line 1: a redacted trajectory keeps only text lengths, so its code cannot be "
            "replayed; record with capture_trajectory_content=True"
        )
    builder = _Builder(str(path))
    for number, event in events:
        builder.add(number, event)
    return builder.finish()


@dataclass
class _Node:
    node_id: str
    parent_id: str
    depth: int
    query: str
    context_chars: int | None
    steps: list[RecordedStep] = dataclasses.field(default_factory=list)
    pending: list[str] = dataclasses.field(default_factory=list)
    """Ids (call-N / rlm-N) of the sub-calls started since the last step."""
    tool_calls: list[RecordedToolCall] = dataclasses.field(default_factory=list)
    """The custom tool calls made since the last step."""
    compacting: bool = False
    """Between a compaction's start and end: its summary call is the loop's, not the code's."""


class _Builder:
    """Folds the event lines of one trajectory into nodes, steps and sub-call answers."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.nodes: dict[str, _Node] = {}
        self.config: dict[str, Any] = {}
        self.calls: dict[str, tuple[str, bool]] = {}  # call id -> (parent node, is_leaf)
        self.answers: dict[str, RecordedSubcall] = {}  # call or child id -> what it returned
        self.steps_subcalls: list[tuple[RecordedStep, list[str]]] = []

    def fail(self, line: int, problem: str) -> TrajectoryError:
        return TrajectoryError(f"{self.path}: line {line}: {problem}")

    def text(self, line: int, data: dict[str, Any], key: str) -> str:
        value = data.get(key)
        if isinstance(value, dict) and "chars" in value:
            raise self.fail(line, f"{key!r} is redacted; a redacted trajectory cannot be replayed")
        if not isinstance(value, str):
            raise self.fail(line, f"{key!r} should be a string, not {type(value).__name__}")
        return value

    def node(self, line: int, node_id: str) -> _Node:
        try:
            return self.nodes[node_id]
        except KeyError:
            raise self.fail(
                line, f"event of RLM node {node_id!r}, which has no rlm_start before it"
            ) from None

    def add(self, line: int, event: dict[str, Any]) -> None:
        kind, data = event["kind"], event["data"]
        node_id, parent = str(event["node_id"]), str(event.get("parent_id", ""))
        if kind == "run_start":
            config = data.get("config")
            self.config = config if isinstance(config, dict) else {}
        elif kind == "rlm_start":
            context_chars = data.get("context_chars")
            self.nodes[node_id] = _Node(
                node_id,
                parent,
                int(event.get("depth", 0)),
                self.text(line, data, "query"),
                context_chars if isinstance(context_chars, int) else None,
            )
            if parent:
                self.node(line, parent).pending.append(node_id)
        elif kind == "model_call_start":
            leaf = bool(data.get("is_leaf"))
            self.calls[node_id] = (parent, leaf)
            if leaf and not self.node(line, parent).compacting:
                self.node(line, parent).pending.append(node_id)
        elif kind in ("compaction_start", "compaction_end"):
            self.node(line, node_id).compacting = kind == "compaction_start"
        elif kind == "model_call_end" and self.calls.get(node_id, ("", False))[1]:
            self.answers[node_id] = RecordedSubcall("leaf", reply=self.text(line, data, "reply"))
        elif kind == "model_call_error" and self.calls.get(node_id, ("", False))[1]:
            if not data.get("retrying"):
                error = f"{data.get('error_type', 'LLMCallError')}: {data.get('error', '')}"
                self.answers[node_id] = RecordedSubcall("leaf", error=error)
        elif kind == "rlm_end" and parent:
            self.answers[node_id] = RecordedSubcall(
                "child", reply=self.text(line, data, "answer"), child=node_id
            )
        elif kind == "rlm_error" and parent:
            error = f"{data.get('error_type', 'RLMError')}: {data.get('error', '')}"
            self.answers[node_id] = RecordedSubcall("child", error=error, child=node_id)
        elif kind == "tool_call":
            result, failed = data.get("result"), data.get("error_type")
            error = f"{failed}: {data.get('error', '')}" if failed else ""
            kept = result if isinstance(result, str) and not failed else None
            self.node(line, node_id).tool_calls.append(
                RecordedToolCall(str(data.get("function", "")), kept, error)
            )
        elif kind == "repl_step":
            node = self.node(line, node_id)
            output, failed = data.get("output"), data.get("error")
            step = RecordedStep(
                node=node_id,
                number=len(node.steps) + 1,
                where=f"line {line}",
                code=self.text(line, data, "code"),
                observation=self.text(line, data, "output") if output is not None else None,
                error=failed if isinstance(failed, bool) else None,
                tool_calls=tuple(node.tool_calls),
                seq=line,
            )
            node.steps.append(step)
            self.steps_subcalls.append((step, node.pending))
            node.pending, node.tool_calls = [], []

    def finish(self) -> RecordedRun:
        if not self.nodes:
            raise TrajectoryError(f"{self.path}: no rlm_start event: the file records no RLM to replay")
        by_step: dict[int, tuple[RecordedSubcall, ...]] = {}
        for step, ids in self.steps_subcalls:
            by_step[id(step)] = tuple(self._answer(i) for i in ids)
        nodes = tuple(
            RecordedNode(
                n.node_id,
                n.parent_id,
                n.depth,
                n.query,
                n.context_chars,
                tuple(dataclasses.replace(s, subcalls=by_step[id(s)]) for s in n.steps),
            )
            for n in self.nodes.values()
        )
        timeout = self.config.get("repl_timeout")
        return RecordedRun(
            path=self.path,
            format="rlm_compat",
            format_version=f"{SCHEMA_NAME} v{SCHEMA_VERSION}",
            nodes=nodes,
            profile=_str_or_none(self.config.get("profile")),
            isolation=_str_or_none(self.config.get("isolation")),
            api=_str_or_none(self.config.get("api")),
            max_depth=_int_or_none(self.config.get("max_depth")),
            repl_timeout=float(timeout) if isinstance(timeout, (int, float)) else None,
            max_output_chars=_int_or_none(self.config.get("max_output_chars")),
            custom_tools=_custom_tools(self.config.get("custom_tools")),
        )

    def _answer(self, sub_id: str) -> RecordedSubcall:
        """What a sub-call returned; one cut off by the end of the file failed without an answer."""
        if sub_id in self.answers:
            return self.answers[sub_id]
        kind = "child" if sub_id in self.nodes else "leaf"
        return RecordedSubcall(kind, error="LLMCallError: the recording ends before this call answered")


def _custom_tools(recorded: Any) -> tuple[tuple[str, str, str | None], ...]:
    """The config's ``custom_tools`` rows (:meth:`rlm_compat.custom_tools.Tool.record`) read leniently."""
    rows = recorded if isinstance(recorded, list) else []
    return tuple(
        (row["name"], str(row.get("kind", "function")), _str_or_none(row.get("value")))
        for row in rows
        if isinstance(row, dict) and isinstance(row.get("name"), str)
    )


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
