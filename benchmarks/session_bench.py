"""What the second call of a persistent session costs when the first brought a big context.

    python benchmarks/session_bench.py [--mb 100] [--rounds 3]

Rows, all in one run (scripted model, no network, the default hardened worker): the first step of
a fresh RLM over ``--mb`` MB (the context crosses to the worker), the first step of call 2 of a
persistent RLM whose call 1 brought that context (call 2 brings 1 KB; the big one stays in the
worker as ``context_0``), and the first step of a fresh RLM over 1 KB (the floor). Each: the
step's own duration from the run record, the median of ``--rounds``. Target (issue 33): call 2's
first step at most 50 ms, what a call over 1 KB costs, whatever call 1 brought. PASS / MISS is
printed, never asserted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rlm_compat import RLM
from rlm_compat.clients import ScriptedClient
from rlm_compat.events import ReplStep
from rlm_compat.record import RunResult

TARGET_SECONDS = 0.050
STEP = "```python\nprint(len(context))\n```"


def _first_step(result: RunResult) -> float:
    return next(e.duration_seconds for e in result.trajectory if isinstance(e, ReplStep))


def fresh(context: str) -> float:
    rlm = RLM("bench", client=ScriptedClient([STEP, 'FINAL("x")']))
    return _first_step(rlm.complete_result("q", context))


def second_call(big: str) -> float:
    client = ScriptedClient([STEP, 'FINAL("1")', STEP, 'FINAL("2")'])
    with RLM("bench", client=client, persistent=True) as rlm:
        rlm.complete_result("q1", big)
        return _first_step(rlm.complete_result("q2", "k" * 1024))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    big = "x" * (args.mb * 1_000_000)
    rows = [
        (f"fresh RLM, {args.mb} MB context: first step", lambda: fresh(big)),
        (f"persistent, call 2 after {args.mb} MB in call 1: first step", lambda: second_call(big)),
        ("fresh RLM, 1 KB context: first step", lambda: fresh("k" * 1024)),
    ]
    print(f"Python {sys.version.split()[0]}; median of {args.rounds} rounds")
    print("| step | ms | target | result |")
    print("|---|---|---|---|")
    for label, measure in rows:
        seconds = statistics.median(measure() for _ in range(args.rounds))
        target = result = ""
        if label.startswith("persistent"):
            target = f"<= {TARGET_SECONDS * 1000:g} ms"
            result = "PASS" if seconds <= TARGET_SECONDS else "MISS"
        print(f"| {label} | {seconds * 1000:.1f} | {target} | {result} |")


if __name__ == "__main__":
    main()
