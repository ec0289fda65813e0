"""Soak: 1,000 requests through `rlm-compat serve` with real clients, then what the server holds.

    python benchmarks/serve_soak.py [--requests 1000] [--clients 32] [--latency 0.05]
                                    [--max-concurrent 16] [--isolation process]

A loopback provider (rlm_compat.testing.ScriptedChatServer, ``--latency`` s per answer) answers every
root call with code that reads a token out of the request's own context; the server (a real
``rlm-compat serve`` process) runs one RLM per request. ``--clients`` requests are in flight at
once from one ``openai.AsyncOpenAI`` client; every fourth request streams. Every answer is checked
against its own context (cross-talk would show as a wrong token). After the soak: the server's
worker processes, descriptors and resident memory against the figures after a warm-up.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import openai  # noqa: E402

from rlm_compat.testing import ScriptedChatServer  # noqa: E402

MODEL = "rlm:openai/gpt-4o-mini"
CODE = 'import re\nm = re.search(r"TOKEN-\\w+", context)\nFINAL(query + "|" + m.group(0))'


def _proc(pid: int) -> dict[str, float]:
    def under(root: int) -> int:
        parents: dict[int, int] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as f:
                        fields = f.read().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                if fields[0] != "Z":
                    parents[int(entry)] = int(fields[1])
        found, todo = 0, [root]
        while todo:
            current = todo.pop()
            for child, parent in parents.items():
                if parent == current:
                    found += 1
                    todo.append(child)
        return found

    with open(f"/proc/{pid}/status") as f:
        rss = next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS:"))
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    return {"rss_mb": rss, "fds": fds, "processes": under(pid)}


async def soak(base_url: str, requests: int, clients: int, tag: str) -> tuple[list[float], int, int]:
    latencies: list[float] = []
    wrong = failed = 0
    limit = asyncio.Semaphore(clients)
    async with openai.AsyncOpenAI(base_url=base_url, api_key="soak", max_retries=0, timeout=120) as client:

        async def one(i: int) -> None:
            nonlocal wrong, failed
            context = f"{i:05d} " * 2000 + f"TOKEN-{tag}{i} " + "tail " * 500
            query = f"q{tag}{i}"
            async with limit:
                started = time.perf_counter()
                try:
                    if i % 4 == 3:
                        stream = await client.chat.completions.create(
                            model=MODEL,
                            messages=[{"role": "user", "content": query}],
                            extra_body={"rlm": {"context": context}},
                            stream=True,
                        )
                        text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
                    else:
                        reply = await client.chat.completions.create(
                            model=MODEL,
                            messages=[{"role": "user", "content": query}],
                            extra_body={"rlm": {"context": context}},
                        )
                        text = str(reply.choices[0].message.content)
                except openai.APIError as exc:
                    failed += 1
                    print(f"request {i}: {type(exc).__name__}: {exc}", file=sys.stderr)
                    return
                latencies.append(time.perf_counter() - started)
                if text != f"{query}|TOKEN-{tag}{i}":
                    wrong += 1

        await asyncio.gather(*(one(i) for i in range(requests)))
    return latencies, wrong, failed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--max-concurrent", type=int, default=16)
    parser.add_argument("--isolation", choices=("process", "inline"), default="process")
    args = parser.parse_args()
    load_before = os.getloadavg()
    with (
        ScriptedChatServer(lambda request: CODE, latency=args.latency) as provider,
        tempfile.TemporaryDirectory() as tmp,
    ):
        env = dict(os.environ, OPENAI_API_KEY="sk-loopback", TMPDIR=tmp)
        argv = [sys.executable, "-m", "rlm_compat", "serve", "--port", "0", "--model", "openai/gpt-4o-mini"]
        argv += ["--api-base", provider.base_url, "--isolation", args.isolation]
        argv += ["--max-concurrent", str(args.max_concurrent), "--max-queue", str(args.requests)]
        log = Path(tmp) / "server.log"
        with open(log, "w") as sink:
            server = subprocess.Popen(argv, stderr=sink, env=env, cwd=ROOT)
        try:
            deadline = time.monotonic() + 120
            while not (found := re.search(r"listening on (http://\S+)", log.read_text())):
                if server.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"server did not start: {log.read_text()[-2000:]}")
                time.sleep(0.05)
            base_url = found.group(1)
            asyncio.run(soak(base_url, 64, args.clients, "warm"))
            time.sleep(1)
            before = _proc(server.pid)
            started = time.perf_counter()
            latencies, wrong, failed = asyncio.run(soak(base_url, args.requests, args.clients, "soak"))
            wall = time.perf_counter() - started
            time.sleep(2)
            after = _proc(server.pid)
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30)
    cuts = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [0.0] * 99
    rows: list[tuple[str, Any]] = [
        ("requests (every 4th streamed)", args.requests),
        ("answered correctly", len(latencies) - wrong),
        ("wrong answers (cross-talk)", wrong),
        ("failed requests", failed),
        ("wall time (s)", f"{wall:.1f}"),
        ("throughput (requests/s)", f"{args.requests / wall:.1f}"),
        ("latency p50 / p95 / p99 (s)", f"{cuts[49]:.3f} / {cuts[94]:.3f} / {cuts[98]:.3f}"),
        (
            "server processes under it, after warm-up / after soak",
            f"{before['processes']:.0f} / {after['processes']:.0f}",
        ),
        ("server descriptors, after warm-up / after soak", f"{before['fds']:.0f} / {after['fds']:.0f}"),
        ("server RSS MB, after warm-up / after soak", f"{before['rss_mb']:.1f} / {after['rss_mb']:.1f}"),
    ]
    print(
        f"`rlm-compat serve` soak: {args.requests} requests, {args.clients} clients in flight, server "
        f"--max-concurrent {args.max_concurrent}, isolation={args.isolation}, provider latency "
        f"{args.latency * 1000:.0f} ms; python {platform.python_version()}, {os.cpu_count()} CPUs, load "
        f"average {load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after"
    )
    print()
    print("| measurement | value |")
    print("|---|---:|")
    for name, value in rows:
        print(f"| {name} | {value} |")


if __name__ == "__main__":
    main()
