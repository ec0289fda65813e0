"""Big contexts through the RLM loop: inline, the default worker, and plain ``exec``, in one run.

    python benchmarks/bigcontext_bench.py [--sizes 100,1000] [--timeout S] [--runs 3] [--runs-rest 2]
        [--latency 0.5]

The workload (issue 22): a deterministic log-like context of ``--sizes`` MB (lines of ~90
characters, 1 in 97 an ``ERROR``), then through ``RLM.complete`` with a scripted model:

1. ``n = len(context)`` (the first step: the context crosses to the worker here)
2. ``lines = context.split('\\n')``
3. ``errors = [l for l in lines if 'ERROR' in l]``
4. ``ids = re.findall(r'id=(\\d+)', context)``
5. three trivial steps (``k = 1``...) with all of that in the namespace
6. ``result = ...`` and ``FINAL_VAR(result)``

Each mode runs in its own fresh process (so peak memory is its own; the first size ``--runs``
times, modes interleaved, cells are medians; the other sizes ``--runs-rest`` times): ``inline``
(``isolation="inline"``), ``default`` (profile ``fixed``'s default: a worker process, state in
the worker) and ``plain`` (the same code with ``exec`` in one dict, no RLM). Every setting is
the default unless ``--timeout`` sets ``repl_timeout`` (profile ``fixed``'s default step timeout
grows with the context, 35 s at 1 GB; issue 34): each run's answer must equal ``plain``'s, so a
step that timed out shows as a MISS. Reported per mode: each step's wall time, the
whole run, the parent's peak RSS and (default) the worker's peak RSS (``VmHWM``, read after each
step). Targets (issue 22, 100 MB): whole run <= 1.5x inline, trivial step <= 5 ms, parent peak
<= context + 300 MB; 1 GB: the workload succeeds. PASS / MISS is printed, never asserted.

The scripted model answers at once, so the first step waits for the whole crossing (the RLM
loop starts sending the context to the worker before its first model call; with a real model
that call hides it). A second run at the first size with the model answering after
``--latency`` seconds shows that case.

The crossing alone (issue 34): per size, in one process, a plain in-process copy of the
context's bytes, the parent's write of the memory file, the worker's read of it, and the first
step of an already started worker (the context crosses); the crossing is reported as a ratio to
the plain copy (target <= 3x).

``--shared-runs N`` adds the shared-context scenario at the first size: N concurrent runs over
one context (benchmarks/shared_context_bench.py, in a fresh process).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MB = 1_000_000

STEPS = [
    ("first step: n = len(context)", "n = len(context)\nprint(n)"),
    ("lines = context.split('\\n')", "lines = context.split('\\n')\nprint(len(lines))"),
    ("filter comprehension", "errors = [l for l in lines if 'ERROR' in l]\nprint(len(errors))"),
    ("re.findall", "ids = re.findall(r'id=(\\d+)', context)\nprint(len(ids))"),
    ("trivial step 1 (k = 1)", "k = 1"),
    ("trivial step 2 (k = 2)", "k = 2"),
    ("trivial step 3 (k = 3)", "k = 3"),
    (
        "FINAL_VAR step",
        "result = f'{n} {len(lines)} {len(errors)} {len(ids)}'\nFINAL_VAR('result')",
    ),
]


def make_context(megabytes: int) -> str:
    lines = []
    for i in range(12_000):
        level = "ERROR" if i % 97 == 0 else "INFO"
        lines.append(
            f"2026-01-01T00:{i % 60:02d}:{i % 60:02d} host{i % 97:02d} {level} id={i} "
            f"request handled in {i % 1000} ms path=/api/v1/items/{i % 5000}"
        )
    block = "\n".join(lines) + "\n"
    return block * max(1, megabytes * MB // len(block))


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _worker_hwm_mb(pid: int | None) -> float | None:
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def child(mode: str, megabytes: int, timeout: float | None, latency: float = 0.0) -> dict[str, Any]:
    """One mode, one size, in this (fresh) process."""
    context = make_context(megabytes)
    step_timeout = None
    base_rss = _peak_rss_mb()
    times: list[float] = []
    worker_peak: list[float] = []
    if mode == "plain":
        ns: dict[str, Any] = {"context": context, "re": re, "FINAL_VAR": lambda name: None}
        started = time.perf_counter()
        for _, code in STEPS:
            t0 = time.perf_counter()
            exec(code.replace("print(", "str("), ns)
            times.append(time.perf_counter() - t0)
        total = time.perf_counter() - started
        answer = ns["result"]
    else:
        from rlm_compat import RLM
        from rlm_compat.clients import ScriptedClient
        from rlm_compat.repl import REPLExecutor

        original = REPLExecutor.execute

        def timed(self: REPLExecutor, code: str, env: dict[str, Any], **kwargs: Any) -> str:
            t0 = time.perf_counter()
            try:
                return original(self, code, env, **kwargs)
            finally:
                times.append(time.perf_counter() - t0)
                hwm = _worker_hwm_mb(getattr(self._runner, "worker_pid", None))
                if hwm is not None:
                    worker_peak.append(hwm)

        REPLExecutor.execute = timed  # type: ignore[method-assign]
        replies = [f"```python\n{code}\n```" for _, code in STEPS]
        scripted = ScriptedClient(replies)

        class Slow:
            """The scripted model, answering after ``latency`` seconds as a provider would."""

            async def complete(self, model: str, messages: Any, **kwargs: Any) -> str:
                import asyncio

                await asyncio.sleep(latency)
                return await scripted.complete(model, messages, **kwargs)

        chosen: dict[str, Any] = {} if timeout is None else {"repl_timeout": timeout}
        rlm = RLM(
            "scripted",
            client=Slow() if latency else scripted,
            isolation="inline" if mode == "inline" else None,
            **chosen,
        )
        started = time.perf_counter()
        answer = rlm.complete("How many errors?", context)
        total = time.perf_counter() - started
        assert rlm.last_run is not None
        step_timeout = rlm.last_run.config["repl_timeout"]
    return {
        "mode": mode,
        "mb": megabytes,
        "context_mb": len(context) / MB,
        "context_mib": len(context) / (1 << 20),
        "answer": answer,
        "step_timeout": step_timeout,
        "steps": times,
        "total": total,
        "parent_peak_mb": _peak_rss_mb(),
        "parent_base_mb": base_rss,
        "worker_peak_mb": max(worker_peak) if worker_peak else None,
    }


def crossing(megabytes: int, repeats: int = 3) -> dict[str, Any]:
    """The context's crossing against a plain in-process copy of the same bytes, in one process.

    ``plain``: ``context + "."`` (a new ``str`` of the same bytes: one allocation, one memcpy).
    ``write`` / ``read``: the two halves of the crossing run here, as the parent and the worker
    run them (:mod:`rlm_compat.sandbox.isolate.mapped`). ``crossing``: ``n = len(context)`` as the
    first step of a worker already started (``k = 1`` before it), so the worker's start is not
    counted; a fresh worker each time, since a session sends its context once. Medians.
    """
    from rlm_compat.repl import REPLExecutor
    from rlm_compat.sandbox.isolate import mapped

    context = make_context(megabytes)
    timings: dict[str, list[float]] = {"plain": [], "write": [], "read": [], "crossing": []}
    for _ in range(repeats):
        t0 = time.perf_counter()
        copy = context + "."
        timings["plain"].append(time.perf_counter() - t0)
        del copy
        t0 = time.perf_counter()
        fd, kind, size = mapped.write(context)
        timings["write"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        value = mapped.read(fd, kind, size)
        timings["read"].append(time.perf_counter() - t0)
        del value
        with REPLExecutor(isolation="process", timeout=600) as ex:
            ex.execute("k = 1", {})
            t0 = time.perf_counter()
            ex.execute("n = len(context)", {"context": context})
            timings["crossing"].append(time.perf_counter() - t0)
    return {"mode": "crossing", "mb": megabytes, **{k: statistics.median(v) for k, v in timings.items()}}


def crossing_table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| size | plain copy (ms) | parent's write (ms) | worker's read (ms) | crossing (ms) "
        "| crossing / plain copy <= 3x |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['mb']} MB | failed: {r['error']} | | | | MISS |")
            continue
        ratio = r["crossing"] / r["plain"]
        ok = "PASS" if ratio <= 3 else "MISS"
        lines.append(
            f"| {r['mb']} MB | {_ms(r['plain'])} | {_ms(r['write'])} | {_ms(r['read'])} "
            f"| {_ms(r['crossing'])} | {ratio:.2f}x {ok} |"
        )
    return "\n".join(lines)


def _run_child(mode: str, megabytes: int, timeout: float | None, latency: float = 0.0) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), LITELLM_LOCAL_MODEL_COST_MAP="True")
    argv = [sys.executable, __file__, "--child", json.dumps([mode, megabytes, timeout, latency])]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT)
    if proc.returncode != 0:
        return {"mode": mode, "mb": megabytes, "error": proc.stderr.strip().splitlines()[-1:]}
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def _median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-cell medians of several runs of one mode (peaks: the highest); a failed run wins."""
    failed = [r for r in runs if "error" in r]
    if failed:
        return failed[0]
    merged = dict(runs[0])
    merged["steps"] = [statistics.median(r["steps"][i] for r in runs) for i in range(len(STEPS))]
    merged["total"] = statistics.median(r["total"] for r in runs)
    merged["parent_peak_mb"] = max(r["parent_peak_mb"] for r in runs)
    workers = [r["worker_peak_mb"] for r in runs if r["worker_peak_mb"] is not None]
    merged["worker_peak_mb"] = max(workers) if workers else None
    merged["runs"] = len(runs)
    merged["answers"] = [r["answer"] for r in runs]
    return merged


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}" if seconds < 10 else f"{seconds * 1000:.0f}"


