"""Where a grid's cells run: this process (bounded asyncio concurrency) or a Ray cluster.

Both take the same :class:`~rlm_compat.tools.research.compare.grid.GridJob` and :class:`RunSpec`
list and hand every :class:`CellResult` to one callback in the calling process, as cells finish; both
call the same :func:`~rlm_compat.tools.research.compare.grid.run_cell`, so a cell's record does not
depend on the engine.
Ray does all the scheduling of its executor: runs are handed over as tasks and collected.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from ....core import run_sync
from ...shared.tooling_errors import ToolUsageError
from ..base import RunSpec
from .grid import CellResult, GridJob, run_cell

__all__ = ["Executor", "LocalExecutor", "OnResult", "RayExecutor", "executor_from_spec"]

OnResult = Callable[[CellResult], None]

_LOOPBACK_ONLY_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


class Executor(Protocol):
    """Runs cells and reports each result through ``on_result`` (in the calling thread)."""

    name: str

    def run(self, job: GridJob, specs: Sequence[RunSpec], on_result: OnResult) -> None: ...


class LocalExecutor:
    """Cells as asyncio tasks of one event loop, at most ``concurrency`` at a time.

    Model calls are async and REPL steps run in threads (worker processes under ``fixed``), so a
    few concurrent cells keep two cores busy while a real model's calls are in flight.
    """

    name = "local"

    def __init__(self, concurrency: int = 4, scratch: Path | None = None) -> None:
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ToolUsageError(f"concurrency must be an integer >= 1, not {concurrency!r}")
        self.concurrency = concurrency
        self.scratch = scratch

    def run(self, job: GridJob, specs: Sequence[RunSpec], on_result: OnResult) -> None:
        run_sync(self._run_all(job, specs, on_result))  # works inside a running loop (Jupyter)

    async def _run_all(self, job: GridJob, specs: Sequence[RunSpec], on_result: OnResult) -> None:
        gate = asyncio.Semaphore(self.concurrency)

        async def one(spec: RunSpec) -> CellResult:
            async with gate:
                return await run_cell(job, spec, self.scratch)

        started = [asyncio.ensure_future(one(spec)) for spec in specs]  # in plan order
        for finished in asyncio.as_completed(started):
            on_result(await finished)


def _ray_cell(job: GridJob, spec: RunSpec) -> CellResult:
    """The Ray task: one cell in a worker process, its result shipped back by value."""
    return run_sync(run_cell(job, spec))


class RayExecutor:
    """Cells as Ray tasks: on the cluster at ``address``, or on a Ray started on this machine.

    A Ray this executor starts (``address`` None) listens on 127.0.0.1 only (when Ray is first
    imported by this executor: ``$RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` makes Ray use the loopback
    address), uses ``num_cpus`` (default: all) and is shut down after the grid; a running one
    (``ray.init`` done by the caller) is used as it is.
    """

    name = "ray"

    def __init__(self, address: str | None = None, *, num_cpus: int | None = None) -> None:
        self.address = address
        self.num_cpus = num_cpus

    def run(self, job: GridJob, specs: Sequence[RunSpec], on_result: OnResult) -> None:
        if not self.address:
            # Ray reads this when imported: its node address (hence every server it starts) is then
            # the loopback one, instead of this machine's network address on all interfaces
            os.environ.setdefault(_LOOPBACK_ONLY_ENV, "0")
        ray = _import_ray()
        started = False
        if not ray.is_initialized():
            options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
            if self.address:
                options["address"] = self.address
            else:
                options["num_cpus"] = self.num_cpus
            ray.init(**options)
            started = True
        try:
            job_ref = ray.put(job)
            cell = ray.remote(num_cpus=1)(_ray_cell)
            waiting = [cell.remote(job_ref, spec) for spec in specs]
            while waiting:
                done, waiting = ray.wait(waiting, num_returns=1)
                for ref in done:
                    on_result(ray.get(ref))
        finally:
            if started:
                ray.shutdown()


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ToolUsageError(
            "the Ray executor needs Ray: pip install 'rlm-compat[ray]' (or use --executor local)"
        ) from None
    return ray


def executor_from_spec(spec: str, *, concurrency: int = 4, scratch: Path | None = None) -> Executor:
    """``local``, ``ray`` (a Ray on this machine) or ``ray=ADDRESS`` (e.g. ``ray=auto``)."""
    kind, _, address = spec.partition("=")
    if kind == "local" and not address:
        return LocalExecutor(concurrency, scratch)
    if kind == "ray":
        return RayExecutor(address or None)
    raise ToolUsageError(f"unknown executor {spec!r}; use 'local', 'ray' or 'ray=ADDRESS'")
