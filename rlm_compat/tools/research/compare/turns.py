"""A task's questions through rlm_compat: one run per question, or one session for all of them.

A grid config ``session:PROFILE`` asks every question of a task in one persistent RLM (docs/sessions.md):
the context is handed over with the first question only, later questions find it (and whatever
the earlier turns computed) in the REPL. Plain ``PROFILE`` runs a fresh RLM per question, each
given the whole context. Single-question tasks run the same way under both. A task's tools
(:class:`~rlm_compat.tools.research.base.LookupTool`) are given as ``custom_tools``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ....clients import LLMClient
from ....profiles import Profile
from ..base import Grade, Grader, RunRecord, RunSpec, TaskInstance, TurnRecord
from .impls import TaskOutcome

__all__ = [
    "SESSION_PREFIX",
    "UNSUPPORTED_TASK",
    "TurnSettings",
    "graded_turns",
    "rlm_compat_turns",
    "run_turns",
    "session_profile",
    "task_extra",
    "turns_record",
]

UNSUPPORTED_TASK = "UnsupportedTask"
"""The ``error_type`` a driver reports for a task it cannot run as asked (a session, tools)."""

SESSION_PREFIX = "session:"
"""A grid config asking a task's questions in one persistent session: ``session:fixed``."""


def session_profile(config: str) -> tuple[bool, str]:
    """``(persistent, profile spec)`` of a grid config (``session:fixed`` -> ``(True, "fixed")``)."""
    if config.startswith(SESSION_PREFIX):
        return True, config[len(SESSION_PREFIX) :]
    return False, config


@dataclasses.dataclass(frozen=True)
class TurnSettings:
    """What every turn's RLM is built with (the grid job's model settings)."""

    model: str
    profile: str
    api_base: str | None
    api_key: str | None
    max_iterations: int
    isolation: str | None
    repl_timeout: float | None
    max_retries: int | None


def _tools(task: TaskInstance) -> dict[str, Any] | None:
    if not task.tools:
        return None
    return {tool.name: {"tool": tool.function(), "description": tool.description} for tool in task.tools}


async def run_turns(
    settings: TurnSettings,
    client: LLMClient | None,
    task: TaskInstance,
    graders: Sequence[Grader],
    scratch: Path,
    *,
    persistent: bool,
) -> tuple[list[TurnRecord], list[tuple[str | None, str | None]], list[str | None]]:
    """Ask each of ``task``'s questions; per turn its record, ``(error type, error)`` and its
    trajectory's text."""
    from ....core import RLM

    def make(path: Path) -> RLM:
        return RLM(
            settings.model,
            api_base=settings.api_base,
            api_key=settings.api_key,
            max_iterations=settings.max_iterations,
            profile=Profile.named(settings.profile),
            client=client,
            isolation=settings.isolation,
            repl_timeout=settings.repl_timeout,
            max_retries=settings.max_retries,
            trajectory_path=path,
            custom_tools=_tools(task),
            persistent=persistent,
        )

    session = make(scratch / "turn-{run}.jsonl") if persistent else None
    turns: list[TurnRecord] = []
    errors: list[tuple[str | None, str | None]] = []
    trajectories: list[str | None] = []
    try:
        for index, (query, grader) in enumerate(zip(task.queries, graders, strict=True)):
            rlm = session if session is not None else make(scratch / f"turn-{index}.jsonl")
            context = task.context if session is None or index == 0 else ""
            started = time.perf_counter()
            result = await rlm.atry_complete_result(query, context, query_as_context=False)
            wall = time.perf_counter() - started
            written = None if result.trajectory_path is None else Path(result.trajectory_path)
            trajectories.append(written.read_text(encoding="utf-8") if written and written.exists() else None)
            stats = result.stats
            error_type = getattr(result, "error_type", None)
            turns.append(
                TurnRecord(
                    index=index,
                    answer=result.answer,
                    grade=grader.grade(result.answer),
                    iterations=int(stats.get("total_iterations", 0)),
                    calls=int(stats.get("llm_calls", 0)),
                    prompt_tokens=int(stats.get("prompt_tokens", 0)),
                    completion_tokens=int(stats.get("completion_tokens", 0)),
                    wall_seconds=round(wall, 6),
                    context_chars=len(context),
                    error_type=error_type,
                )
            )
            errors.append((error_type, getattr(result, "error", None)))
    finally:
        if session is not None:
            session.close()
    return turns, errors, trajectories


