"""What a custom tool call costs: the round trip from model code to a host function and back.

    python benchmarks/tools_bench.py [--rounds 5] [--calls 64]

One step of a real RLM run (scripted model, no network) calls a trivial tool ``--calls`` times and
times each call from inside the step (``time.perf_counter`` around the call, the sandbox's own
clock), ``--rounds`` runs per configuration, all in one process so the rows are side by side:
the worker (``isolation="process"``, the default: one channel round trip, the arguments decoded and
checked in the host, the result sent back) and inline (the same checks, no channel); for each, a
tool whose argument is 64 KiB of text. Beside them, the same step calling ``len`` (no host at all),
the floor of the measurement itself. Target (issue 33): the worker's median round trip under 1 ms.
PASS / MISS is printed, never asserted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rlm_compat import RLM
from rlm_compat.clients import ScriptedClient

TARGET_MS = 1.0


def _step(calls: int, call: str) -> str:
    return (
        "```python\nimport time\nbig = 'x' * 65536\ntimes = []\n"
        f"for i in range({calls}):\n    t = time.perf_counter()\n    {call}\n"
        "    times.append(time.perf_counter() - t)\nprint(','.join(repr(t) for t in times))\n```"
    )


def _ping(value: Any) -> int:
    return 1


def measure(isolation: str, call: str, calls: int, rounds: int) -> list[float]:
    """Per-call seconds over ``rounds`` runs of one step of ``calls`` calls."""
    samples: list[float] = []
    for _ in range(rounds):
        client = ScriptedClient([_step(calls, call), 'FINAL("x")'])
        rlm = RLM("bench", client=client, isolation=isolation, custom_tools={"ping": _ping})
        rlm.complete("q", "ctx")
        output = client.calls[1].messages[-1]["content"]
        samples.extend(float(t) for t in output.strip().split(","))
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=64)
    args = parser.parse_args()
    rows = [
        ("worker: ping(i)", "process", "ping(i)"),
        ("worker: ping(64 KiB str)", "process", "ping(big)"),
        ("inline: ping(i)", "inline", "ping(i)"),
        ("inline: ping(64 KiB str)", "inline", "ping(big)"),
        ("worker: len(big) (no host call)", "process", "len(big)"),
    ]
    print(f"Python {sys.version.split()[0]}; {args.rounds} runs x {args.calls} calls per row")
    print("| call | p50 ms | p90 ms | target | result |")
    print("|---|---|---|---|---|")
    for label, isolation, call in rows:
        samples = sorted(measure(isolation, call, args.calls, args.rounds))
        p50 = statistics.median(samples) * 1000
        p90 = samples[int(len(samples) * 0.9)] * 1000
        target, result = "", ""
        if label == "worker: ping(i)":
            target, result = f"< {TARGET_MS:g} ms", "PASS" if p50 < TARGET_MS else "MISS"
        print(f"| {label} | {p50:.3f} | {p90:.3f} | {target} | {result} |")


if __name__ == "__main__":
    main()
