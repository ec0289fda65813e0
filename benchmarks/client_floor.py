"""The floor under a fan-out: the same 64 chat calls, 16 in flight, through each client, one table.

    python benchmarks/client_floor.py [--n 64] [--in-flight 16] [--latency 0.05] [--repeat 5]

Against one loopback provider (rlm_compat.testing.ScriptedChatServer, ``--latency`` s per answer),
in one event loop, after a warm-up batch per client: ``litellm.acompletion`` (rlm_compat's default
path), the ``openai`` package's ``AsyncOpenAI`` (what litellm calls underneath for OpenAI-compatible
providers) and a bare aiohttp POST (no SDK: the transport's own floor). Timed by the client, from
the first request to the last answer; the median of ``--repeat`` batches. The physical limit is
``ceil(n / in_flight) * latency``.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from rlm_compat.testing import ScriptedChatServer  # noqa: E402

MESSAGES = [{"role": "user", "content": "sub question"}]


async def batch(n: int, in_flight: int, call: Callable[[], Awaitable[Any]]) -> float:
    limit = asyncio.Semaphore(in_flight)

    async def one() -> None:
        async with limit:
            await call()

    started = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(n)))
    return time.perf_counter() - started


async def measure(base_url: str, n: int, in_flight: int, repeat: int) -> dict[str, list[float]]:
    import aiohttp
    import litellm
    import openai

    from rlm_compat.clients import LiteLLMClient
    from rlm_compat.openai_client import OpenAICompatibleClient

    client = openai.AsyncOpenAI(base_url=base_url, api_key="sk", max_retries=0)
    session = aiohttp.ClientSession()
    ours_litellm = LiteLLMClient(lambda: litellm)
    ours_lean = OpenAICompatibleClient()

    async def raw() -> None:
        body = {"model": "gpt-4o-mini", "messages": MESSAGES}
        async with session.post(f"{base_url}/chat/completions", json=body) as response:
            await response.json()

    calls: dict[str, Callable[[], Awaitable[Any]]] = {
        "litellm.acompletion": lambda: litellm.acompletion(
            model="openai/gpt-4o-mini", messages=MESSAGES, api_base=base_url, api_key="sk"
        ),
        "rlm_compat LiteLLMClient (default)": lambda: ours_litellm.complete(
            "openai/gpt-4o-mini",
            MESSAGES,
            api_base=base_url,
            api_key="sk",  # type: ignore[arg-type]
        ),
        "openai.AsyncOpenAI": lambda: client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES),  # type: ignore[arg-type]
        "rlm_compat OpenAICompatibleClient (lean path)": lambda: ours_lean.complete(
            "openai/gpt-4o-mini",
            MESSAGES,
            api_base=base_url,
            api_key="sk",  # type: ignore[arg-type]
        ),
        "aiohttp POST (no SDK)": raw,
    }
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for call in calls.values():
        await batch(n, in_flight, call)  # warm-up: imports, connections, first-use paths
    for _ in range(repeat):  # interleaved, so load changes hit every client alike
        for name, call in calls.items():
            samples[name].append(await batch(n, in_flight, call))
    await session.close()
    await client.close()
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=64)
    parser.add_argument("--in-flight", type=int, default=16)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with ScriptedChatServer(lambda request: "leaf answer", latency=args.latency) as server:
        samples = asyncio.run(measure(server.base_url, args.n, args.in_flight, args.repeat))
    floor = math.ceil(args.n / args.in_flight) * args.latency
    print(
        f"{args.n} chat calls, {args.in_flight} in flight, {args.latency * 1000:.0f} ms provider latency "
        f"(physical limit {floor:.3f} s); median of {args.repeat}; python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}"
    )
    print()
    print("| client | median (s) | samples (s) | overhead per call (ms) |")
    print("|---|---:|---|---:|")
    for name, values in samples.items():
        median = statistics.median(values)
        listed = ", ".join(f"{v:.3f}" for v in values)
        print(f"| {name} | {median:.3f} | {listed} | {(median - floor) / args.n * 1000:.2f} |")


if __name__ == "__main__":
    main()
