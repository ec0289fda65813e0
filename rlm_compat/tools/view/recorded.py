"""Foreign trajectories (``rlms`` logs, dspy.RLM histories) as the view's model.

The formats are read once, by :mod:`rlm_compat.tools.formats.foreign_runs` (the importer
``rlm-compat replay`` uses); this module only projects its
:class:`~rlm_compat.tools.runs.steps.RecordedRun` onto the view's dataclasses, so a log that replays is
a log that renders, with the same node ids and step numbers a replay report names (which is how
``--divergence`` finds its steps). The readers registered here return ``None`` for a file of
another format, as :func:`~rlm_compat.tools.view.sources.register_reader` expects.
"""

from __future__ import annotations

from pathlib import Path

from ...errors import TrajectoryError
from ..formats.foreign_runs import detect_format, load_run
from ..runs.steps import RecordedNode, RecordedRun, RecordedStep, RecordedSubcall, RecordedTurn
from .model import CallInfo, NodeModel, StepModel, SubcallModel, TrajectoryModel, ViewInputError

__all__ = ["from_recorded", "read_dspy", "read_rlms"]

_TITLES = {"rlms": "rlms log", "dspy": "dspy.RLM trajectory"}


def read_rlms(path: Path) -> TrajectoryModel | None:
    """An ``rlms`` JSONL log (``RLMLogger``), or None when ``path`` is not one."""
    return _read(path, "rlms")


def read_dspy(path: Path) -> TrajectoryModel | None:
    """A dspy.RLM trajectory (list, prediction dict or JSON lines), or None when ``path`` is not one."""
    return _read(path, "dspy")


def _read(path: Path, wanted: str) -> TrajectoryModel | None:
    try:
        if detect_format(path) != wanted:
            return None
    except TrajectoryError:
        return None  # not this format; read_trajectory_model reports when no reader knows it
    try:
        run = load_run(path, wanted)
    except TrajectoryError as exc:
        raise ViewInputError(str(exc)) from None
    return from_recorded(run, title=f"{_TITLES[wanted]} {path.name}")


def from_recorded(run: RecordedRun, *, title: str = "") -> TrajectoryModel:
    """The view's model of a run read by the importers: one step per code block, each reply on its
    first block, sub-calls as leaf nodes or links to the child RLM that answered them."""
    nodes: list[NodeModel] = []
    prompts = {s.child: s.prompt for n in run.nodes for st in n.steps for s in st.subcalls if s.child}
    for recorded in run.nodes:
        node = NodeModel(
            node_id=recorded.node_id,
            parent_id=recorded.parent_id,
            depth=recorded.depth,
            kind="rlm",
            model=recorded.model,
            query=recorded.query or prompts.get(recorded.node_id),
            answer=recorded.answer,
        )
        nodes.append(node)
        leaves: list[NodeModel] = []
        for step_model, recorded_step in _steps(recorded):
            node.steps.append(step_model)
            if recorded_step is not None:
                _link_subcalls(node, step_model, recorded_step, leaves)
        nodes.extend(leaves)
    ordered = _tree_order(nodes)
    return TrajectoryModel(
        title=title or f"{run.format} trajectory {Path(run.path).name}",
        source_format=run.format,
        nodes=ordered,
        answer=run.answer,
    )


def _steps(node: RecordedNode) -> list[tuple[StepModel, RecordedStep | None]]:
    """One StepModel per executed step (its turn's reply on the first), plus turns that ran none,
    each with the recorded step it shows (None for a turn that ran no code)."""
    by_number = {s.number: s for s in node.steps}
    turns = node.turns or tuple(RecordedTurn(s.number, None, (s.number,), s.where) for s in node.steps)
    out: list[tuple[StepModel, RecordedStep | None]] = []
    for turn in turns:
        if not turn.steps:
            out.append((_bare(turn), None))
            continue
        for k, number in enumerate(turn.steps):
            step = by_number[number]
            model = StepModel(
                iteration=turn.iteration,
                reply=turn.reply if k == 0 else None,
                code=step.code,
                output=step.observation,
                error=bool(step.error),
                sequence=step.seq,
                replay_step=step.number,
            )
            if k == 0 and turn.seconds is not None:
                model.notes.append(f"iteration took {turn.seconds:.3f} s ({step.where.split(',')[0]})")
            if len(turn.steps) > 1:
                model.notes.append(f"code block {k + 1} of {len(turn.steps)} of this reply")
            if k == len(turn.steps) - 1 and turn.final_answer is not None:
                model.notes.append(f"the reply ended the run with final answer {turn.final_answer!r}")
            out.append((model, step))
    return out


def _bare(turn: RecordedTurn) -> StepModel:
    step = StepModel(iteration=turn.iteration, reply=turn.reply)
    if turn.final_answer is not None:
        step.notes.append(f"no code: the reply gave the final answer {turn.final_answer!r}")
    return step


def _link_subcalls(node: NodeModel, model: StepModel, step: RecordedStep, leaves: list[NodeModel]) -> None:
    """The step's sub-calls as one batch: a child RLM links to its node, a plain call gets a leaf."""
    if not step.subcalls:
        return
    batch = SubcallModel(function=_function(step.subcalls), count=len(step.subcalls))
    batch.errors = sum(1 for s in step.subcalls if s.reply is None) or None
    for sub in step.subcalls:
        if sub.child:
            batch.children.append(sub.child)
            continue
        leaf_id = f"{node.node_id}.call-{len(leaves) + 1}"
        call = CallInfo(model=sub.model, latency_seconds=sub.seconds, error=sub.error or None)
        leaf = NodeModel(leaf_id, node.node_id, node.depth + 1, "leaf", sub.model, sub.prompt, sub.reply)
        leaf.error = sub.error or None
        leaf.steps.append(StepModel(iteration=1, reply=sub.reply, call=call))
        leaves.append(leaf)
        batch.children.append(leaf_id)
    model.subcalls.append(batch)
    node.children.extend(c for c in batch.children if c not in node.children)


def _function(subcalls: tuple[RecordedSubcall, ...]) -> str:
    """rlms records the calls a step made, not which function made them."""
    kinds = {s.kind for s in subcalls}
    if kinds == {"child"}:
        return "child RLM calls"
    return "model calls" if "child" not in kinds else "model calls and child RLMs"


def _tree_order(nodes: list[NodeModel]) -> list[NodeModel]:
    """Root first, each node before the nodes it started (the view sums totals bottom-up)."""
    by_id = {n.node_id: n for n in nodes}
    out: list[NodeModel] = []

    def visit(node: NodeModel) -> None:
        out.append(node)
        for child in node.children:
            if child in by_id:
                visit(by_id[child])

    for node in nodes:
        if node.parent_id not in by_id:
            visit(node)
    return out
