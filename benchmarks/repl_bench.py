"""Benchmark of rlm_compat's restricted REPL: one table, everything measured side by side in one run.

Rows:

* trivial-step latency (p50 / p90 of one ``execute`` call) of profile ``fixed``, profile ``upstream``
  and — with ``--upstream PATH`` or ``RLM_COMPAT_UPSTREAM`` set — ysz/recursive-llm's own
  ``REPLExecutor`` (its ``src/rlm/repl.py`` is imported by file path in a subprocess, so litellm is
  never imported). Two flavours: the same
  source every call (``x = 1``; our compile cache hits) and new source every call (``x = <n>``; every
  call compiles, as model-written steps do). Samples are taken in interleaved rounds.
* typical programs over a ~1.5 MB synthetic context (regex scan, split/filter lines, char loop,
  index loop, chunking comprehension, Counter of words, dict aggregation): the median time of
  profile ``fixed`` and of plain ``exec`` in one dict (compiling included in both), their ratio, and
  the geometric mean of the ratios. Runs alternate between the two so drift hits both equally.

Targets (issue 3): trivial step <= 1.5x upstream's executor; geometric-mean overhead <= 1.3x plain
exec. They are reported as PASS / MISS, never asserted. ``--cprofile NAME`` prints where profile
``fixed`` spends its time on one program (or ``trivial``) instead of the table.

    python benchmarks/repl_bench.py --upstream /path/to/recursive-llm   # a 2fb46cc checkout
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import math
import os
import platform
import pstats
import random
import re
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from rlm_compat.repl import REPLExecutor

CONTEXT_CHARS = 1_500_000
TRIVIAL_TARGET = 1.5
OVERHEAD_TARGET = 1.3

PROGRAMS: dict[str, str] = {
    "regex scan": (
        "hits = re.findall(r'ERROR (\\w+) [^\\n]*?code=(\\d+)', context)\n"
        "codes = Counter(code for _, code in hits)\n"
        "result = (len(hits), codes.most_common(3))"
    ),
    "split/filter lines": (
        "lines = context.split('\\n')\n"
        "errors = [ln for ln in lines if 'ERROR' in ln and 'timeout' in ln]\n"
        "result = (len(lines), len(errors), errors[:2])"
    ),
    "char loop": (
        "vowels = 0\nfor ch in context[:600000]:\n    if ch in 'aeiou':\n        vowels += 1\nresult = vowels"
    ),
    "index loop": (
        "total = 0\nfor i in range(0, len(context), 5):\n    total += ord(context[i])\nresult = total"
    ),
    "chunking comprehension": (
        "size = 2000\n"
        "chunks = [context[i:i + size] for i in range(0, len(context), size)]\n"
        "counts = [c.count('ERROR') for c in chunks]\n"
        "result = (len(chunks), sum(counts), max(counts))"
    ),
    "Counter of words": ("words = Counter(context.split())\nresult = words.most_common(10)"),
    "dict aggregation": (
        "agg = {}\n"
        "for line in context.split('\\n'):\n"
        "    parts = line.split(' ')\n"
        "    if len(parts) > 3:\n"
        "        key = parts[2] + '/' + parts[3][:4]\n"
        "        agg[key] = agg.get(key, 0) + len(line)\n"
        "result = sorted(agg.items())[:5]"
    ),
}

_WORDS = (
    "alpha",
    "beta",
    "gamma",
    "delta",
    "kappa",
    "sigma",
    "omega",
    "query",
    "cache",
    "index",
    "shard",
    "token",
    "model",
    "vector",
    "socket",
    "buffer",
    "thread",
    "worker",
    "lease",
)
_LEVELS = ("INFO", "INFO", "INFO", "DEBUG", "WARN", "ERROR")
_SERVICES = ("api", "auth", "billing", "search", "ingest", "export")


def make_context(chars: int = CONTEXT_CHARS, seed: int = 20240601) -> str:
    """Log-like synthetic text (deterministic): timestamps, levels, services, words, numbers."""
    rng = random.Random(seed)
    lines: list[str] = []
    size = 0
    start = datetime(2024, 6, 1)
    n = 0
    while size < chars:
        level = rng.choice(_LEVELS)
        words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 9)))
        extra = " timeout" if rng.random() < 0.2 else ""
        stamp = (start + timedelta(seconds=n * 7)).isoformat()
        line = f"{stamp} {level} {rng.choice(_SERVICES)} {words} code={rng.randint(100, 599)}{extra}"
        lines.append(line)
        size += len(line) + 1
        n += 1
    return "\n".join(lines)[:chars]


# ------------------------------------------------------------------------------ trivial steps


class _Runner:
    """Something that runs ``count`` trivial steps and returns each call's seconds."""

    label = ""

    def batch(self, count: int, fresh: bool) -> list[float]:
        raise NotImplementedError

    def close(self) -> None:
        pass


