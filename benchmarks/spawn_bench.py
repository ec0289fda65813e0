"""How fast REPL workers start: the fork server against a fresh interpreter per worker.

    python benchmarks/spawn_bench.py [--runs 5] [--further 50] [--threads 64]

Every scenario runs in a fresh Python process (so "first worker" really is the process's first),
``--runs`` times; the table shows the median run. A worker counts as started when it answered a
ping on its channel (entry ``rlm_compat.sandbox.isolate.spawn:echo_serve``). Targets (forkserver): the
first worker <= 100 ms, also when ``__main__`` imported litellm first; each further worker
<= 10 ms; 64 workers started at once from 64 threads. Reported as PASS / MISS, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ENTRY = "rlm_compat.sandbox.isolate.spawn:echo_serve"


def _measure(method: str, with_litellm: bool, further: int, threads: int) -> dict[str, float]:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    sys.path.insert(0, str(ROOT))  # this checkout, not an installed copy
    if with_litellm:
        import litellm  # noqa: F401  (the point: a heavy __main__ must not slow the first worker)
    from rlm_compat.config import Limits
    from rlm_compat.sandbox.isolate import spawn

    limits = Limits()

    def one() -> tuple[float, spawn.WorkerHandle]:
        started = time.perf_counter()
        handle = spawn.start_worker(limits, method, ENTRY)
        spawn.send_message(handle.sock, {"op": "ping", "n": 1})
        assert spawn.recv_message(handle.sock) == {"pong": 1}
        return (time.perf_counter() - started) * 1000, handle

    first, handle = one()
    handle.close()
    samples = []
    for _ in range(further):
        elapsed, handle = one()
        samples.append(elapsed)
        handle.close()
    results: list[float] = []
    handles: list[spawn.WorkerHandle] = []
    lock = threading.Lock()
    barrier = threading.Barrier(threads)

    def worker() -> None:
        barrier.wait()
        elapsed, handle = one()
        with lock:
            results.append(elapsed)
            handles.append(handle)

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    started = time.perf_counter()
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    wall = (time.perf_counter() - started) * 1000
    for handle in handles:
        handle.close()
    spawn.shutdown()
    return {
        "first": first,
        "further_p50": statistics.median(samples) if samples else float("nan"),
        "further_max": max(samples) if samples else float("nan"),
        "concurrent_ok": float(len(results)),
        "concurrent_wall": wall,
        "concurrent_max": max(results),
    }


def _run(method: str, with_litellm: bool, further: int, threads: int) -> dict[str, float]:
    command = [
        sys.executable,
        __file__,
        "--child",
        method,
        "--further",
        str(further),
        "--threads",
        str(threads),
    ]
    if with_litellm:
        command.append("--litellm")
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True")
    out = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{' '.join(command[2:])} failed:\n{out.stderr}")
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--further", type=int, default=50)
    parser.add_argument("--threads", type=int, default=64)
    parser.add_argument("--child", choices=("forkserver", "spawn"))
    parser.add_argument("--litellm", action="store_true")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_measure(args.child, args.litellm, args.further, args.threads)))
        return
    scenarios = [("forkserver", False), ("forkserver", True), ("spawn", False), ("spawn", True)]
    header = (
        f"{'method':<11} {'__main__':<9} {'first ms':>9} {'next p50':>9} {'next max':>9} "
        f"{f'{args.threads} thr wall':>12} {'thr max':>9}  targets"
    )
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, median of {args.runs} runs")
    print(header)
    print("-" * len(header))
    for method, with_litellm in scenarios:
        further = args.further if method == "forkserver" else min(args.further, 10)
        runs = [_run(method, with_litellm, further, args.threads) for _ in range(args.runs)]

        def med(key: str, runs: list[dict[str, Any]] = runs) -> float:
            return float(statistics.median(r[key] for r in runs))

        verdict = ""
        if method == "forkserver":
            checks = [
                ("first<=100", med("first") <= 100),
                ("next<=10", med("further_p50") <= 10),
                (f"{args.threads} ok", all(r["concurrent_ok"] == args.threads for r in runs)),
            ]
            verdict = " ".join(f"{name}:{'PASS' if ok else 'MISS'}" for name, ok in checks)
        print(
            f"{method:<11} {'litellm' if with_litellm else 'bare':<9} {med('first'):>9.1f} "
            f"{med('further_p50'):>9.2f} {med('further_max'):>9.2f} {med('concurrent_wall'):>12.1f} "
            f"{med('concurrent_max'):>9.1f}  {verdict}"
        )


if __name__ == "__main__":
    main()
