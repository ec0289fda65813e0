"""Fan-out: 64 sub-queries from one REPL step at a given provider latency, one table in one run.

    python benchmarks/fanout_bench.py [--n 64] [--latency 0.05] [--repeat 3]
                                      [--upstream CHECKOUT] [--upstream-python PY]
                                      [--isolation process|inline]
                                      [--rlms-python PY] [--rlm050-python PY]

Every row runs a whole RLM through litellm to a loopback chat server
(:class:`rlm_compat.testing.ScriptedChatServer`, ``--latency`` seconds per answer, requests served
concurrently), after one warm-up run. The root's first reply is code that makes the ``--n``
sub-queries; its second reply ends the run. A row's time is measured at the server, the same way
for every implementation: from the arrival of the first sub-request to the arrival of the root's
next request (the step is over and the loop has moved on). The median of ``--repeat`` runs is shown.

Rows and targets (the run-record issue; PASS / FAIL printed, never asserted):

- ``llm_query_batched`` of n prompts: <= 0.5 s, and >= 10x faster than 2fb46cc's loop;
- n sequential ``llm_query`` calls: <= n x (latency + 10 ms);
- reference (no target): ``litellm.acompletion`` n times in a row in one event loop against the
  same kind of server, timed by the client — what litellm itself costs per sequential call;
- ``rlm_query_batched`` of n child RLMs (each its own REPL session, answering at once): <= 1.5 s;
- 2fb46cc's sequential ``recursive_llm`` loop (with ``--upstream``, default
  ``$RLM_COMPAT_UPSTREAM``; run by ``--upstream-python``, default ``$RLM_COMPAT_UPSTREAM_PYTHON`` or
  this interpreter), each a child RLM answering at once;
- ``llm_query_batched`` of n prompts on the lean path (``client=OpenAICompatibleClient()``, one
  aiohttp POST per call, issue 26), run in its own process as the peers are: <= 0.3 s and ahead of
  both peers below (and, for reference, the same in this process, sharing its interpreter lock with
  the loopback server's threads);
- the peers' own batched sub-call functions, each run by the Python of its own venv
  (``--rlms-python``: a venv with ``pip install rlms``, its ``llm_query_batched`` at 16 in flight;
  ``--rlm050-python``: one with ``pip install recursive-llm==0.5.0``, its ``llm_query_batched`` at
  its default 4 in flight, as it deadlocks at 5 or more on 2 cores). Their root replies are in
  each one's own protocol (rlms: ```` ```repl ```` blocks and the ``answer`` dict; 0.5.0: plain
  code and a standalone ``FINAL``); the segment is timed the same way.
"""

from __future__ import annotations

import argparse
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
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from rlm_compat.testing import ScriptedChatServer  # noqa: E402

MODEL = "openai/gpt-4o-mini"
ROOT_QUERY = "FANOUT-ROOT"

UPSTREAM_DRIVER = """
import sys
sys.path.insert(0, sys.argv[1] + "/src")
from rlm import RLM
rlm = RLM(sys.argv[3], api_base=sys.argv[2], api_key="sk-loopback")
print(rlm.completion(sys.argv[4], "some context"))
"""


class Clock:
    """Server-side timing: arrivals of sub-requests and of the root's requests."""

    def __init__(self, code: str) -> None:
        self.code = code
        self.lock = threading.Lock()
        self.first_sub: float | None = None
        self.root_arrivals: list[float] = []

    def __call__(self, request: dict[str, Any]) -> str:
        now = time.perf_counter()
        messages = request.get("messages", [])
        is_root = len(messages) >= 2 and messages[1].get("content") == ROOT_QUERY
        with self.lock:
            if is_root:
                self.root_arrivals.append(now)
                return self.code if len(messages) == 2 else 'FINAL("done")'
            if self.first_sub is None:
                self.first_sub = now
        if messages and messages[0].get("role") == "system":
            return 'FINAL("child answer")'  # a child RLM: answer at once
        return "leaf answer"

    def span(self) -> float:
        if self.first_sub is None or len(self.root_arrivals) < 2:
            raise RuntimeError("the run did not make its sub-requests and come back; see its output")
        return self.root_arrivals[1] - self.first_sub


