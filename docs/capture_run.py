"""Regenerate docs/run.md: a real ``rlm-compat run`` against the loopback server, as a terminal shows it.

    PYTHONPATH=. python docs/capture_run.py            # rewrites docs/run.md

The run goes through the whole stack — the console script, litellm, HTTP to
:class:`rlm_compat.testing.ScriptedChatServer` on 127.0.0.1 — with a scripted model that reads a
directory of two logs, fans a question out over them with ``llm_query_batched`` and answers. Its
stderr is a pseudo-terminal, so the live display is the one a person sees; the capture is what the
terminal shows at the end (:func:`rlm_compat.testing.terminal_screen`) plus one frame drawn while
calls were in flight. The same run is repeated with stderr piped, for the plain lines.
"""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from rlm_compat.testing import ScriptedChatServer, terminal_screen

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "run.md"
QUERY = "How many ERROR lines are there in each log?"
STEPS = (
    "print(len(context))\nprint(context[:120])",
    "import re\nparts = re.split(r'^==> (.+) <==$', context, flags=re.M)[1:]\n"
    "files = dict(zip(parts[::2], parts[1::2]))\n"
    "counts = llm_query_batched([f'How many lines contain ERROR?\\n{text}' for text in files.values()])\n"
    "summary = ', '.join(f'{name}: {n}' for name, n in zip(files, counts))\nprint(summary)",
    "FINAL(summary)",
)


def _reply(request: dict[str, Any]) -> str:
    """Root iterations follow STEPS; a leaf ``llm_query`` counts the ERROR lines it was sent."""
    messages = request["messages"]
    if messages[0]["role"] == "system":
        return STEPS[len(messages) // 2 - 1]
    prompt = messages[-1]["content"]
    return str(sum("ERROR" in line for line in prompt.splitlines()[1:]))


def _logs(directory: Path) -> None:
    (directory / "logs").mkdir()
    app = [f"2026-11-23 10:{m:02d}:00 {'ERROR db timeout' if m % 7 == 0 else 'INFO ok'}" for m in range(40)]
    db = [f"2026-11-23 11:{m:02d}:00 {'ERROR deadlock' if m % 11 == 0 else 'INFO ok'}" for m in range(30)]
    (directory / "logs" / "app.log").write_text("\n".join(app) + "\n")
    (directory / "logs" / "db.log").write_text("\n".join(db) + "\n")


def _run(argv: list[str], cwd: Path, *, terminal: bool) -> tuple[int, str, str]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "TERM": "xterm-256color", "COLUMNS": "100"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    command = [sys.executable, "-m", "rlm_compat", *argv]
    if not terminal:
        done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
        return done.returncode, done.stdout, done.stderr
    master, slave = pty.openpty()
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    assert process.stdout is not None
    out = process.stdout.read().decode()
    return process.wait(timeout=60), out, b"".join(chunks).decode("utf-8", "replace")


def _busy_frame(raw: str) -> str:
    """The status line drawn with the most model calls in flight (the last such spinner frame)."""
    frames = [terminal_screen(part)[-1] for part in raw.split("\r\x1b[2K") if " in flight" in part]
    flying = [int(m.group(1)) if (m := re.search(r"(\d+) in flight", f)) else 0 for f in frames]
    most = max(flying)
    return [f for f, n in zip(frames, flying, strict=True) if n == most][-1]


def _anonymise(text: str, server: ScriptedChatServer) -> str:
    return text.replace(server.base_url, "http://127.0.0.1:PORT/v1")


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        _logs(work)
        with ScriptedChatServer(_reply, latency=0.4) as server:
            base = [
                "run",
                QUERY,
                "--context-file",
                "logs",
                "--model",
                "openai/scripted",
                "--api-base",
                server.base_url,
                "--api-key",
                "sk-loopback",
                "--trajectory",
                "run.jsonl",
            ]
            code, answer, raw = _run(base, work, terminal=True)
            if code != 0:
                raise SystemExit(f"the captured run failed ({code}):\n{raw}")
            screen = terminal_screen(raw)
            busy = _busy_frame(raw)
            lines = (work / "run.jsonl").read_text().splitlines()
            kinds = [json.loads(line).get("kind", "header") for line in lines]
            _, _, plain = _run([*base, "--trajectory", "piped.jsonl"], work, terminal=False)
            _, report, _ = _run(
                [*base, "--trajectory", "json.jsonl", "--json", "--progress", "off"], work, terminal=False
            )
        command = (
            f'rlm-compat run "{QUERY}" --context-file logs \\\n'
            "    --model openai/scripted --api-base http://127.0.0.1:PORT/v1 --trajectory run.jsonl"
        )
        stats = json.loads(report)["stats"]
        text = f"""# `rlm-compat run`: a captured run

Generated by `PYTHONPATH=. python docs/capture_run.py` (do not edit by hand): a real run of the
console script through litellm to the scripted loopback server (`rlm_compat.testing.ScriptedChatServer`,
0.4 s latency per reply), over a directory of two logs. The scripted model prints the context's size,
splits it on the `==> path <==` headers, asks `llm_query_batched` one question per file, and answers.
See [cli.md](cli.md) for the flags, the context layout and the exit codes.

```console
$ {command}
{answer.rstrip()}
```

## On a terminal (stderr is a tty): the live display

What the terminal shows when the run is over — the step lines, then the final status line:

```text
{chr(10).join(_anonymise(line, server) for line in screen)}
```

While it runs, the last line is a status line redrawn in place, e.g. a frame drawn while the two
`llm_query_batched` calls were waiting on the server:

```text
{busy}
```

## Piped (stderr is not a tty): plain lines

```text
{_anonymise(plain.rstrip(), server)}
```

## The trajectory

`run.jsonl` has {len(lines)} lines: a header, then one event per line
(docs/trajectory.md): {", ".join(f"`{k}`" for k in kinds[1:])}.

## `--json`

Standard output is one JSON object (`schema` `rlm_compat.run`); e.g. its `answer` is
`{json.loads(report)["answer"]}`, `stats.llm_calls` {stats["llm_calls"]}, `stats.leaf_calls`
{stats["leaf_calls"]}, `stats.total_tokens` {stats["total_tokens"]}.
"""
        OUT.write_text(text, encoding="utf-8")
        print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
