"""How soon after its deadline runaway code stops: the speed claim the timeout tests used to assert.

    python benchmarks/timeout_bench.py [--timeout 0.4] [--repeat 5]

tests/sandbox/restrict/test_sandbox_timeout.py and tests/sandbox/test_sandbox_escapes.py only check
that runaway code *is* stopped (their bounds carry tens of seconds of slack for a loaded CI
machine). This table measures the overshoot (elapsed time minus the timeout) of each spinner in
both profiles and, for profile ``fixed``, both isolations; target: median overshoot <= 0.5 s,
reported as PASS / MISS.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time

from rlm_compat.errors import REPLError, REPLTimeoutError
from rlm_compat.repl import REPLExecutor

TARGET = 0.5

SPINNERS = {
    "while True": "while True:\n    pass",
    "catch BaseException and retry": (
        "while True:\n    try:\n        while True:\n            pass\n"
        "    except BaseException:\n        pass"
    ),
    "finally: continue": (
        "def spin():\n    while True:\n        try:\n            while True:\n"
        "                pass\n        finally:\n            continue\nspin()"
    ),
    "recursion retry": (
        "def f():\n    try:\n        return f()\n    except BaseException:\n"
        "        return f()\nwhile True:\n    f()"
    ),
    "catastrophic regex": "import re\nre.match('(a+)+$', 'a' * 40 + 'b')",
}
# One long C call cannot be interrupted inline (docs/repl.md): only a worker process is killable.
PROCESS_ONLY = {"catastrophic regex"}


def overshoots(profile: str, isolation: str, code: str, timeout: float, repeat: int) -> list[float] | str:
    """Seconds past the deadline for each run, or why the runs could not be timed."""
    samples = []
    with REPLExecutor(timeout=timeout, profile=profile, isolation=isolation) as executor:
        for _ in range(repeat):
            env: dict[str, object] = {}
            start = time.perf_counter()
            try:
                executor.execute(code, env)
            except REPLTimeoutError:
                samples.append(time.perf_counter() - start - timeout)
            except REPLError as exc:
                return f"not a timeout: {str(exc)[:60]}"
            else:
                return "returned"
    return samples


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timeout", type=float, default=0.4)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    print(
        f"CPython {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs, "
        f"load {os.getloadavg()[0]:.1f}; timeout {args.timeout} s, {args.repeat} runs per cell"
    )
    rows = [("fixed", "process"), ("fixed", "inline"), ("upstream", "inline")]
    print("| spinner | profile / isolation | median overshoot s | max overshoot s | target | result |")
    print("|---|---|---|---|---|---|")
    for name, code in SPINNERS.items():
        for profile, isolation in rows:
            if name in PROCESS_ONLY and isolation != "process":
                continue
            got = overshoots(profile, isolation, code, args.timeout, args.repeat)
            where = f"{profile} / {isolation}"
            if isinstance(got, str):
                print(f"| {name} | {where} | {got} | | | n/a |")
                continue
            median = statistics.median(got)
            verdict = "PASS" if median <= TARGET else "MISS"
            print(f"| {name} | {where} | {median:.3f} | {max(got):.3f} | <= {TARGET} | {verdict} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
