"""SIGTERM to exit of `rlm-compat serve` with streaming runs longer than the grace (target: grace + 1 s).

    python benchmarks/serve_shutdown.py [--trials 5] [--grace 1.0] [--runs 2]

Each trial starts a real server process (litellm path, loopback provider), starts ``--runs``
streaming requests whose root code spins for longer than the grace, waits until their workers run,
sends SIGTERM and times until the process has exited. It also checks what docs/serve.md promises:
each stream ends with an error event (``server_shutting_down``) and ``[DONE]``. Exits 1 when a
trial took longer than grace + 1 s or a stream did not end that way.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import httpx  # noqa: E402

from rlm_compat.testing import ScriptedChatServer  # noqa: E402

MODEL = "rlm:openai/gpt-4o-mini"
SPIN = "x = 0\nwhile True:\n    x += 1"


def _children(pid: int) -> int:
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z" and int(fields[1]) == pid:
                count += 1 + _children(int(entry))
    return count


def _stream(base_url: str, i: int, started: threading.Event, ends: list[Any]) -> None:
    body = {
        "model": MODEL,
        "stream": True,
        "messages": [{"role": "user", "content": f"spin {i}"}],
        "rlm": {"context": "c"},
    }
    data: list[str] = []
    with httpx.stream("POST", base_url + "/chat/completions", json=body, timeout=60) as response:
        for line in response.iter_lines():
            if "model_call_end" in line:
                started.set()
            if line.startswith("data:"):
                data.append(line)
    ends.append(data[-2:])


def trial(provider: ScriptedChatServer, grace: float, runs: int, tmp: str) -> tuple[float, bool]:
    env = dict(os.environ, OPENAI_API_KEY="sk-loopback", TMPDIR=tmp)
    argv = [sys.executable, "-m", "rlm_compat", "serve", "--port", "0", "--model", "openai/gpt-4o-mini"]
    argv += ["--api-base", provider.base_url, "--shutdown-grace", str(grace), "--repl-timeout", "60"]
    log = Path(tmp) / "server.log"
    with open(log, "w") as sink:
        server = subprocess.Popen(argv, stderr=sink, env=env, cwd=ROOT)
    deadline = time.monotonic() + 120
    while not (found := re.search(r"listening on (http://\S+)", log.read_text())):
        if server.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"server did not start: {log.read_text()[-2000:]}")
        time.sleep(0.05)
    ends: list[Any] = []
    events = [threading.Event() for _ in range(runs)]
    threads = [
        threading.Thread(target=_stream, args=(found.group(1), i, events[i], ends)) for i in range(runs)
    ]
    for t in threads:
        t.start()
    for event in events:
        event.wait(60)
    while _children(server.pid) < runs + 1:  # the fork server and one worker per run
        time.sleep(0.05)
    sent = time.perf_counter()
    server.send_signal(signal.SIGTERM)
    server.wait(60)
    took = time.perf_counter() - sent
    for t in threads:
        t.join(10)
    if os.environ.get("SHOW_LOG"):
        print(log.read_text()[-1500:])
    ok = len(ends) == runs and all(
        end[-1] == "data: [DONE]"
        and json.loads(end[0].removeprefix("data: "))["error"]["code"] == "server_shutting_down"
        for end in ends
    )
    return took, ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--grace", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()

    def script(request: dict[str, Any]) -> str:
        return SPIN if len(request.get("messages", [])) > 1 else "leaf"

    print(f"# {platform.python_version()} on {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    times = []
    failed = False
    with ScriptedChatServer(script) as provider:
        for n in range(args.trials):
            with tempfile.TemporaryDirectory() as tmp:
                took, ok = trial(provider, args.grace, args.runs, tmp)
            times.append(took)
            failed |= not ok or took > args.grace + 1
            print(f"trial {n + 1}: SIGTERM to exit {took:.2f} s; streams ended with error + [DONE]: {ok}")
    print(
        f"grace {args.grace:g} s, {args.runs} streaming runs: min {min(times):.2f} s, max {max(times):.2f} s"
    )
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
