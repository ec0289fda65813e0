"""Named suites of generated tasks: what ``--suite NAME`` means.

A suite is fixed data (kinds x sizes x seeds) with a version: a result table names the suite and
its version, so a later change of what "standard" holds never silently mixes with old results.

================  ====================================  ===========================================
name              tasks                                 for
================  ====================================  ===========================================
``smoke``         our four kinds at 10 k, seed 0        tests and a first look (4 tasks)
``quick``         our four kinds at 10 k and 100 k      a fast grid (8 tasks)
``ablation``      our four kinds at 10 k, 100 k, 1 M    the checked-in quirk ablation (12 tasks)
``standard``      our four kinds at 10 k ... 10 M       the full comparison (16 tasks)
``paper-smoke``   sniah, oolong, pairs at 2^13 tokens   CI's cross-implementation grid (3 tasks)
``paper``         the same at 2^13 ... 2^18 tokens      the paper's Fig. 1 scaling (18 tasks)
``paper-beyond``  the same at 2^13 ... 2^20 tokens      past the paper's range (21 tasks)
``turns-smoke``   followup, lookup at 10 k              tests of sessions and tools (2 tasks)
``turns``         followup, lookup at 100 k ... 10 M     sessions vs a fresh run per turn (6 tasks)
================  ====================================  ===========================================

Our four kinds are ``needle``, ``aggregate``, ``multihop`` and ``combine``; the paper-style ones
(:mod:`.paper_tasks`) are sized in tokens at 4 characters a token (``2^13t`` = 32 768 characters).
``followup`` (three questions in turn) and ``lookup`` (a tool) are in :mod:`.conversation_tasks`;
run them with ``--config session:fixed`` beside ``--config fixed`` to compare a session with a
fresh run per question.

``load_suite(name, seeds=3)`` repeats every task with seeds 0, 1 and 2 (new corpora, new answers).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from ..shared.tooling_errors import ToolUsageError
from .paper_tasks import PAPER_SIZES
from .tasks import SIZES, GeneratedTask

__all__ = ["SUITES", "TaskSuite", "load_suite"]


@dataclasses.dataclass(frozen=True)
class TaskSuite:
    """A :class:`~rlm_compat.tools.research.base.Suite` of :class:`~.tasks.GeneratedTask` specs."""

    name: str
    version: str
    specs: tuple[GeneratedTask, ...]

    def tasks(self) -> Iterator[GeneratedTask]:
        """The specs in a stable order (kind, then size, then seed)."""
        return iter(self.specs)

    def task(self, task_id: str) -> GeneratedTask:
        """The spec with this id; ToolUsageError naming the suite's ids when absent."""
        for spec in self.specs:
            if spec.task_id == task_id:
                return spec
        known = ", ".join(s.task_id for s in self.specs[:8]) + (" ..." if len(self.specs) > 8 else "")
        raise ToolUsageError(f"suite {self.name!r} has no task {task_id!r}; it has {known}")


OUR_KINDS = ("needle", "aggregate", "multihop", "combine")
PAPER_KINDS = ("sniah", "oolong", "pairs")
TURN_KINDS = ("followup", "lookup")
_PAPER = tuple(f"2^{n}t" for n in range(13, 19))

SUITES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "smoke": (OUR_KINDS, ("10k",)),
    "quick": (OUR_KINDS, ("10k", "100k")),
    "ablation": (OUR_KINDS, ("10k", "100k", "1m")),
    "standard": (OUR_KINDS, ("10k", "100k", "1m", "10m")),
    "paper-smoke": (PAPER_KINDS, ("2^13t",)),
    "paper": (PAPER_KINDS, _PAPER),
    "paper-beyond": (PAPER_KINDS, (*_PAPER, "2^20t")),
    "turns-smoke": (TURN_KINDS, ("10k",)),
    "turns": (TURN_KINDS, ("100k", "1m", "10m")),
}
"""Suite names: the kinds and the size labels (:data:`~.tasks.SIZES`, :data:`~.paper_tasks.PAPER_SIZES`)
each runs every kind at."""

SUITE_VERSION = "1"


def load_suite(name: str, *, seeds: int = 1) -> TaskSuite:
    """The suite called ``name`` with seeds ``0 .. seeds-1`` of every task.

    The name records a non-default seed count (``standard*3``) so results of different
    repetitions never share a suite name.
    """
    if name not in SUITES:
        raise ToolUsageError(f"unknown suite {name!r}; choose one of {sorted(SUITES)}")
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise ToolUsageError(f"seeds must be an integer >= 1, not {seeds!r}")
    kinds, labels = SUITES[name]
    specs = tuple(
        GeneratedTask(kind, {**SIZES, **PAPER_SIZES}[label], seed)
        for kind in kinds
        for label in labels
        for seed in range(seeds)
    )
    return TaskSuite(name if seeds == 1 else f"{name}*{seeds}", SUITE_VERSION, specs)
