"""Run a comparison grid into a directory and summarise it: the engine of ``rlm-compat compare``.

The directory is the grid's whole state: ``runs.jsonl`` (one record per finished run, the resume
key being ``run_id``), ``trajectories/``, and the outputs rebuilt from the records after every
invocation (``summary.md``, ``summary.json``, the PNG charts). Re-running the same command skips
finished runs, so a killed grid resumes and a grown one (more configs, more runs) only runs what
is new.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ..base import RunRecord, RunSpec
from .executors import Executor
from .grid import CellResult, GridError, GridJob, RunLog
from .plots import write_charts
from .tables import markdown, summarize

__all__ = ["GridOutcome", "run_grid", "write_outputs"]

RUNS_FILE = "runs.jsonl"
TRAJECTORIES = "trajectories"


@dataclasses.dataclass(frozen=True)
class GridOutcome:
    """What one invocation did: how many cells were planned, already done, and run now."""

    out: Path
    planned: int
    skipped: int
    ran: int
    summary: dict[str, Any]
    charts: tuple[str, ...]
    records: tuple[RunRecord, ...] = ()


def run_grid(
    job: GridJob,
    specs: Sequence[RunSpec],
    out: Path,
    executor: Executor,
    *,
    configs: Sequence[str] = (),
    progress: bool = True,
    charts: bool = True,
) -> GridOutcome:
    """Run the cells of ``specs`` not yet in ``out/runs.jsonl``, then write the summary outputs.

    Each finished cell's trajectory is written before its record line, so a record never names
    a trajectory that is not there.
    """
    out.mkdir(parents=True, exist_ok=True)
    (out / TRAJECTORIES).mkdir(exist_ok=True)
    log = RunLog(out / RUNS_FILE)
    _check_one_grid(log, specs)
    pending = log.pending(specs)
    ran = 0
    with _progress(progress, total=len(specs), done=len(specs) - len(pending)) as advance:

        def on_result(cell: CellResult) -> None:
            nonlocal ran
            record = RunRecord.from_json(cell.record)
            if cell.trajectory is not None and record.trajectory is not None:
                (out / record.trajectory).write_text(cell.trajectory, encoding="utf-8")
            known = {turn.trajectory for turn in record.turns}
            for path, text in cell.more_trajectories.items():
                if (
                    path in known
                    and path.startswith(f"{TRAJECTORIES}/")
                    and "/" not in path[len(TRAJECTORIES) + 1 :]
                ):
                    (out / path).write_text(text, encoding="utf-8")
            if cell.logs and record.logs is not None:
                for name, text in cell.logs.items():
                    target = out / record.logs / name
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_text(text, encoding="utf-8")
            log.append(record)
            ran += 1
            advance(record)

        if pending:
            executor.run(job, pending, on_result)
    summary, written = write_outputs(job, list(log.records.values()), out, configs=configs, charts=charts)
    return GridOutcome(
        out, len(specs), len(specs) - len(pending), ran, summary, tuple(written), tuple(log.records.values())
    )


def _check_one_grid(log: RunLog, specs: Sequence[RunSpec]) -> None:
    """One directory holds one suite and one model: its tables average over configs only."""
    for kind in ("suite", "model"):
        found = {getattr(r.spec, kind) for r in log.records.values()}
        found |= {getattr(s, kind) for s in specs}
        if len(found) > 1:
            raise GridError(
                f"{log.path.parent} would mix runs of {kind}s {sorted(found)}; its tables compare "
                f"configs of one {kind}: give each {kind} its own --out directory"
            )


def write_outputs(
    job: GridJob, records: list[RunRecord], out: Path, *, configs: Sequence[str] = (), charts: bool = True
) -> tuple[dict[str, Any], list[str]]:
    """``summary.json``, the charts and ``summary.md`` from every record of the directory."""
    sizes = {tid: job.task_spec(tid).size for tid in {r.spec.task_id for r in records}}
    summary = summarize(records, sizes, configs)
    written = write_charts(summary, out) if charts and records else []
    summary["charts"] = written
    summary["runs_file"] = RUNS_FILE
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    (out / "summary.md").write_text(markdown(summary, written), encoding="utf-8")
    return summary, written


@contextlib.contextmanager
def _progress(show: bool, *, total: int, done: int) -> Iterator[Callable[[RunRecord], None]]:
    if not show or importlib.util.find_spec("rich") is None:  # the bar is rlm-compat[cli]'s
        yield lambda record: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    passed = 0
    columns = (
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[passed]} passed"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=Console(stderr=True), transient=False) as bar:
        task = bar.add_task("compare", total=total, completed=done, passed=passed)

        def advance(record: RunRecord) -> None:
            nonlocal passed
            passed += record.grade.passed
            bar.update(task, advance=1, passed=passed)

        yield advance