PEER_DRIVERS = {
    "rlms": """
import sys
from rlm import RLM
rlm = RLM(backend="openai", backend_kwargs={"model_name": "gpt-4o-mini", "base_url": sys.argv[1],
          "api_key": "sk-loopback"}, max_concurrent_subcalls=16, max_iterations=5)
print(rlm.completion("some context", root_prompt=sys.argv[2]).response)
""",
    "recursive-llm 0.5.0": """
import sys
from rlm import RLM
rlm = RLM("openai/gpt-4o-mini", api_base=sys.argv[1], api_key="sk-loopback", max_depth=1, max_iterations=5)
print(rlm.complete(sys.argv[2], "some context"))
""",
}
PEER_REPLIES = {
    "rlms": (
        '```repl\nout = llm_query_batched(["sub question"] * {n})\nprint(len(out))\n```',
        '```repl\nanswer["content"] = "done"\nanswer["ready"] = True\n```',
    ),
    "recursive-llm 0.5.0": (
        'out = llm_query_batched(["sub question"] * {n})\nprint(len(out))',
        'FINAL("done")',
    ),
}


LEAN_DRIVER = """
import sys
sys.path.insert(0, sys.argv[4])
from rlm_compat import RLM
from rlm_compat.openai_client import OpenAICompatibleClient
rlm = RLM(sys.argv[3], api_base=sys.argv[1], api_key="sk-loopback", isolation=sys.argv[5], max_depth=3,
          client=OpenAICompatibleClient())
print(rlm.complete(sys.argv[2], "some context"))
"""


