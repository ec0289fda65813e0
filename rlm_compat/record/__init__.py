"""The run record: observers of the event stream (:mod:`rlm_compat.events`) and per-run state.

:class:`Run` numbers and fans out a run's events; :class:`TreeStats` folds them into tree-wide
figures; :class:`RunBudget` reserves calls and stops a run at its limits; :class:`TrajectoryWriter`
writes them as versioned JSON lines; :class:`ProgressPrinter` prints a line per step;
:class:`CompletionResult` / :class:`FailedCompletionResult` are what ``RLM.complete_result()``
returns.
"""

from __future__ import annotations

from .budget import RunBudget
from .progress import ProgressPrinter
from .results import RESULT_SCHEMA_VERSION, CompletionResult, FailedCompletionResult, RunResult
from .run import Observer, Run
from .stats import TreeStats
from .trajectory import SCHEMA_VERSION, TrajectoryWriter, json_schema, read_trajectory, recorded_calls

__all__ = [
    "RESULT_SCHEMA_VERSION",
    "SCHEMA_VERSION",
    "CompletionResult",
    "FailedCompletionResult",
    "Observer",
    "ProgressPrinter",
    "Run",
    "RunBudget",
    "RunResult",
    "TrajectoryWriter",
    "TreeStats",
    "json_schema",
    "read_trajectory",
    "recorded_calls",
]