def turns_record(
    spec: RunSpec,
    task: TaskInstance,
    turns: Sequence[TurnRecord],
    errors: Sequence[tuple[str | None, str | None]],
    trajectory: str | None,
) -> RunRecord:
    """The grid's record of a task's turns: the last answer, a grade that passes when every turn
    passed (its score the share that did), figures summed; per-turn records for a multi-question task."""
    last = turns[-1]
    if len(turns) == 1:
        grade = last.grade
    else:
        passed = sum(t.grade.passed for t in turns)
        failed = [str(t.index + 1) for t in turns if not t.grade.passed]
        grade = Grade(
            passed=not failed,
            reason=f"{passed} of {len(turns)} turns passed"
            + (f" (failed: {', '.join(failed)})" if failed else ""),
            grader="turns/" + last.grade.grader,
            grader_version=last.grade.grader_version,
            score=round(passed / len(turns), 6),
        )
    first_error = next(((t, e) for t, e in errors if t is not None), (None, None))
    return RunRecord(
        spec=spec,
        corpus_sha256=task.corpus_sha256,
        answer=last.answer,
        grade=grade,
        iterations=sum(t.iterations for t in turns),
        calls=sum(t.calls for t in turns),
        prompt_tokens=sum(t.prompt_tokens for t in turns),
        completion_tokens=sum(t.completion_tokens for t in turns),
        wall_seconds=round(sum(t.wall_seconds for t in turns), 6),
        error_type=first_error[0],
        error=first_error[1],
        trajectory=trajectory,
        turns=tuple(turns) if len(turns) > 1 else (),
    )


def task_extra(task: TaskInstance, persistent: bool) -> dict[str, Any]:
    """Protocol 2's optional task fields for ``task`` (none for a one-question task without tools,
    so such a message is what it always was)."""
    extra: dict[str, Any] = {}
    if task.followups:
        extra["followups"] = list(task.followups)
    if persistent:
        extra["session"] = True
    if task.tools:
        extra["tools"] = [tool.to_json() for tool in task.tools]
    return extra


def _number(turn: dict[str, Any], key: str) -> int:
    value = turn.get(key)
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def _turns_of_outcome(
    raw: Sequence[dict[str, Any]], graders: Sequence[Grader], size: int, persistent: bool
) -> list[TurnRecord]:
    """A driver's ``turns`` as graded turn records (at most one per question; extra ones ignored)."""
    out = []
    for index, (turn, grader) in enumerate(zip(raw, graders, strict=False)):
        answer = turn.get("answer")
        answer = answer if isinstance(answer, str) else None
        error = turn.get("error")
        seconds = turn.get("seconds")
        out.append(
            TurnRecord(
                index=index,
                answer=answer,
                grade=grader.grade(answer),
                iterations=_number(turn, "iterations"),
                calls=_number(turn, "calls"),
                prompt_tokens=_number(turn, "prompt_tokens"),
                completion_tokens=_number(turn, "completion_tokens"),
                wall_seconds=round(float(seconds), 6) if isinstance(seconds, (int, float)) else 0.0,
                context_chars=size if index == 0 or not persistent else 0,
                error_type=str(error.get("type", "Error")) if isinstance(error, dict) else None,
            )
        )
    return out


def _outcome_of_turns(record: RunRecord, turns: Sequence[TurnRecord]) -> TaskOutcome:
    """rlm_compat's own turns in the shape a driver reports them (``taskResult`` with ``turns``)."""
    return TaskOutcome(
        answer=record.answer,
        iterations=record.iterations,
        calls=record.calls,
        prompt_tokens=record.prompt_tokens,
        completion_tokens=record.completion_tokens,
        error_type=record.error_type,
        error=record.error,
        turns=tuple(
            {
                "answer": t.answer,
                "iterations": t.iterations,
                "calls": t.calls,
                "prompt_tokens": t.prompt_tokens,
                "completion_tokens": t.completion_tokens,
                "seconds": t.wall_seconds,
                **({"error": {"type": t.error_type, "message": ""}} if t.error_type else {}),
            }
            for t in turns
        ),
    )


async def rlm_compat_turns(
    settings: TurnSettings,
    spec: RunSpec,
    task: TaskInstance,
    graders: Sequence[Grader],
    scratch: Path,
    persistent: bool,
) -> tuple[TaskOutcome, str | None]:
    """``impl:rlm_compat`` over a multi-question or tool task: :func:`run_turns`, reported the way
    a driver reports its turns; the first turn's trajectory."""
    turns, errors, texts = await run_turns(settings, None, task, graders, scratch, persistent=persistent)
    return _outcome_of_turns(turns_record(spec, task, turns, errors, None), turns), texts[0]


def graded_turns(
    spec: RunSpec, task: TaskInstance, graders: Sequence[Grader], outcome: TaskOutcome, *, persistent: bool
) -> tuple[list[TurnRecord], Grade]:
    """An implementation's outcome graded: its turns (when it reported any) and the run's grade.
    A multi-question task whose implementation reported no turns fails: one answer is never
    graded as the whole conversation."""
    turns = _turns_of_outcome(outcome.turns, graders, task.size, persistent)
    if turns:
        return turns, turns_record(spec, task, turns, [], None).grade
    grade = graders[0].grade(outcome.answer)
    if len(task.queries) > 1:
        grade = dataclasses.replace(
            grade, passed=False, score=0.0, reason=f"no turns reported; {grade.reason}"
        )
    return turns, grade