def run_lean(latency: float, code: str, isolation: str) -> float:
    """The lean path in its own process, as the peers run: the loopback server's threads then do
    not share this process's interpreter lock with the RLM's loop."""
    clock = Clock(code)
    with ScriptedChatServer(clock, latency=latency) as server:
        env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True")
        done = subprocess.run(
            [sys.executable, "-c", LEAN_DRIVER, server.base_url, ROOT_QUERY, MODEL, str(ROOT), isolation],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
    if done.returncode != 0 or "done" not in done.stdout:
        raise RuntimeError(f"lean run failed: {done.stdout[-500:]} {done.stderr[-2000:]}")
    return clock.span()


class PeerClock:
    """Server-side timing for a peer: a request whose last message is "sub question" is a sub-call,
    any other is the root's (first: the fan-out code; later: the final answer)."""

    def __init__(self, first: str, final: str) -> None:
        self.first, self.final = first, final
        self.lock = threading.Lock()
        self.first_sub: float | None = None
        self.root_after: float | None = None
        self.roots = 0

    def __call__(self, request: dict[str, Any]) -> str:
        now = time.perf_counter()
        messages = request.get("messages", [])
        last = str(messages[-1].get("content", "")) if messages else ""
        with self.lock:
            if last.strip() == "sub question" or last.endswith("sub question"):
                if self.first_sub is None:
                    self.first_sub = now
                return "leaf answer"
            self.roots += 1
            if self.first_sub is not None and self.root_after is None:
                self.root_after = now
            return self.first if self.roots == 1 else self.final

    def span(self) -> float:
        if self.first_sub is None or self.root_after is None:
            raise RuntimeError("the peer did not make its sub-requests and come back; see its output")
        return self.root_after - self.first_sub


def run_peer(name: str, python: str, latency: float, n: int) -> float:
    first, final = (text.replace("{n}", str(n)) for text in PEER_REPLIES[name])
    clock = PeerClock(first, final)
    with ScriptedChatServer(clock, latency=latency) as server:
        env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", OPENAI_API_KEY="sk-loopback")
        env.pop("PYTHONPATH", None)
        done = subprocess.run(
            [python, "-c", PEER_DRIVERS[name], server.base_url, ROOT_QUERY],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
            cwd="/",
        )
    if done.returncode != 0 or "done" not in done.stdout:
        raise RuntimeError(f"{name} run failed: {done.stdout[-500:]} {done.stderr[-2000:]}")
    return clock.span()


class Provider:
    """A fresh loopback server per run: every ``complete()`` has its own event loop, hence its own
    connection pool, so connections left over from an earlier run would only sit idle."""

    def __init__(self, latency: float) -> None:
        self.latency = latency

    def run_ours(self, code: str, isolation: str, lean: bool = False) -> float:
        from rlm_compat import RLM
        from rlm_compat.openai_client import OpenAICompatibleClient

        clock = Clock(code)
        with ScriptedChatServer(clock, latency=self.latency) as server:
            rlm = RLM(
                MODEL,
                api_base=server.base_url,
                api_key="sk-loopback",
                isolation=isolation,
                max_depth=3,
                client=OpenAICompatibleClient() if lean else None,
            )
            answer = rlm.complete(ROOT_QUERY, "some context")
        if answer != "done":
            raise RuntimeError(f"unexpected answer {answer!r}")
        step = next(e for e in rlm.trajectory if e.kind == "repl_step")
        if step.data["error"]:
            raise RuntimeError(f"the fan-out step failed: {step.data['output']}")
        return clock.span()

    def run_upstream(self, checkout: Path, python: str, code: str) -> float:
        clock = Clock(code)
        with ScriptedChatServer(clock, latency=self.latency) as server:
            return self._upstream(server, clock, checkout, python, code)

    @staticmethod
    def _upstream(server: ScriptedChatServer, clock: Clock, checkout: Path, python: str, code: str) -> float:
        env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True")
        env.pop("PYTHONPATH", None)
        done = subprocess.run(
            [python, "-c", UPSTREAM_DRIVER, str(checkout), server.base_url, MODEL, ROOT_QUERY],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
        if done.returncode != 0 or "done" not in done.stdout:
            raise RuntimeError(f"upstream run failed: {done.stdout[-500:]} {done.stderr[-2000:]}")
        return clock.span()


def run_litellm_alone(latency: float, n: int) -> float:
    """Reference: ``litellm.acompletion`` n times in a row in one event loop, timed by the client."""
    import asyncio

    import litellm

    with ScriptedChatServer(lambda request: "leaf answer", latency=latency) as server:

        async def calls() -> float:
            messages = [{"role": "user", "content": "sub question"}]
            await litellm.acompletion(model=MODEL, messages=messages, api_base=server.base_url, api_key="sk")
            started = time.perf_counter()
            for _ in range(n):
                await litellm.acompletion(
                    model=MODEL, messages=messages, api_base=server.base_url, api_key="sk"
                )
            return time.perf_counter() - started

        return asyncio.run(calls())


def profile_split(provider: Provider, code: str, isolation: str, calls: int) -> None:
    """Own CPU time by package for one run, in the thread running the event loop (cProfile)."""
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    provider.run_ours(code, isolation)
    profiler.disable()
    groups = {
        "rlm_compat": "/rlm_compat/",
        "litellm": "/litellm/",
        "openai SDK": "/openai/",
        "aiohttp/httpx": "http",
        "pydantic": "pydantic",
        "asyncio": "/asyncio/",
    }
    totals: dict[str, float] = dict.fromkeys([*groups, "other (incl. waiting in epoll)"], 0.0)
    for (filename, _, _), row in pstats.Stats(profiler).stats.items():  # type: ignore[attr-defined]
        group = next((g for g, part in groups.items() if part in filename), "other (incl. waiting in epoll)")
        totals[group] += row[2]
    print()
    print(f"own time per sub-call by package, one profiled run of {calls} (cProfile inflates every figure):")
    print()
    print("| package | ms per sub-call |")
    print("|---|---:|")
    for group, seconds in totals.items():
        print(f"| {group} | {seconds / calls * 1000:.2f} |")


def median_of(repeat: int, run: Callable[[], float]) -> tuple[float, list[float]]:
    samples = [run() for _ in range(repeat)]
    return statistics.median(samples), samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--isolation", choices=("process", "inline"), default="process")
    parser.add_argument("--profile", action="store_true", help="also print where the CPU of a batch goes")
    parser.add_argument("--upstream", default=os.environ.get("RLM_COMPAT_UPSTREAM"))
    parser.add_argument(
        "--upstream-python", default=os.environ.get("RLM_COMPAT_UPSTREAM_PYTHON", sys.executable)
    )
    parser.add_argument("--rlms-python", default=os.environ.get("RLM_COMPAT_RLMS_PYTHON"))
    parser.add_argument("--rlm050-python", default=os.environ.get("RLM_COMPAT_RLM050_PYTHON"))
    args = parser.parse_args()
    n, latency = args.n, args.latency

    batched = f'out = llm_query_batched(["sub question"] * {n})\nprint(len(out))'
    sequential = f'for i in range({n}):\n    llm_query("sub question")\nprint("ok")'
    children = f'out = rlm_query_batched(["sub question"] * {n}, ["part"] * {n})\nprint(len(out))'
    recursive = f'for i in range({n}):\n    recursive_llm("sub question", "part")\nprint("ok")'

    provider = Provider(latency)
    # warm litellm (imports, price map, first-use paths) outside the timed rows
    provider.run_ours(f'llm_query_batched(["warm"] * {n})\nprint(1)', args.isolation)

    rows: list[tuple[str, float, list[float], str]] = []
    t_batched, s = median_of(args.repeat, lambda: provider.run_ours(batched, args.isolation))
    rows.append((f"rlm_compat llm_query_batched x{n}", t_batched, s, "<= 0.5 s"))
    provider.run_ours(f'llm_query_batched(["warm"] * {n})\nprint(1)', args.isolation, lean=True)
    t_here, s = median_of(args.repeat, lambda: provider.run_ours(batched, args.isolation, lean=True))
    rows.append((f"rlm_compat llm_query_batched x{n}, lean path, in this process", t_here, s, "(reference)"))
    run_lean(latency, batched, args.isolation)  # warm-up (the OS's caches; each run is a fresh process)
    t_lean, s = median_of(args.repeat, lambda: run_lean(latency, batched, args.isolation))
    rows.append(
        (f"rlm_compat llm_query_batched x{n}, lean path (OpenAICompatibleClient)", t_lean, s, "<= 0.3 s")
    )
    peers: dict[str, float] = {}
    for name, python in (("rlms", args.rlms_python), ("recursive-llm 0.5.0", args.rlm050_python)):
        if python:
            run_peer(name, python, latency, n)  # warm-up: its imports, its first-use paths
            peers[name], s = median_of(args.repeat, lambda: run_peer(name, python, latency, n))  # noqa: B023
            inflight = 16 if name == "rlms" else 4
            rows.append((f"{name} llm_query_batched x{n} ({inflight} in flight)", peers[name], s, "(peer)"))
    t_seq, s = median_of(args.repeat, lambda: provider.run_ours(sequential, args.isolation))
    seq_limit = n * (latency + 0.010)
    rows.append((f"rlm_compat sequential llm_query x{n}", t_seq, s, f"<= {seq_limit:.2f} s"))
    t_alone, s = median_of(args.repeat, lambda: run_litellm_alone(latency, n))
    rows.append((f"reference: litellm.acompletion alone, sequential x{n}", t_alone, s, "(reference)"))
    t_children, s = median_of(args.repeat, lambda: provider.run_ours(children, args.isolation))
    rows.append((f"rlm_compat rlm_query_batched x{n} children", t_children, s, "<= 1.5 s"))
    t_up: float | None = None
    if args.upstream:
        t_up, s = median_of(
            args.repeat, lambda: provider.run_upstream(Path(args.upstream), args.upstream_python, recursive)
        )
        rows.append((f"2fb46cc sequential recursive_llm x{n}", t_up, s, "(baseline)"))

    verdicts = {
        f"rlm_compat llm_query_batched x{n}": t_batched <= 0.5 and (t_up is None or t_up / t_batched >= 10),
        f"rlm_compat sequential llm_query x{n}": t_seq <= seq_limit,
        f"rlm_compat rlm_query_batched x{n} children": t_children <= 1.5,
        f"rlm_compat llm_query_batched x{n}, lean path (OpenAICompatibleClient)": t_lean <= 0.3
        and all(t_lean < peer for peer in peers.values()),
    }
    print(
        f"fan-out of {n} sub-queries at {latency * 1000:.0f} ms provider latency; "
        f"isolation={args.isolation}; "
        f"median of {args.repeat}; python {platform.python_version()}; {os.cpu_count()} CPUs; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print()
    print("| row | median (s) | samples (s) | per sub-query (ms) | target | result |")
    print("|---|---:|---|---:|---|---|")
    for name, median, samples, target in rows:
        verdict = "" if name not in verdicts else ("PASS" if verdicts[name] else "FAIL")
        listed = ", ".join(f"{x:.3f}" for x in samples)
        print(f"| {name} | {median:.3f} | {listed} | {median / n * 1000:.1f} | {target} | {verdict} |")
    if t_up is not None:
        print()
        print(f"2fb46cc recursive_llm loop / llm_query_batched: {t_up / t_batched:.1f}x (target >= 10x)")
    if args.profile:
        profile_split(Provider(0.0), batched, args.isolation, n)
    print(json.dumps({"rows": [(r[0], r[1]) for r in rows]}), file=sys.stderr)


if __name__ == "__main__":
    main()
