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

__all__ = ["SESSION_PREFIX", "TurnSettings", "run_turns", "session_profile", "turns_record"]

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