def table(results: dict[tuple[str, int], dict[str, Any]], sizes: list[int]) -> str:
    modes = ("inline", "default", "plain")
    head = "| measurement | " + " | ".join(f"{m} {s} MB" for s in sizes for m in modes) + " |"
    rows = [head, "|" + "---|" * (1 + len(sizes) * len(modes))]

    def cell(mode: str, size: int, pick: Any) -> str:
        r = results.get((mode, size), {})
        if "error" in r:
            return "failed"
        try:
            value = pick(r)
        except (KeyError, IndexError, TypeError):
            return ""
        return "" if value is None else str(value)

    for index, (label, _) in enumerate(STEPS):
        rows.append(
            f"| {label} (ms) | "
            + " | ".join(cell(m, s, lambda r, i=index: _ms(r["steps"][i])) for s in sizes for m in modes)
            + " |"
        )
    rows.append(
        "| whole run (ms) | "
        + " | ".join(cell(m, s, lambda r: _ms(r["total"])) for s in sizes for m in modes)
        + " |"
    )
    rows.append(
        "| parent peak RSS (MiB) | "
        + " | ".join(cell(m, s, lambda r: f"{r['parent_peak_mb']:.0f}") for s in sizes for m in modes)
        + " |"
    )
    rows.append(
        "| worker peak RSS (MiB) | "
        + " | ".join(
            cell(m, s, lambda r: None if r["worker_peak_mb"] is None else f"{r['worker_peak_mb']:.0f}")
            for s in sizes
            for m in modes
        )
        + " |"
    )
    return "\n".join(rows)


