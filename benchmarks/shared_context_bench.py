"""N concurrent runs over one context: how much memory their workers hold, and what the first step costs.

N RLMs (default configuration: a hardened worker each, profile ``fixed``) answer over the same
``str`` at once, each with a scripted model: step 1 is ``n = len(context)`` (the context reaches
the run's worker: from its context template, or crossing as a copy), step 2 splits it (derived
data, per run; ``--derive-mb`` splits only the last MB so that 16 runs over 1 GB fit in memory),
then ``FINAL_VAR``. When every run has done step 1, the model holds its next reply until the
proportional set size (``Pss`` of ``/proc/PID/smaps_rollup``, shared pages split between their
sharers) of the workers *and of the context templates they were forked from* has been summed, so
the figure is what N live runs hold at once, the shared copy counted once.

    python benchmarks/shared_context_bench.py --runs 4 --mb 200
    python benchmarks/shared_context_bench.py --runs 16 --mb 1000 --derive-mb 64
    python benchmarks/shared_context_bench.py --runs 4 --mb 200 --unshared   # one copy per worker

Targets (printed as PASS / MISS, never asserted): the workers' and templates' total PSS at most
1.5 x the context plus 40 MB per run; every run's answer equal to a plain ``exec`` of the same steps.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bigcontext_bench import MB, make_context


def program_steps(derive_mb: int | None) -> tuple[str, ...]:
    part = "context" if derive_mb is None else f"context[-{derive_mb * MB}:]"
    return (
        "n = len(context)\nprint(n)",
        f"lines = {part}.split('\\n')\nprint(len(lines))",
        "result = f'{n} {len(lines)}'\nFINAL_VAR('result')",
    )


def _pss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


async def measure(runs: int, megabytes: int, derive_mb: int | None = None) -> dict[str, Any]:
    from rlm_compat import RLM
    from rlm_compat.clients import ScriptedClient
    from rlm_compat.repl import REPLExecutor
    from rlm_compat.sandbox import shared_contexts

    context = make_context(megabytes)
    program = program_steps(derive_mb)
    plain: dict[str, Any] = {"context": context, "FINAL_VAR": lambda name: None}
    for code in program:
        exec(code.replace("print(", "str("), plain)
    expected = plain["result"]
    del plain

    first_steps: dict[int, float] = {}
    pids: set[int] = set()
    all_crossed = asyncio.Event()
    loop = asyncio.get_running_loop()
    original = REPLExecutor.execute

    def timed(self: REPLExecutor, code: str, env: dict[str, Any], **kwargs: Any) -> str:
        started = time.perf_counter()
        try:
            return original(self, code, env, **kwargs)
        finally:
            if code.startswith("```python\nn = len(context)"):
                first_steps[id(self)] = time.perf_counter() - started
                pid = getattr(self._runner, "worker_pid", None)
                if pid is not None:
                    pids.add(pid)
                if len(first_steps) == runs:
                    loop.call_soon_threadsafe(all_crossed.set)

    REPLExecutor.execute = timed  # type: ignore[method-assign]

    class HoldAfterFirstStep:
        """The scripted model; its second reply waits until every run's context has crossed."""

        def __init__(self) -> None:
            self.scripted = ScriptedClient([f"```python\n{code}\n```" for code in program])
            self.calls = 0

        async def complete(self, model: str, messages: Any, **kwargs: Any) -> str:
            self.calls += 1
            if self.calls == 2:
                await all_crossed.wait()
            return await self.scripted.complete(model, messages, **kwargs)

    pss: dict[str, float] = {}

    async def sample() -> None:
        await all_crossed.wait()
        values = [_pss_mb(pid) for pid in sorted(pids)]
        pss["workers"] = sum(v for v in values if v is not None)
        pss["counted"] = sum(v is not None for v in values)
        held = [_pss_mb(shared.pid) for shared in shared_contexts()]
        pss["templates"] = sum(v for v in held if v is not None)
        pss["template_count"] = len(held)

    rlms = [RLM("scripted", client=HoldAfterFirstStep()) for _ in range(runs)]
    started = time.perf_counter()
    sampler = asyncio.create_task(sample())
    answers = await asyncio.gather(*(rlm.acomplete("How many lines?", context) for rlm in rlms))
    await sampler
    wall = time.perf_counter() - started
    batch = dict(first_steps)
    later = RLM("scripted", client=ScriptedClient([f"```python\n{code}\n```" for code in program]))
    answers.append(await later.acomplete("How many lines?", context))  # its template may still be there
    later_step = next((t for k, t in first_steps.items() if k not in batch), None)
    REPLExecutor.execute = original  # type: ignore[method-assign]
    steps = sorted(batch.values())
    return {
        "runs": runs,
        "context_mb": len(context) / MB,
        "workers_pss_mb": pss.get("workers", 0.0),
        "workers_counted": pss.get("counted", 0),
        "templates_pss_mb": pss.get("templates", 0.0),
        "templates": pss.get("template_count", 0),
        "first_step_fastest_s": steps[0] if steps else None,
        "first_step_median_s": statistics.median(steps) if steps else None,
        "wall_s": wall,
        "later_first_step_s": later_step,
        "answers_equal": all(a == expected for a in answers),
    }


def report(r: dict[str, Any]) -> str:
    target = 1.5 * r["context_mb"] + 40 * r["runs"]
    total = r["workers_pss_mb"] + r["templates_pss_mb"]
    equal = "PASS" if r["answers_equal"] else "MISS"
    pss_ok = "PASS" if total <= target and r["workers_counted"] == r["runs"] else "MISS"
    lines = [
        f"{r['runs']} concurrent runs over one {r['context_mb']:.0f} MB context ({r['how']})",
        "",
        "| measurement | value | target | result |",
        "|---|---|---|---|",
        f"| workers' + templates' total PSS, all runs live | {total:.0f} MB ({r['workers_counted']} workers "
        f"{r['workers_pss_mb']:.0f} MB, {r['templates']} templates {r['templates_pss_mb']:.0f} MB) "
        f"| <= {target:.0f} MB | {pss_ok} |",
        f"| answers equal a plain exec | {r['answers_equal']} | True | {equal} |",
        f"| first step (the crossing), fastest / median run | {r['first_step_fastest_s'] * 1000:.0f} ms / "
        f"{r['first_step_median_s'] * 1000:.0f} ms | | |",
        f"| first step of a run started after the batch | {(r['later_first_step_s'] or 0) * 1000:.0f} ms "
        "| | |",
        f"| whole batch wall time | {r['wall_s']:.2f} s | | |",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--derive-mb", type=int, default=None, help="split only the context's last MB")
    parser.add_argument("--unshared", action="store_true", help="no context templates: a copy per worker")
    args = parser.parse_args()
    if args.unshared:
        from rlm_compat.sandbox.isolate import templates

        templates.SHARED_MIN = 1 << 62
    result = asyncio.run(measure(args.runs, args.mb, args.derive_mb))
    result["how"] = "default configuration" + (", templates off" if args.unshared else "")
    print(report(result))


if __name__ == "__main__":
    main()
