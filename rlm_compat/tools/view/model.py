"""The trajectory view's input: a run as a tree of nodes and steps, independent of the file format.

The HTML view never reads a trajectory file itself. A reader turns a format into a
:class:`TrajectoryModel` — :func:`from_events` does it for rlm_compat's own JSONL (docs/trajectory.md);
an importer of a foreign format (rlms logs, dspy.RLM histories) builds the same dataclasses — and the
view renders whatever it is given. Texts stay as the model wrote them: escaping is the renderer's
job, so no reader can forget it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..shared.tooling_errors import ToolUsageError

__all__ = [
    "CallInfo",
    "Divergence",
    "NodeModel",
    "ReplayMarks",
    "StepModel",
    "SubcallModel",
    "TrajectoryModel",
    "ViewInputError",
    "ViewMissingError",
    "check_replay",
    "from_events",
    "read_divergence",
    "replay_marks",
]


class ViewInputError(ToolUsageError):
    """A file given to ``rlm-compat view`` cannot be read as what it claims to be."""


class ViewMissingError(ToolUsageError):
    """The ``view`` extra (Jinja2, Pygments) is not installed."""


@dataclasses.dataclass
class CallInfo:
    """One model call: what it cost and how long it took (``None``: the provider did not say)."""

    model: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    cost_usd: float | None = None
    latency_seconds: float | None = None
    retries: int = 0
    error: str | None = None


@dataclasses.dataclass
class SubcallModel:
    """A batch of sub-calls made by one step's code, linked to the child nodes it started."""

    function: str
    count: int
    errors: int | None = None
    duration_seconds: float | None = None
    children: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class StepModel:
    """One iteration of an RLM node: the model's reply, the code run, what the model read next.

    ``code`` is ``None`` when it is the reply itself (rlm_compat runs the whole response);
    ``sequence`` is the first event of the step; ``replay_step`` the number ``rlm-compat replay``
    gives the step (1-based among its node's executed REPL steps; None: nothing was executed), so
    a replay report's divergences find their steps.
    """

    iteration: int
    reply: str | None = None
    call: CallInfo | None = None
    code: str | None = None
    output: str | None = None
    error: bool = False
    duration_seconds: float | None = None
    subcalls: list[SubcallModel] = dataclasses.field(default_factory=list)
    sequence: int | None = None
    replay_step: int | None = None
    notes: list[str] = dataclasses.field(default_factory=list)
    """What else happened in the step: retries, failed attempts, rejected answers, normalised replies."""


@dataclasses.dataclass
class NodeModel:
    """An RLM node (``kind="rlm"``: it iterates) or a leaf call (``kind="leaf"``: one reply)."""

    node_id: str
    parent_id: str
    depth: int
    kind: str
    model: str = ""
    query: str | None = None
    answer: str | None = None
    error: str | None = None
    steps: list[StepModel] = dataclasses.field(default_factory=list)
    children: list[str] = dataclasses.field(default_factory=list)
    system_prompt: str | None = None
    """The system message of the node's first call (what the model was told it is)."""

    def totals(self) -> dict[str, float | int | None]:
        """Tokens, cost and model latency summed over this node's own calls."""
        calls = [s.call for s in self.steps if s.call is not None]
        tokens = [c.total_tokens for c in calls if c.total_tokens is not None]
        costs = [c.cost_usd for c in calls if c.cost_usd is not None]
        latency = [c.latency_seconds for c in calls if c.latency_seconds is not None]
        return {
            "calls": len(calls),
            "tokens": sum(tokens) if tokens else None,
            "cost_usd": sum(costs) if costs else None,
            "latency_seconds": sum(latency) if latency else None,
        }


@dataclasses.dataclass
class Divergence:
    """One step a replay ran differently from the recording (or did not reach)."""

    reason: str
    node_id: str
    step: int
    """The replay's step number: 1-based among the node's executed steps (StepModel.replay_step)."""
    where: str = ""
    recorded: str | None = None
    replayed: str | None = None


@dataclasses.dataclass
class ReplayMarks:
    """A replay of this trajectory (``rlm-compat replay --json``): the profile and every divergence."""

    profile: str
    isolation: str
    steps: int
    divergences: list[Divergence]
    trajectory: str = ""