def verdicts(results: dict[tuple[str, int], dict[str, Any]], sizes: list[int]) -> str:
    lines = ["| target | value | result |", "|---|---|---|"]
    for size in sizes:
        inline, default = results.get(("inline", size), {}), results.get(("default", size), {})
        if "error" in default or "steps" not in default:
            lines.append(f"| {size} MB workload succeeds, default configuration | failed | MISS |")
            continue
        answer = default["answer"]
        lines.append(f"| {size} MB workload succeeds, default configuration | answer {answer!r} | PASS |")
        expected = results.get(("plain", size), {}).get("answer")
        for mode, r in (("inline", inline), ("default", default)):
            answers = r.get("answers", [])
            ok = "PASS" if answers and all(a == expected for a in answers) and "error" not in r else "MISS"
            label = f"{size} MB {mode}: every step done, no timeout, answer = plain's ({len(answers)} runs)"
            lines.append(f"| {label} | step timeout {r.get('step_timeout')} s | {ok} |")
        if "steps" in inline:
            ratio = default["total"] / inline["total"]
            ok = "PASS" if ratio <= 1.5 else "MISS"
            lines.append(f"| {size} MB whole run, default / inline <= 1.5x | {ratio:.2f}x | {ok} |")
        trivial = statistics.median(default["steps"][4:7])
        ok = "PASS" if trivial <= 0.005 else "MISS"
        label = f"{size} MB trivial step with that state <= 5 ms (median of 3)"
        lines.append(f"| {label} | {trivial * 1000:.2f} ms | {ok} |")
        over = default["parent_peak_mb"] - default["context_mib"]
        ok = "PASS" if over <= 300 else "MISS"
        lines.append(f"| {size} MB parent peak RSS - context <= 300 MB | {over:.0f} MiB | {ok} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000")
    parser.add_argument("--timeout", type=float, default=None, help="repl_timeout (default: the profile's)")
    parser.add_argument("--runs", type=int, default=3, help="runs of the first size (medians)")
    parser.add_argument("--runs-rest", type=int, default=2, help="runs of the other sizes")
    parser.add_argument("--latency", type=float, default=0.5, help="model latency of the extra rows")
    parser.add_argument(
        "--shared-runs", type=int, default=0, help="then N concurrent runs over the first size"
    )
    parser.add_argument("--child")
    args = parser.parse_args()
    if args.child:
        spec = json.loads(args.child)
        print(json.dumps(crossing(spec[1]) if spec[0] == "crossing" else child(*spec)))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    print(f"load average before: {' '.join(load)}; python {sys.version.split()[0]}; {os.cpu_count()} CPUs")
    results: dict[tuple[str, int], dict[str, Any]] = {}
    for size in sizes:
        runs: dict[str, list[dict[str, Any]]] = {"inline": [], "default": [], "plain": []}
        for _ in range(args.runs if size == sizes[0] else args.runs_rest):
            for mode in runs:  # interleaved, so load drifts hit every mode alike
                run = _run_child(mode, size, args.timeout)
                print(f"  {mode} {size} MB: {json.dumps(run)[:300]}", file=sys.stderr)
                runs[mode].append(run)
        for mode, done in runs.items():
            results[(mode, size)] = _median_run(done)
    crossings = [_run_child("crossing", size, args.timeout) for size in sizes]
    slow = {}
    if args.latency:
        for mode in ("inline", "default"):
            slow[mode] = _run_child(mode, sizes[0], args.timeout, args.latency)
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    print(f"load average after: {' '.join(load)}\n")
    print(table(results, sizes))
    print()
    print(verdicts(results, sizes))
    print()
    print(crossing_table(crossings))
    if slow and all("total" in r for r in slow.values()):
        inline, default = slow["inline"]["total"], slow["default"]["total"]
        print(
            f"\nwith the model answering in {args.latency:g} s per call ({sizes[0]} MB): whole run "
            f"inline {inline:.2f} s, default {default:.2f} s ({default / inline:.2f}x); first step "
            f"inline {slow['inline']['steps'][0] * 1000:.1f} ms, default "
            f"{slow['default']['steps'][0] * 1000:.1f} ms (the context crossed during the first model call)"
        )
    if args.shared_runs:
        _shared(args.shared_runs, sizes[0])


def _shared(runs: int, size: int) -> None:
    """The shared-context scenario (benchmarks/shared_context_bench.py) in a fresh process."""
    script = str(Path(__file__).resolve().parent / "shared_context_bench.py")
    done = subprocess.run([sys.executable, script, "--runs", str(runs), "--mb", str(size)], check=False)
    if done.returncode:
        print(f"shared-context scenario failed (exit status {done.returncode})")


if __name__ == "__main__":
    main()
