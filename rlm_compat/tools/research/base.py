"""The data every research part agrees on: what a task is, how it is graded, what one run records.

A *suite* yields :class:`TaskSpec` values (cheap: no corpus built yet); ``spec.build()`` makes the
:class:`TaskInstance` (query + context, byte-identical for the same spec) and ``spec.grader`` judges
an answer exactly. A *run* is one (task, config, seed, model) cell of a comparison grid
(:class:`RunSpec`); running it produces one :class:`RunRecord`, the line written to the per-run
JSONL file. Records are plain data so that a local pool and a Ray cluster return identical ones.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "Grade",
    "Grader",
    "LookupTool",
    "RunRecord",
    "RunSpec",
    "Suite",
    "TaskInstance",
    "TaskSpec",
    "TurnRecord",
    "turn_graders",
]


@dataclasses.dataclass(frozen=True)
class Grade:
    """An exact verdict: ``passed`` plus why, and which grader (name and version) gave it."""

    passed: bool
    reason: str
    grader: str
    grader_version: str
    score: float | None = None
    """A graded score in [0, 1] where the grader gives partial credit (the paper's OOLONG and
    OOLONG-Pairs metrics); None for pass/fail graders, whose score is 1 or 0."""

    @property
    def value(self) -> float:
        """The score, or 1.0 / 0.0 from ``passed`` for a pass/fail grader."""
        return self.score if self.score is not None else float(self.passed)


@runtime_checkable
class Grader(Protocol):
    """Judges a final answer exactly: extra prose, ambiguity or a wrong value fail."""

    @property
    def name(self) -> str: ...
    @property
    def version(self) -> str: ...
    def grade(self, answer: str | None) -> Grade: ...


@dataclasses.dataclass(frozen=True)
class LookupTool:
    """A tool a task gives the RLM: a lookup in a table the context does not contain.

    Plain data (name, description, table), so any implementation can be given it: rlm_compat as a
    custom tool, a peer's driver rebuilt from the protocol's ``tools`` field. An unknown key is a
    ``KeyError`` the model sees, as a real lookup service's "not found" would be.
    """

    name: str
    description: str
    parameter: str
    table: tuple[tuple[str, str], ...]

    def function(self) -> Any:
        """The tool as a Python function of one string (its name and docstring are the tool's)."""
        table = dict(self.table)
        name = self.name

        def lookup(key: str) -> str:
            if not isinstance(key, str) or key not in table:
                raise KeyError(f"{name}: no entry for {key!r}")
            return table[key]

        lookup.__name__ = lookup.__qualname__ = name
        lookup.__doc__ = self.description
        lookup.__annotations__ = {self.parameter: "str", "return": "str"}
        return lookup

    def to_json(self) -> dict[str, Any]:
        """The protocol's shape of a tool (docs/protocol.md, ``tools`` of a task message)."""
        return {
            "name": self.name,
            "description": self.description,
            "parameter": self.parameter,
            "table": dict(self.table),
        }


@dataclasses.dataclass(frozen=True)
class TaskInstance:
    """A built task: what the RLM is asked, over which context, identified by the corpus hash.

    ``followups``: the questions asked after ``query`` over the same context, in order (a
    multi-turn task); ``tools``: what the RLM may call besides its REPL.
    """

    task_id: str
    kind: str
    size: int
    seed: int
    query: str
    context: str
    corpus_sha256: str
    followups: tuple[str, ...] = ()
    tools: tuple[LookupTool, ...] = ()

    @property
    def queries(self) -> tuple[str, ...]:
        """Every question of the task, the first one first."""
        return (self.query, *self.followups)


@runtime_checkable
class TaskSpec(Protocol):
    """One task of a suite before its corpus is built; ``task_id`` is stable across versions.

    A task with follow-up questions (``TaskInstance.followups``) also has ``turn_graders``, one
    grader per question (``grader`` first); :func:`turn_graders` reads it, or ``(grader,)``.
    """

    @property
    def task_id(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def size(self) -> int: ...
    @property
    def seed(self) -> int: ...
    @property
    def grader(self) -> Grader: ...
    def build(self) -> TaskInstance: ...


def turn_graders(spec: TaskSpec) -> tuple[Grader, ...]:
    """One grader per question of ``spec`` (a suite of your own need not define any but ``grader``)."""
    graders = getattr(spec, "turn_graders", None)
    return tuple(graders) if graders else (spec.grader,)


@runtime_checkable
class Suite(Protocol):
    """A named, versioned set of tasks (e.g. every kind at 10 k, 100 k, 1 M and 10 M characters)."""

    @property
    def name(self) -> str: ...
    @property
    def version(self) -> str: ...
    def tasks(self) -> Iterable[TaskSpec]: ...


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """One cell of a grid. ``config`` is a profile spec such as ``fixed``, ``upstream``,
    ``upstream-without:separate_scopes`` or ``fixed-with:imports_refused``, or an implementation
    (``impl:ysz-2fb46cc``, :mod:`~rlm_compat.tools.research.compare.impls`); ``model`` is
    ``scripted`` (the task's deterministic policy) or a litellm model name."""

    suite: str
    task_id: str
    config: str
    model: str
    run_index: int = 0

    @property
    def run_id(self) -> str:
        """Stable key of the cell: a resumed grid skips every id already recorded."""
        safe = self.config.replace(":", "=")
        return f"{self.suite}/{self.task_id}/{safe}/{self.model}/{self.run_index}"


@dataclasses.dataclass(frozen=True)
class TurnRecord:
    """One question of a multi-turn run: its answer, grade and cost.

    ``context_chars``: characters of context this turn handed to the RLM (the whole context for
    a fresh run per turn; 0 for a session's later turns, whose REPL already holds it).
    """

    index: int
    answer: str | None
    grade: Grade
    iterations: int
    calls: int
    prompt_tokens: int
    completion_tokens: int
    wall_seconds: float
    context_chars: int
    error_type: str | None = None
    trajectory: str | None = None
    """This turn's trajectory, relative to the grid's output directory (one file per turn)."""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TurnRecord:
        return cls(**{**data, "grade": Grade(**data["grade"])})


@dataclasses.dataclass(frozen=True)
class RunRecord:
    """What one run produced; one JSON line of the grid's ``runs.jsonl``."""

    spec: RunSpec
    corpus_sha256: str
    answer: str | None
    grade: Grade
    iterations: int
    calls: int
    prompt_tokens: int
    completion_tokens: int
    wall_seconds: float
    error_type: str | None = None
    error: str | None = None
    trajectory: str | None = None
    """Path of the run's trajectory, relative to the grid's output directory."""
    cost_usd: float | None = None
    """The cost the implementation reported (None: not priced, as for the scripted endpoint)."""
    logs: str | None = None
    """Directory of the implementation's raw logs, relative to the grid's output directory."""
    turns: tuple[TurnRecord, ...] = ()
    """A multi-turn task's questions one by one; the record's own answer is the last turn's, its
    grade passes when every turn passed (score: the share that did), its figures the sums."""

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["run_id"] = self.spec.run_id
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunRecord:
        fields = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in fields}
        values["spec"] = RunSpec(**values["spec"])
        values["grade"] = Grade(**values["grade"])
        values["turns"] = tuple(TurnRecord.from_json(t) for t in values.get("turns") or ())
        return cls(**values)
