"""How fast the research task suite is: corpus generation and scripted runs.

    python benchmarks/research_tasks_bench.py [--repeat 3] [--runs 20] [--size 100k]

Two tables, measured in one run:

- **Corpus generation**, best of ``--repeat`` uncached builds per kind and size (10 k ... 10 M);
  target: a 10 M character corpus in <= 2 s.
- **Scripted runs** of every kind at ``--size`` under profiles ``fixed`` and ``upstream``
  (inline REPL; the corpus is built once, as a grid's cache does), run ``i`` with policy variant
  ``i``: runs per second on one core, the mean root iterations, and the pass rate. The compare
  grid's target (1,000 runs at 100 k in minutes on 2 cores) needs a few runs per second per core.
"""

from __future__ import annotations

import argparse
import statistics
import time

from rlm_compat import RLM
from rlm_compat.record import CompletionResult
from rlm_compat.tools.research.task_policies import policy_for
from rlm_compat.tools.research.tasks import KINDS, SIZES, GeneratedTask, _build, task_from_id


def _generation(repeat: int) -> None:
    print(f"{'kind':<10}" + "".join(f"{label:>10}" for label in SIZES) + "   (seconds, best of repeats)")
    worst = 0.0
    for kind in KINDS:
        cells = []
        for size in SIZES.values():
            best = min(_timed(lambda k=kind, s=size: _build.__wrapped__(k, s, 0)) for _ in range(repeat))
            cells.append(best)
            if size == SIZES["10m"]:
                worst = max(worst, best)
        print(f"{kind:<10}" + "".join(f"{c:>10.3f}" for c in cells))
    print(f"target: 10 M characters in <= 2 s: {'PASS' if worst <= 2 else 'MISS'} (slowest {worst:.3f} s)\n")


def _timed(work: object) -> float:
    started = time.perf_counter()
    work()  # type: ignore[operator]
    return time.perf_counter() - started


def _runs(runs: int, label: str) -> None:
    print(f"{'kind':<10}{'profile':>10}{'runs/s':>10}{'iterations':>12}{'passed':>8}")
    for kind in KINDS:
        spec = task_from_id(f"{kind}-{label}-s0")
        instance = spec.build()
        for profile in ("fixed", "upstream"):
            iterations, passed = [], 0
            started = time.perf_counter()
            for variant in range(runs):
                policy = policy_for(instance, variant=variant)
                rlm = RLM("scripted", client=policy, profile=profile, isolation="inline")
                result = rlm.try_complete_result(instance.query, instance.context)
                answer = result.answer if isinstance(result, CompletionResult) else None
                passed += spec.grader.grade(answer).passed
                iterations.append(rlm.stats["iterations"])
            rate = runs / (time.perf_counter() - started)
            mean = statistics.mean(iterations)
            print(f"{kind:<10}{profile:>10}{rate:>10.1f}{mean:>12.1f}{passed / runs:>8.0%}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--size", default="100k", choices=list(SIZES))
    args = parser.parse_args()
    GeneratedTask("needle", SIZES["10k"]).build()  # warm imports before timing
    _generation(args.repeat)
    _runs(args.runs, args.size)


if __name__ == "__main__":
    main()