class _InProcess(_Runner):
    def __init__(self, label: str, profile: str) -> None:
        self.label = label
        self.executor = REPLExecutor(profile=profile)
        self.env: dict[str, Any] = {"context": "ctx", "query": "q"}
        self.counter = 0

    def batch(self, count: int, fresh: bool) -> list[float]:
        out: list[float] = []
        execute, env, clock = self.executor.execute, self.env, time.perf_counter
        for _ in range(count):
            self.counter += 1
            code = f"x = {self.counter}" if fresh else "x = 1"
            t0 = clock()
            execute(code, env)
            out.append(clock() - t0)
        return out


_WORKER = r"""
import importlib.util, json, sys, time
spec = importlib.util.spec_from_file_location("upstream_repl_2fb46cc", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
executor = mod.REPLExecutor()
env = {"context": "ctx", "query": "q"}
counter = 0
out = sys.stdout
for line in sys.stdin:
    count, fresh = line.split()
    times = []
    for _ in range(int(count)):
        counter += 1
        code = "x = %d" % counter if fresh == "1" else "x = 1"
        t0 = time.perf_counter()
        executor.execute(code, env)
        times.append(time.perf_counter() - t0)
    out.write(json.dumps(times) + "\n")
    out.flush()
"""


class _UpstreamWorker(_Runner):
    """ysz/recursive-llm's executor in a subprocess, driven line by line so rounds interleave."""

    def __init__(self, checkout: Path, python: str) -> None:
        self.label = "upstream 2fb46cc"
        repl = checkout / "src" / "rlm" / "repl.py"
        if not repl.is_file():
            raise SystemExit(f"--upstream: {repl} does not exist")
        self.proc = subprocess.Popen(
            [python, "-c", _WORKER, str(repl)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True"),
        )

    def batch(self, count: int, fresh: bool) -> list[float]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{count} {int(fresh)}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit("the upstream worker died (does its Python have RestrictedPython?)")
        times: list[float] = json.loads(line)
        return times

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure_trivial(runners: list[_Runner], rounds: int, batch: int, fresh: bool) -> dict[str, list[float]]:
    """Interleaved rounds: every runner does one batch per round, in rotating order."""
    samples: dict[str, list[float]] = {r.label: [] for r in runners}
    for r in runners:
        r.batch(min(batch, 200), fresh)  # warm-up
    for i in range(rounds):
        order = runners[i % len(runners) :] + runners[: i % len(runners)]
        for r in order:
            samples[r.label].extend(r.batch(batch, fresh))
    return samples


# ------------------------------------------------------------------------------ programs


@dataclass
class ProgramTiming:
    name: str
    fixed: float
    plain: float

    @property
    def ratio(self) -> float:
        return self.fixed / self.plain


def _plain_namespace(context: str) -> dict[str, Any]:
    import json as json_module
    import math as math_module

    return {
        "context": context,
        "query": "q",
        "re": re,
        "json": json_module,
        "math": math_module,
        "datetime": datetime,
        "timedelta": timedelta,
        "Counter": Counter,
        "defaultdict": defaultdict,
    }


def _time_plain(code: str, context: str, loops: int = 1) -> tuple[float, Any]:
    """Seconds per run of plain ``exec`` (compiling included) in one fresh dict, and its result."""
    spaces = [_plain_namespace(context) for _ in range(loops)]
    gc.collect()  # the previous run's garbage must not be collected on this run's clock
    t0 = time.perf_counter()
    for ns in spaces:
        exec(code, ns)
    return (time.perf_counter() - t0) / loops, spaces[-1]["result"]


def _time_fixed(executor: REPLExecutor, code: str, context: str, loops: int = 1) -> tuple[float, Any]:
    """Seconds per ``execute`` in a fresh env, and the program's result."""
    envs: list[dict[str, Any]] = [{"context": context, "query": "q"} for _ in range(loops)]
    gc.collect()
    t0 = time.perf_counter()
    for env in envs:
        executor.execute(code, env)
    return (time.perf_counter() - t0) / loops, envs[-1]["result"]


def measure_programs(context: str, repeat: int, min_run: float = 0.04) -> list[ProgramTiming]:
    """Median of ``repeat`` samples per program and mode.

    A sample repeats a short program until it lasts about ``min_run`` seconds, so a few ms of
    scheduling noise cannot dominate it; rounds go over all programs, alternating which mode
    runs first.
    """
    executor = REPLExecutor(timeout=120, profile="fixed")
    loops: dict[str, int] = {}
    for name, code in PROGRAMS.items():
        once, expected = _time_plain(code, context)
        _, got = _time_fixed(executor, code, context)
        if got != expected:
            raise SystemExit(f"{name}: profile fixed computed {got!r}, plain exec {expected!r}")
        loops[name] = max(1, math.ceil(min_run / max(once, 1e-6)))
    fixed: dict[str, list[float]] = {name: [] for name in PROGRAMS}
    plain: dict[str, list[float]] = {name: [] for name in PROGRAMS}
    for i in range(repeat):
        for j, (name, code) in enumerate(PROGRAMS.items()):
            n = loops[name]
            if (i + j) % 2:
                fixed[name].append(_time_fixed(executor, code, context, n)[0])
                plain[name].append(_time_plain(code, context, n)[0])
            else:
                plain[name].append(_time_plain(code, context, n)[0])
                fixed[name].append(_time_fixed(executor, code, context, n)[0])
    return [
        ProgramTiming(name, statistics.median(fixed[name]), statistics.median(plain[name]))
        for name in PROGRAMS
    ]


# ------------------------------------------------------------------------------ the table


def _verdict(value: float, target: float) -> str:
    return "PASS" if value <= target else "MISS"


def render(
    trivial: dict[bool, dict[str, list[float]]],
    programs: list[ProgramTiming],
    context_chars: int,
    upstream_label: str | None,
) -> str:
    heads = [
        "measurement",
        "profile fixed",
        "profile upstream",
        "upstream 2fb46cc",
        "plain exec",
        "ratio",
        "target",
        "result",
    ]
    rows: list[list[str]] = []
    for fresh, samples in trivial.items():
        what = "x = <n>, new source each call" if fresh else "x = 1, same source each call"
        for q, label in ((0.5, "p50"), (0.9, "p90")):
            cell = {k: _percentile(v, q) * 1e6 for k, v in samples.items()}
            row = [
                f"trivial step {label} µs ({what})",
                f"{cell['profile fixed']:.1f}",
                f"{cell['profile upstream']:.1f}",
                f"{cell[upstream_label]:.1f}" if upstream_label else "n/a",
                "",
                "",
                "",
                "",
            ]
            if upstream_label and label == "p50":
                ratio = cell["profile fixed"] / cell[upstream_label]
                row[5:] = [
                    f"{ratio:.2f}x fixed/2fb46cc",
                    f"<= {TRIVIAL_TARGET}x",
                    _verdict(ratio, TRIVIAL_TARGET),
                ]
            rows.append(row)
    for t in programs:
        rows.append(
            [
                f"{t.name} (ms)",
                f"{t.fixed * 1e3:.1f}",
                "",
                "",
                f"{t.plain * 1e3:.1f}",
                f"{t.ratio:.2f}x",
                "",
                "",
            ]
        )
    geo = math.exp(sum(math.log(t.ratio) for t in programs) / len(programs))
    rows.append(
        [
            f"geometric mean, {len(programs)} programs",
            "",
            "",
            "",
            "",
            f"{geo:.2f}x",
            f"<= {OVERHEAD_TARGET}x",
            _verdict(geo, OVERHEAD_TARGET),
        ]
    )
    widths = [max(len(r[i]) for r in [heads, *rows]) for i in range(len(heads))]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    out = [line(heads), sep, *(line(r) for r in rows)]
    return "\n".join(out)


def _environment(context_chars: int) -> str:
    import RestrictedPython

    version = getattr(RestrictedPython, "__version__", None)
    if version is None:
        from importlib.metadata import version as dist_version

        version = dist_version("RestrictedPython")
    return (
        f"CPython {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs, "
        f"RestrictedPython {version}, context {context_chars:,} chars"
    )


def _cprofile(name: str, context: str, repeat: int) -> None:
    executor = REPLExecutor(timeout=120, profile="fixed")
    env: dict[str, Any] = {"context": context}
    profiler = cProfile.Profile()
    profiler.enable()
    if name == "trivial":
        for i in range(3000):
            executor.execute(f"x = {i}", env)
    else:
        for _ in range(repeat):
            executor.execute(PROGRAMS[name], dict(env))
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--upstream",
        type=Path,
        default=Path(os.environ["RLM_COMPAT_UPSTREAM"]) if os.environ.get("RLM_COMPAT_UPSTREAM") else None,
        help="ysz/recursive-llm checkout at 2fb46cc (default: $RLM_COMPAT_UPSTREAM)",
    )
    parser.add_argument(
        "--upstream-python",
        default=sys.executable,
        help="Python with RestrictedPython for the upstream worker (default: this one)",
    )
    parser.add_argument("--rounds", type=int, default=20, help="interleaved rounds of trivial steps")
    parser.add_argument("--batch", type=int, default=100, help="trivial steps per runner per round")
    parser.add_argument("--repeat", type=int, default=9, help="runs per program (median taken)")
    parser.add_argument("--context-chars", type=int, default=CONTEXT_CHARS)
    parser.add_argument(
        "--cprofile", metavar="PROGRAM", help=f"profile 'trivial' or one of: {', '.join(PROGRAMS)}"
    )
    args = parser.parse_args(argv)

    context = make_context(args.context_chars)
    if args.cprofile:
        _cprofile(args.cprofile, context, args.repeat)
        return
    runners: list[_Runner] = [
        _InProcess("profile fixed", "fixed"),
        _InProcess("profile upstream", "upstream"),
    ]
    upstream_label = None
    if args.upstream:
        worker = _UpstreamWorker(args.upstream, args.upstream_python)
        runners.append(worker)
        upstream_label = worker.label
    try:
        trivial = {fresh: measure_trivial(runners, args.rounds, args.batch, fresh) for fresh in (True, False)}
    finally:
        for r in runners:
            r.close()
    programs = measure_programs(context, args.repeat)
    print(_environment(len(context)))
    print(
        f"trivial steps: {args.rounds} interleaved rounds x {args.batch} calls per executor; "
        f"programs: median of {args.repeat} alternating runs"
    )
    print(render(trivial, programs, len(context), upstream_label))


if __name__ == "__main__":
    main()