@dataclasses.dataclass
class TrajectoryModel:
    """A whole run: nodes in start order (the root first), its answer or error, its figures."""

    title: str
    source_format: str
    nodes: list[NodeModel]
    run_id: str = ""
    query: str | None = None
    answer: str | None = None
    error: str | None = None
    stats: dict[str, Any] = dataclasses.field(default_factory=dict)
    redacted: bool = False
    replay: ReplayMarks | None = None
    """Set when the trajectory is viewed with a replay of it: its divergences are marked."""

    def to_json(self) -> dict[str, Any]:
        """Plain data for the page's embedded JSON (texts unescaped: the page uses textContent)."""
        return dataclasses.asdict(self)


def _text(value: Any) -> str | None:
    """A content field: the text, or a redacted ``{"chars": N}`` shown as its size."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, Mapping) and "chars" in value:
        return f"[redacted: {value['chars']} characters]"
    return json.dumps(value, ensure_ascii=False)


def from_events(
    header: Mapping[str, Any], events: Iterable[Mapping[str, Any]], *, title: str = ""
) -> TrajectoryModel:
    """The tree of an rlm_compat trajectory (``read_trajectory``'s header and events).

    Sub-call batches are linked to their children by position: a node runs one REPL step at a time,
    so every child node or leaf call its code starts falls between the batch's ``subcall_start``
    and ``subcall_end`` events.
    """
    tree = _Tree(
        TrajectoryModel(
            title=title or f"run {header.get('run_id', '')}".strip(),
            source_format="rlm_compat",
            nodes=[],
            run_id=str(header.get("run_id", "")),
            redacted=bool(header.get("redacted", False)),
        )
    )
    for number, event in enumerate(events, 1):
        try:
            kind, data = event["kind"], event["data"]
            envelope = _Envelope(
                str(event["node_id"]),
                str(event["parent_id"]),
                int(event.get("sequence", number)),
                int(event.get("depth", 0)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ViewInputError(f"trajectory event {number} lacks the envelope field {exc}") from None
        tree.feed(kind, data, envelope)
    return tree.finish()


@dataclasses.dataclass(frozen=True)
class _Envelope:
    node_id: str
    parent_id: str
    sequence: int
    depth: int


class _Tree:
    """The tree being built from one trajectory's events, fed in order."""

    def __init__(self, model: TrajectoryModel) -> None:
        self.model = model
        self.nodes: dict[str, NodeModel] = {}
        self.order: list[str] = []
        self.calls: dict[str, tuple[str, CallInfo, int, int | None]] = {}
        self.pending: dict[str, StepModel] = {}
        self.open_batches: dict[str, SubcallModel] = {}
        self.executed: dict[str, int] = {}  # repl_steps per node: replay numbers a node's steps this way

    def add(self, node: NodeModel) -> NodeModel:
        self.nodes[node.node_id] = node
        self.order.append(node.node_id)
        parent = self.nodes.get(node.parent_id)
        if parent is not None:
            parent.children.append(node.node_id)
            batch = self.open_batches.get(parent.node_id)
            if batch is not None:
                batch.children.append(node.node_id)
        return node

    def current_step(self, event_node: str) -> StepModel | None:
        """The step an event about ``event_node`` (a call or an RLM node) belongs to."""
        if event_node in self.calls:
            owner = self.calls[event_node][0]
            if event_node in self.nodes:  # a leaf call
                return self.nodes[event_node].steps[0]
            return self.pending.get(owner)
        return self.pending.get(event_node)

    def step_of(self, node: NodeModel, iteration: int, sequence: int) -> StepModel:
        step = self.pending.get(node.node_id)
        if step is None or step.iteration != iteration:
            step = StepModel(iteration=iteration, sequence=sequence)
            self.pending[node.node_id] = step
            node.steps.append(step)
        return step

    def feed(self, kind: str, data: Mapping[str, Any], e: _Envelope) -> None:
        """Apply one event to the tree."""
        model, nodes, node_id = self.model, self.nodes, e.node_id
        if kind == "run_start":
            model.query = _text(data.get("query"))
        elif kind == "rlm_start":
            self.add(
                NodeModel(
                    node_id, e.parent_id, e.depth, "rlm", str(data.get("model", "")), _text(data.get("query"))
                )
            )
        elif kind == "model_call_start":
            self.call_start(data, e)
        elif kind in ("model_call_end", "model_call_error"):
            self.call_end(kind, data, node_id)
        elif kind in _NOTES:
            noted = self.current_step(node_id)
            if noted is not None:
                noted.notes.append(_NOTES[kind](data))
        elif kind == "repl_step" and node_id in nodes:
            step = self.step_of(nodes[node_id], int(data.get("iteration", 0)), e.sequence)
            self.executed[node_id] = step.replay_step = self.executed.get(node_id, 0) + 1
            code = _text(data.get("code"))
            step.code = None if code == step.reply else code
            step.output = _text(data.get("output"))
            step.error = bool(data.get("error"))
            step.duration_seconds = data.get("duration_seconds")
        elif kind == "subcall_start" and node_id in nodes:
            batch = SubcallModel(str(data.get("function", "")), int(data.get("count", 0)))
            self.open_batches[node_id] = batch
            current = self.pending.get(node_id)
            if current is None:
                current = self.step_of(nodes[node_id], 0, e.sequence)
            current.subcalls.append(batch)
        elif kind == "subcall_end":
            closing = self.open_batches.pop(node_id, None)
            if closing is not None:
                closing.errors = data.get("errors")
                closing.duration_seconds = data.get("duration_seconds")
        elif kind in ("final_answer", "rlm_end") and node_id in nodes:
            nodes[node_id].answer = _text(data.get("answer"))
        elif kind == "rlm_error" and node_id in nodes:
            nodes[node_id].error = f"{data.get('error_type', 'Error')}: {data.get('error', '')}"
        elif kind == "run_end":
            model.answer = _text(data.get("answer"))
            model.stats = dict(data.get("stats") or {})
        elif kind == "run_error":
            model.error = f"{data.get('error_type', 'Error')}: {data.get('error', '')}"
            model.stats = dict(data.get("stats") or {})

    def call_start(self, data: Mapping[str, Any], e: _Envelope) -> None:
        """A model call: a leaf node of its own, or the call of its RLM node's current step."""
        info = CallInfo(model=str(data.get("model", "")))
        iteration = data.get("iteration")
        self.calls[e.node_id] = (e.parent_id, info, e.sequence, iteration)
        if data.get("is_leaf"):
            messages = data.get("messages") or []
            prompt = _text(messages[-1].get("content")) if messages else None
            leaf = self.add(NodeModel(e.node_id, e.parent_id, e.depth, "leaf", info.model, prompt))
            leaf.steps.append(StepModel(iteration=1, call=info, sequence=e.sequence))
        elif e.parent_id in self.nodes and isinstance(iteration, int):
            owner_node = self.nodes[e.parent_id]
            self.step_of(owner_node, iteration, e.sequence).call = info
            for message in data.get("messages") or []:
                if owner_node.system_prompt is None and message.get("role") == "system":
                    owner_node.system_prompt = _text(message.get("content"))

    def call_end(self, kind: str, data: Mapping[str, Any], node_id: str) -> None:
        """A model call's end or error: its figures, and the reply on its leaf or step."""
        found = self.calls.get(node_id)
        if found is None:
            return
        owner, info, _, _ = found
        info.model = str(data.get("model", info.model))
        info.latency_seconds = data.get("latency_seconds")
        info.retries = int(data.get("retries") or 0)
        if kind == "model_call_end":
            for name in ("prompt_tokens", "completion_tokens", "total_tokens", "cost_usd"):
                setattr(info, name, data.get(name))
            reply = _text(data.get("reply"))
        else:
            info.error = f"{data.get('error_type', 'Error')}: {data.get('error', '')}"
            reply = None
            failed = self.current_step(node_id)
            if failed is not None and data.get("retrying"):
                failed.notes.append(f"model call failed, the RLM tries again: {info.error}")
        if node_id in self.nodes:  # a leaf call
            leaf = self.nodes[node_id]
            leaf.steps[0].reply = reply
            leaf.answer = reply
            leaf.error = info.error
        elif owner in self.nodes:
            step = self.pending.get(owner)
            if step is not None and step.call is info:
                step.reply = reply

    def finish(self) -> TrajectoryModel:
        model = self.model
        model.nodes = [self.nodes[i] for i in self.order]
        if model.nodes and model.answer is None and model.error is None:
            model.answer = model.nodes[0].answer
        return model


_NOTES = {
    "model_retry": lambda d: f"provider retry: attempt {d.get('attempt')} after {d.get('delay_seconds')} s",
    "final_answer_rejected": lambda d: (
        f"the final-answer validator rejected a {d.get('answer_chars')}-character answer "
        f"(its {d.get('reason_chars')}-character reason went to the model)"
    ),
    "final_answer_validated": lambda d: (
        f"the final-answer validator accepted the answer ({d.get('answer_chars')} characters)"
    ),
    "provider_response_normalized": lambda d: f"reply normalised: {d.get('reason')}",
    "tool_call": lambda d: (
        f"tool {d.get('function')}(): {d.get('argument_bytes')} B in, "
        + (
            f"{d.get('result_bytes')} B out"
            if d.get("error_type") is None
            else f"raised {d.get('error_type')}: {str(d.get('error'))[:200]}"
        )
        + f", {d.get('duration_seconds')} s in the host"
    ),
    "compaction_start": lambda d: (
        f"compaction {d.get('count')}: about {d.get('tokens_before')} tokens of messages reached "
        f"{d.get('threshold_tokens')} (window {d.get('window_tokens')}); a summary was asked for"
    ),
    "compaction_end": lambda d: (
        f"compaction {d.get('count')}: the messages are now about {d.get('tokens_after')} tokens "
        f"({d.get('messages_after')} messages); the REPL is untouched"
    ),
}


def read_divergence(path: str | Path) -> ReplayMarks:
    """A replay report, as ``rlm-compat replay TRAJECTORY --json`` prints it (one format for both
    commands: what replay says is what the view marks)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ViewInputError(f"cannot read the divergence file {path}: {exc}") from None
    return replay_marks(data, str(path))


def replay_marks(data: Any, path: str = "the replay report") -> ReplayMarks:
    """The divergences of a replay report (:meth:`rlm_compat.tools.replay.replayer.ReplayReport.to_dict`,
    which ``rlm-compat replay --json`` prints); ViewInputError, naming ``path``, for anything else."""
    steps = data.get("steps") if isinstance(data, dict) else None
    if not isinstance(steps, list) or not isinstance(data.get("profile"), str):
        raise ViewInputError(
            f"{path}: a divergence file is the output of `rlm-compat replay TRAJECTORY --json` "
            "(a JSON object with 'profile' and 'steps')"
        )
    profile = data["profile"]
    marks = ReplayMarks(
        profile, str(data.get("isolation", "")), len(steps), [], str(data.get("trajectory", ""))
    )
    for number, step in enumerate(steps, 1):
        try:
            node, index, diverged = str(step["node"]), int(step["step"]), bool(step["diverged"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ViewInputError(
                f"{path}: steps[{number - 1}] lacks {exc} (node, step, diverged): "
                "not `rlm-compat replay --json` output"
            ) from None
        if diverged:
            marks.divergences.append(
                Divergence(
                    _reason(step, profile),
                    node,
                    index,
                    str(step.get("where", "")),
                    step.get("recorded_observation"),
                    step.get("observation"),
                )
            )
    return marks


def _reason(step: Mapping[str, Any], profile: str) -> str:
    """Why a replayed step diverged, in a line."""
    if not step.get("reached", True):
        return f"not reached under {profile}: {step.get('note') or 'its node never started'}"
    before, after = step.get("recorded_error"), step.get("error")
    if after and before is False:
        return f"fails under {profile}; it ran in the recording"
    if before and not after:
        return f"runs under {profile}; it failed in the recording"
    return f"gives another observation under {profile}"


def check_replay(model: TrajectoryModel, marks: ReplayMarks, path: str | Path) -> None:
    """Refuse a replay report of another trajectory: its steps must be exactly the model's."""
    ours = {(n.node_id, s.replay_step) for n in model.nodes for s in n.steps if s.replay_step is not None}
    missing = [(d.node_id, d.step) for d in marks.divergences if (d.node_id, d.step) not in ours]
    if missing or marks.steps != len(ours):
        raise ViewInputError(
            f"{path}: a replay of another trajectory ({marks.steps} replayed step(s), this one has "
            f"{len(ours)} executed step(s)"
            + (f"; no step {missing[0][1]} of node {missing[0][0]!r} here" if missing else "")
            + f"); replay the file you view: rlm-compat replay {marks.trajectory or 'TRAJECTORY'} --json"
        )
