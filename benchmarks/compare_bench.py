"""Grid throughput: ~1,000 scripted runs at one context size through ``rlm-compat compare``'s engine.

    python benchmarks/compare_bench.py --suite SUITE [--policy MODULE:ATTR] [--size 100000]
                                       [--runs-total 1000] [--config fixed --config upstream]
                                       [--concurrency 1 2 4] [--ray] [--max-tasks 10]

``SUITE`` is a built-in suite name or ``package.module:attr`` (as for ``rlm-compat compare``); only
its tasks of ``--size`` characters are used (at most ``--max-tasks`` of them), each config and run
index repeated until the grid has ``--runs-total`` cells. Each row runs the whole grid into a fresh
directory (records, trajectories, summary, charts) with one executor: the local one at each
``--concurrency``, and with ``--ray`` a Ray started on this machine. The target (issue 15): 1,000
scripted runs at 100 k characters finish "in minutes" on this 2-core machine — PASS at <= 300 s.
Nothing is asserted; the table is printed.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

from rlm_compat.tools.research.base import Suite, TaskSpec
from rlm_compat.tools.research.compare.comparison import run_grid
from rlm_compat.tools.research.compare.executors import Executor, LocalExecutor, RayExecutor
from rlm_compat.tools.research.compare.grid import GridJob, plan
from rlm_compat.tools.research.compare.suite_registry import resolve_policy, resolve_suite

TARGET_SECONDS = 300.0


@dataclasses.dataclass(frozen=True)
class SizedSuite:
    """The tasks of ``inner`` at one size (a Suite itself, so the grid runs it unchanged)."""

    inner: Suite
    size: int
    max_tasks: int

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def version(self) -> str:
        return self.inner.version

    def tasks(self) -> Iterable[TaskSpec]:
        return [t for t in self.inner.tasks() if t.size == self.size][: self.max_tasks]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", required=True)
    parser.add_argument("--policy", default=None)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--runs-total", type=int, default=1000)
    parser.add_argument("--config", action="append", default=None)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[4])
    parser.add_argument("--max-tasks", type=int, default=10)
    parser.add_argument("--ray", action="store_true")
    args = parser.parse_args()
    configs = args.config or ["fixed", "upstream"]
    suite = SizedSuite(resolve_suite(args.suite), args.size, args.max_tasks)
    tasks = list(suite.tasks())
    if not tasks:
        parser.error(f"suite {args.suite!r} has no task of {args.size} characters")
    per_cell = -(-args.runs_total // (len(tasks) * len(configs)))
    specs = plan(suite, configs, "scripted", per_cell)
    job = GridJob(suite, resolve_policy(args.policy))
    executors: list[tuple[str, Executor]] = [(f"local x{k}", LocalExecutor(k)) for k in args.concurrency]
    if args.ray:
        executors.append((f"ray (num_cpus={os.cpu_count()})", RayExecutor()))
    print(
        f"{len(specs)} runs: {len(tasks)} tasks of {args.size:,} chars x {configs} x {per_cell} runs; "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, load {os.getloadavg()[0]:.1f}"
    )
    print(f"| executor | runs | wall s | runs/s | ms/run | passed | target <= {TARGET_SECONDS:.0f} s |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for label, executor in executors:
        with tempfile.TemporaryDirectory(prefix="compare-bench-") as scratch:
            started = time.perf_counter()
            outcome = run_grid(job, specs, Path(scratch), executor, configs=configs, progress=False)
            wall = time.perf_counter() - started
        passed = sum(row["passed"] for row in outcome.summary["by_config"])
        verdict = "PASS" if wall <= TARGET_SECONDS else "MISS"
        print(
            f"| {label} | {outcome.ran} | {wall:.1f} | {outcome.ran / wall:.1f} | "
            f"{1000 * wall / outcome.ran:.0f} | {passed} | {verdict} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
