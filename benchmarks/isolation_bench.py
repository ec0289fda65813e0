"""What running each REPL session in a worker process costs: one table, measured in one run.

    python benchmarks/isolation_bench.py [--quick] [--runs 5] [--sessions 50] [--steps 2000]
                                         [--threads 64] [--big-mb 100] [--import-runs 10]

Rows (targets from the isolation issue; PASS / FAIL is printed, never asserted):

1. The first worker of a process whose ``__main__`` imported litellm first (a fresh child per
   run, median of ``--runs``): from ``REPLExecutor()`` (which starts the fork server in the
   background) through the first step up to the worker's "ready" <= 100 ms; the first step's
   wait for it, ``start_worker`` alone and the whole first step end to end are reported too, and
   the first step's wait when ``--lead-ms`` pass between the executor and its first step (as in
   ``RLM``, where a model call comes first).
2. Further sessions (``--sessions`` per child, pooled): worker start p50 / p95 <= 10 ms, the same
   for ``rlm_compat.sandbox.isolate.spawn.start_worker`` called directly; end to end reported.
3. Trivial step p50 (``x = 1``, ``--steps`` per executor in interleaved batches after a warm-up):
   process <= 0.3 ms, inline and the ratio reported.
4. A step touching the context (``n = len(context)``) with a ``--big-mb`` MB string against a
   1 MB one, after each session's first step (the context crosses once per session): ratio
   <= 1.2 in wall time (p50) and CPU time (parent thread + worker, floor of 50-step batches),
   the two sessions interleaved in one run, measured twice: both workers pinned to the parent's
   CPU, then both to another CPU (unpinned, the scheduler's placement of each worker decides
   the comparison, see :func:`_placed_steps`). First steps, and a context that is a list of
   100k strings, are reported.
5. ``--threads`` sessions started at once from as many threads (each: new executor, first
   step): wall time and slowest session, process against inline (the way 2fb46cc runs).
6. ``import rlm_compat`` in a fresh interpreter, median of ``--import-runs``: <= 0.15 s, and
   litellm must not be imported.

Worker start is timed by wrapping ``ProcessRunner._ensure`` (start plus the init / ready
handshake) and ``spawn.start_worker`` in the child processes; nothing in rlm_compat changes.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LIST_ITEMS = 100_000


def _child_env() -> dict[str, str]:
    """This checkout first on the path: the venv's editable install may point elsewhere."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return dict(os.environ, PYTHONPATH=path, LITELLM_LOCAL_MODEL_COST_MAP="True")


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class _StartTimer:
    """Records how long each worker start takes inside the executors (the rest is the step)."""

    def __init__(self) -> None:
        from rlm_compat.sandbox.isolate import process, spawn

        self.ensure: list[float] = []
        self.ensure_end: list[float] = []
        self.start_worker: list[float] = []
        self._lock = threading.Lock()
        original_start = spawn.start_worker
        original_ensure = process.ProcessRunner._ensure

        def start_worker(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return original_start(*args, **kwargs)
            finally:
                self._add(self.start_worker, time.perf_counter() - t0)

        def ensure(runner: Any) -> Any:
            if runner._channel is not None:
                return original_ensure(runner)
            t0 = time.perf_counter()
            try:
                return original_ensure(runner)
            finally:
                end = time.perf_counter()
                self._add(self.ensure, end - t0)
                with self._lock:
                    self.ensure_end.append(end)

        spawn.start_worker = start_worker  # type: ignore[assignment]
        process.ProcessRunner._ensure = ensure  # type: ignore[method-assign]

    def _add(self, where: list[float], seconds: float) -> None:
        with self._lock:
            where.append(seconds * 1000)

    def take(self) -> tuple[list[float], list[float]]:
        with self._lock:
            out = (self.ensure, self.start_worker)
            self.ensure, self.start_worker = [], []
        return out


def _concurrent(isolation: str, threads: int) -> dict[str, float]:
    """``threads`` sessions released at once; wall from the release to the last first step."""
    from rlm_compat.repl import REPLExecutor

    barrier = threading.Barrier(threads)
    spans: list[tuple[float, float]] = []
    executors: list[Any] = []
    errors: list[str] = []
    lock = threading.Lock()

    def session() -> None:
        barrier.wait()
        t0 = time.perf_counter()
        try:
            executor = REPLExecutor(isolation=isolation)
            executor.execute("1", {})
        except Exception as exc:
            with lock:
                errors.append(repr(exc))
            return
        t1 = time.perf_counter()
        with lock:
            spans.append((t0, t1))
            executors.append(executor)

    pool = [threading.Thread(target=session) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    for executor in executors:
        executor.close()
    if errors:
        raise SystemExit(f"{len(errors)} of {threads} {isolation} sessions failed: {errors[0]}")
    return {
        "wall": (max(end for _, end in spans) - min(start for start, _ in spans)) * 1000,
        "max": max(end - start for start, end in spans) * 1000,
    }


def child_sessions(sessions: int, threads: int) -> dict[str, Any]:
    """Rows 1, 2 and 5 in one fresh process whose ``__main__`` imported litellm first."""
    import litellm  # noqa: F401  (the point: a heavy __main__ must not slow the first worker)

    from rlm_compat.config import Limits
    from rlm_compat.repl import REPLExecutor
    from rlm_compat.sandbox.isolate import spawn

    timer = _StartTimer()
    t0 = time.perf_counter()
    executor = REPLExecutor()
    executor.execute("1", {})
    first_total = (time.perf_counter() - t0) * 1000
    first_ready = (timer.ensure_end[0] - t0) * 1000
    executor.close()
    (first_ensure,), (first_start,) = timer.take()

    further: list[float] = []
    for _ in range(sessions):
        t0 = time.perf_counter()
        executor = REPLExecutor()
        executor.execute("1", {})
        further.append((time.perf_counter() - t0) * 1000)
        executor.close()
    further_ensure, _ = timer.take()

    limits = Limits()
    for _ in range(sessions):
        handle = spawn.start_worker(limits, "forkserver")
        handle.close()
    direct = timer.take()[1]

    concurrent = {isolation: _concurrent(isolation, threads) for isolation in ("process", "inline")}
    timer.take()
    spawn.shutdown()
    return {
        "first_ready": first_ready,
        "first_ensure": first_ensure,
        "first_start": first_start,
        "first_total": first_total,
        "further_total": further,
        "further_ensure": further_ensure,
        "direct_start": direct,
        "concurrent": concurrent,
    }


def child_ahead(lead_ms: float) -> dict[str, float]:
    """Row 1's first worker as ``RLM`` meets it: the executor is made when a run starts, and a
    model call (here a sleep of ``lead_ms``) comes before the first step."""
    import litellm  # noqa: F401

    from rlm_compat.repl import REPLExecutor

    timer = _StartTimer()
    executor = REPLExecutor()
    time.sleep(lead_ms / 1000)
    t0 = time.perf_counter()
    executor.execute("1", {})
    total = (time.perf_counter() - t0) * 1000
    executor.close()
    (wait,), _ = timer.take()
    return {"wait": wait, "total": total}


def _text(chars: int) -> str:
    """Deterministic ASCII lines; only the size matters to what is measured here."""
    line = "2024-06-01T00:00:00 INFO api alpha beta gamma delta code=200 request handled\n"
    return (line * (chars // len(line) + 1))[:chars]


def _step_samples(executor: Any, env: dict[str, Any], code: str, count: int) -> list[float]:
    out: list[float] = []
    execute, clock = executor.execute, time.perf_counter
    for _ in range(count):
        t0 = clock()
        execute(code, env)
        out.append((clock() - t0) * 1000)
    return out


def _worker_cpu_ns(executor: Any) -> int:
    """CPU time the executor's worker has used (``/proc/<pid>/schedstat``, nanoseconds)."""
    pid = executor._runner.worker_pid
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0])


def _placements() -> list[tuple[str, int, int]]:
    """``(label, parent CPU, worker CPU)`` for row 4: the workers on the parent's CPU, then on
    another one. Where affinity cannot be set (or there is one CPU), one unpinned placement."""
    if not hasattr(os, "sched_setaffinity"):
        return [("unpinned", -1, -1)]
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return [("unpinned", -1, -1)]
    return [("same CPU", cpus[0], cpus[0]), ("other CPU", cpus[0], cpus[1])]


def _pin(pid: int, cpu: int) -> None:
    if cpu >= 0:
        os.sched_setaffinity(pid, {cpu})


def _placed_steps(
    runs: dict[str, tuple[Any, dict[str, Any]]], code: str, total: int, batch: int, cpus: tuple[int, int]
) -> dict[str, dict[str, Any]]:
    """Wall time per step and CPU time per step (parent thread + worker), in rotating batches.

    Every session in the same placement: the parent thread on ``cpus[0]``, every worker on
    ``cpus[1]``. Which CPU a worker shares with its parent decides a step's cost on this VM more
    than anything the step does (a wake-up of a process on another virtual CPU is an
    inter-processor interrupt through the hypervisor: ~35 us more CPU per round trip, see
    docs/performance.md), and the scheduler places each worker by its history — a worker that
    just received 100 MB while the parent was still sending tends to stay on the other CPU. Left
    unpinned, two sessions compare placements, not steps.

    Per session: every step's wall time, and the CPU time of each batch as median and floor (the
    cheapest batch; interference from other work only ever adds to a batch, as timeit's min).
    """
    parent_cpu, worker_cpu = cpus
    before = os.sched_getaffinity(0) if parent_cpu >= 0 else set()
    _pin(0, parent_cpu)
    for executor, _ in runs.values():
        _pin(executor._runner.worker_pid, worker_cpu)
    try:
        for executor, env in runs.values():
            _step_samples(executor, env, code, batch)  # warm-up on the new CPU
        wall: dict[str, list[float]] = {name: [] for name in runs}
        cpu: dict[str, list[float]] = {name: [] for name in runs}
        names = list(runs)
        for i in range(max(1, total // batch)):
            for name in names[i % len(names) :] + names[: i % len(names)]:
                executor, env = runs[name]
                worker0, parent0 = _worker_cpu_ns(executor), time.thread_time_ns()
                wall[name].extend(_step_samples(executor, env, code, batch))
                spent = time.thread_time_ns() - parent0 + _worker_cpu_ns(executor) - worker0
                cpu[name].append(spent / batch / 1000)
    finally:
        if before:
            os.sched_setaffinity(0, before)
    return {
        name: {"wall": wall[name], "cpu_median": statistics.median(cpu[name]), "cpu_floor": min(cpu[name])}
        for name in runs
    }


def _interleaved(
    runs: dict[str, tuple[Any, dict[str, Any]]], code: str, total: int, batch: int, warmup: int
) -> dict[str, list[float]]:
    """Batches in rotating order, so drift of a loaded machine hits every runner alike."""
    for executor, env in runs.values():
        _step_samples(executor, env, code, warmup)
    samples: dict[str, list[float]] = {name: [] for name in runs}
    names = list(runs)
    for i in range(max(1, total // batch)):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            executor, env = runs[name]
            samples[name].extend(_step_samples(executor, env, code, batch))
    return samples


def child_steps(steps: int, big_mb: int, sessions: int, big_steps: int) -> dict[str, Any]:
    """Rows 3 and 4: per-step costs once a session's worker runs."""
    from rlm_compat.repl import REPLExecutor

    with REPLExecutor(isolation="process") as proc, REPLExecutor(isolation="inline") as inline:
        trivial = _interleaved(
            {
                "process": (proc, {"context": "ctx", "query": "q"}),
                "inline": (inline, {"context": "ctx", "query": "q"}),
            },
            "x = 1",
            steps,
            100,
            200,
        )

    small, big = _text(1 << 20), _text(big_mb << 20)
    as_list = [
        big[i * (len(big) // LIST_ITEMS) : (i + 1) * (len(big) // LIST_ITEMS)] for i in range(LIST_ITEMS)
    ]
    contexts: dict[str, Any] = {"1MB": small, "big": big, "list": as_list}
    code = "n = len(context)"
    first: dict[str, list[float]] = {name: [] for name in contexts}
    for _ in range(sessions):
        for name, context in contexts.items():
            with REPLExecutor(isolation="process", timeout=120) as executor:
                env: dict[str, Any] = {}
                executor.execute("1", env)  # the worker is up: the step below is the crossing alone
                env["context"] = context
                gc.collect()
                t0 = time.perf_counter()
                executor.execute(code, env)
                first[name].append((time.perf_counter() - t0) * 1000)
    steady: dict[str, list[float]] = {}
    with (
        REPLExecutor(isolation="process", timeout=120) as e_small,
        REPLExecutor(isolation="process", timeout=120) as e_big,
    ):
        runs = {"1MB": (e_small, {"context": small}), "big": (e_big, {"context": big})}
        for executor, env in runs.values():
            executor.execute(code, env)
        placed = {label: _placed_steps(runs, code, big_steps, 50, (p, w)) for label, p, w in _placements()}
    with REPLExecutor(isolation="process", timeout=120) as e_list:
        env = {"context": as_list}
        e_list.execute(code, env)
        steady["list"] = _step_samples(e_list, env, code, max(5, big_steps // 50))
    return {"trivial": trivial, "first": first, "steady": steady, "placed": placed}


def _run_child(args: list[str]) -> dict[str, Any]:
    command = [sys.executable, __file__, *args]
    out = subprocess.run(command, cwd=ROOT, env=_child_env(), capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{' '.join(args)} failed:\n{out.stderr}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _import_once() -> tuple[float, bool]:
    code = (
        f"import sys, time; sys.path.insert(0, {str(ROOT)!r}); t = time.perf_counter(); "
        "import rlm_compat; elapsed = time.perf_counter() - t; "
        "print(elapsed, any(m == 'litellm' or m.startswith('litellm.') for m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )
    elapsed, leaked = out.stdout.split()
    return float(elapsed) * 1000, leaked == "True"


def _commit() -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return head + (" (+ uncommitted changes)" if git("status", "--porcelain", "--", "rlm_compat") else "")


Row = tuple[str, str, str, str]


def _row(what: str, value: float, unit: str, target: float | None = None, fmt: str = "{:.2f}") -> Row:
    cell = fmt.format(value) + (f" {unit}" if unit else "")
    if target is None:
        return what, cell, "", ""
    return what, cell, f"<= {fmt.format(target)} {unit}".rstrip(), "PASS" if value <= target else "FAIL"


def _table(rows: list[Row]) -> str:
    heads: Row = ("measurement", "value", "target", "result")
    widths = [max(len(r[i]) for r in [heads, *rows]) for i in range(4)]

    def line(cells: Row) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    return "\n".join(
        [line(heads), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *(line(r) for r in rows)]
    )


def build_rows(
    sessions: list[dict[str, Any]],
    steps: dict[str, Any],
    imports: list[tuple[float, bool]],
    ahead: list[dict[str, float]],
    args: argparse.Namespace,
) -> list[Row]:
    med: Callable[[str], float] = lambda key: statistics.median(s[key] for s in sessions)  # noqa: E731

    def pooled(key: str) -> list[float]:
        return [v for s in sessions for v in s[key]]

    rows: list[Row] = []
    runs = f"median of {len(sessions)} fresh processes"
    rows.append(
        _row(
            f"1. first worker: REPLExecutor() to its ready, litellm in __main__ ({runs})",
            med("first_ready"),
            "ms",
            100,
            "{:.1f}",
        )
    )
    rows.append(
        _row(
            "1. first worker: the first step's wait for it (the fork server starts with the executor)",
            med("first_ensure"),
            "ms",
            None,
            "{:.1f}",
        )
    )
    rows.append(
        _row(
            "1. first worker: start_worker alone (fork server start included)",
            med("first_start"),
            "ms",
            None,
            "{:.1f}",
        )
    )
    rows.append(
        _row(
            "1. first session end to end: REPLExecutor() + execute('1', {})",
            med("first_total"),
            "ms",
            None,
            "{:.1f}",
        )
    )
    lead = f"{args.lead_ms:g} ms"
    rows.append(
        _row(
            f"1. first step's wait for its worker, executor made {lead} before (RLM: a model call first)",
            statistics.median(a["wait"] for a in ahead),
            "ms",
            None,
            "{:.1f}",
        )
    )
    n = len(pooled("further_ensure"))
    for q, label in ((0.5, "p50"), (0.95, "p95")):
        rows.append(
            _row(
                f"2. further worker start {label} ({n} sessions)",
                _percentile(pooled("further_ensure"), q),
                "ms",
                10,
            )
        )
    for q, label in ((0.5, "p50"), (0.95, "p95")):
        rows.append(
            _row(
                f"2. spawn.start_worker directly {label} ({n} calls)",
                _percentile(pooled("direct_start"), q),
                "ms",
                10,
            )
        )
    for q, label in ((0.5, "p50"), (0.95, "p95")):
        rows.append(
            _row(
                f"2. further session end to end {label} (new executor + first step)",
                _percentile(pooled("further_total"), q),
                "ms",
            )
        )
    trivial = steps["trivial"]
    proc, inline = (statistics.median(trivial[k]) for k in ("process", "inline"))
    count = len(trivial["process"])
    rows.append(_row(f"3. trivial step p50, process ({count} x `x = 1`)", proc, "ms", 0.3, "{:.3f}"))
    rows.append(_row(f"3. trivial step p50, inline ({count} x `x = 1`)", inline, "ms", None, "{:.3f}"))
    rows.append(_row("3. trivial step ratio process / inline", proc / inline, "x", None, "{:.1f}"))
    first, steady = steps["first"], steps["steady"]
    big = f"{args.big_mb} MB"
    for placement, per in steps["placed"].items():
        where = f"4. `n = len(context)`, workers on {placement}"
        if placement == "unpinned":
            where = "4. `n = len(context)`, unpinned"
        small, large = per["1MB"], per["big"]
        small_p50, big_p50 = statistics.median(small["wall"]), statistics.median(large["wall"])
        rows.append(
            (
                f"{where}: wall p50, 1 MB / {big} str ({len(small['wall'])} steps each)",
                f"{small_p50:.3f} / {big_p50:.3f} ms",
                "",
                "",
            )
        )
        rows.append(_row(f"{where}: wall ratio {big} / 1 MB", big_p50 / small_p50, "x", 1.2))
        for name, label in (("1MB", "1 MB"), ("big", big)):
            rows.append(
                (
                    f"{where}: CPU per step, {label} str, median / floor of batches",
                    f"{per[name]['cpu_median']:.1f} / {per[name]['cpu_floor']:.1f} us",
                    "",
                    "",
                )
            )
        rows.append(
            _row(
                f"{where}: CPU ratio {big} / 1 MB, floors",
                large["cpu_floor"] / small["cpu_floor"],
                "x",
                1.2,
            )
        )
    rows.append(
        _row(
            f"4. first step (context crosses), 1 MB str, median of {len(first['1MB'])}",
            statistics.median(first["1MB"]),
            "ms",
            None,
            "{:.1f}",
        )
    )
    rows.append(
        _row(
            f"4. first step (context crosses), {big} str",
            statistics.median(first["big"]),
            "ms",
            None,
            "{:.1f}",
        )
    )
    items = f"list of {LIST_ITEMS // 1000}k str, {big} in all"
    rows.append(
        _row(
            f"4. first step (context crosses), {items}",
            statistics.median(first["list"]),
            "ms",
            None,
            "{:.1f}",
        )
    )
    rows.append(
        _row(
            f"4. `n = len(context)` p50, {items} ({len(steady['list'])} steps)",
            statistics.median(steady["list"]),
            "ms",
            None,
            "{:.1f}",
        )
    )
    for isolation in ("process", "inline"):
        wall = statistics.median(s["concurrent"][isolation]["wall"] for s in sessions)
        worst = statistics.median(s["concurrent"][isolation]["max"] for s in sessions)
        who = "worker processes" if isolation == "process" else "inline, as 2fb46cc runs"
        rows.append(
            _row(f"5. {args.threads} sessions at once, {who}: wall ({runs})", wall, "ms", None, "{:.1f}")
        )
        rows.append(
            _row(f"5. {args.threads} sessions at once, {who}: slowest session", worst, "ms", None, "{:.1f}")
        )
    import_ms = statistics.median(t for t, _ in imports)
    rows.append(
        _row(
            f"6. import rlm_compat, fresh interpreter, median of {len(imports)}",
            import_ms,
            "ms",
            150,
            "{:.1f}",
        )
    )
    leaked = any(seen for _, seen in imports)
    rows.append(
        (
            "6. litellm imported by `import rlm_compat`",
            "yes" if leaked else "no",
            "no",
            "FAIL" if leaked else "PASS",
        )
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a fast smoke run (fewer samples)")
    parser.add_argument("--runs", type=int, help="fresh processes for rows 1, 2, 5 (default 5)")
    parser.add_argument("--sessions", type=int, help="further sessions per process (default 50)")
    parser.add_argument("--steps", type=int, help="trivial steps per executor (default 2000)")
    parser.add_argument("--big-steps", type=int, help="steps per big-context session (default 500)")
    parser.add_argument("--threads", type=int, help="concurrent sessions (default 64)")
    parser.add_argument("--big-mb", type=int, default=100, help="size of the big context")
    parser.add_argument("--import-runs", type=int, help="fresh interpreters for row 6 (default 10)")
    parser.add_argument("--lead-ms", type=float, default=200, help="model call before a first step")
    parser.add_argument("--child", choices=("sessions", "steps", "ahead"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    quick = args.quick
    defaults = {
        "runs": (2, 5),
        "sessions": (10, 50),
        "steps": (400, 2000),
        "big_steps": (100, 500),
        "threads": (64, 64),
        "import_runs": (3, 10),
    }
    for name, (fast, full) in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, fast if quick else full)
    if args.child == "sessions":
        print(json.dumps(child_sessions(args.sessions, args.threads)))
        return
    if args.child == "ahead":
        print(json.dumps(child_ahead(args.lead_ms)))
        return
    if args.child == "steps":
        print(json.dumps(child_steps(args.steps, args.big_mb, 1 if quick else 3, args.big_steps)))
        return

    load_before = os.getloadavg()
    common = ["--sessions", str(args.sessions), "--threads", str(args.threads)]
    sessions = [_run_child(["--child", "sessions", *common]) for _ in range(args.runs)]
    ahead = [_run_child(["--child", "ahead", "--lead-ms", str(args.lead_ms)]) for _ in range(args.runs)]
    steps = _run_child(
        [
            "--child",
            "steps",
            "--steps",
            str(args.steps),
            "--big-mb",
            str(args.big_mb),
            "--big-steps",
            str(args.big_steps),
            *(["--quick"] if quick else []),
        ]
    )
    imports = [_import_once() for _ in range(args.import_runs)]
    load_after = os.getloadavg()
    print(
        f"rlm_compat commit {_commit()}; CPython {platform.python_version()} on "
        f"{platform.machine()}, {os.cpu_count()} CPUs; load average (1/5/15 min) "
        f"{' '.join(f'{x:.2f}' for x in load_before)} before, "
        f"{' '.join(f'{x:.2f}' for x in load_after)} after{'; --quick' if quick else ''}"
    )
    print(_table(build_rows(sessions, steps, imports, ahead, args)))


if __name__ == "__main__":
    main()
