"""dspy.RLM offline: its Deno + Pyodide interpreter from local copies, prepared once.

dspy 3.4.1's interpreter runs ``dspy/primitives/runner.js`` under Deno. That file imports two
things when it starts: ``npm:pyodide@0.29.4/pyodide.js`` (from the npm registry) and
``https://deno.land/std@0.186.0/io/mod.ts`` (for ``readLines``, from deno.land, which an offline
machine cannot reach). :func:`prepare_dspy_runtime` makes a directory that needs neither at run time:

* ``deno``: the Deno binary of npm's ``deno`` package (``npm install``, the npm registry);
* ``read_lines.ts``: a ``readLines`` of our own (the lines of a Deno reader), and
  ``import_map.json`` sending the deno.land URL that runner.js names to it;
* ``denodir/``: a Deno cache (``DENO_DIR``) filled by ``deno cache`` with ``npm:pyodide`` and its
  files (the npm registry again).

The driver's ``dspy`` backend then starts Deno with ``--cached-only`` and that import map, so the
sandbox addresses no network. Preparing needs the npm registry (as ``--setup`` needs PyPI).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from ..shared.tooling_errors import ToolUsageError

__all__ = ["DENO_VERSION", "prepare_dspy_runtime"]

DENO_VERSION = "2.9.6"
"""The Deno release installed from npm (dspy 3.4 accepts Deno >= 2, < 3)."""

_READ_LINES = """\
// readLines for dspy's runner.js, offline (written for rlm_compat): the lines of a Deno reader,
// without their line endings.
export async function* readLines(
  reader: { read(p: Uint8Array): Promise<number | null> },
): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  const chunk = new Uint8Array(64 * 1024);
  let pending = "";
  while (true) {
    const n = await reader.read(chunk);
    if (n === null) break;
    pending += decoder.decode(chunk.subarray(0, n), { stream: true });
    let end: number;
    while ((end = pending.indexOf("\\n")) >= 0) {
      yield pending.slice(0, end).replace(/\\r$/, "");
      pending = pending.slice(end + 1);
    }
  }
  pending += decoder.decode();
  if (pending.length > 0) yield pending;
}
"""


def _run(argv: list[str], what: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        raise ToolUsageError(f"dspy runtime: {what} failed: {(done.stderr or done.stdout).strip()[-800:]}")
    return done.stdout


def prepare_dspy_runtime(directory: Path, python: str) -> Path:
    """Make (or reuse) the runtime directory for the dspy installed under ``python``."""
    directory = directory.resolve()
    if (directory / "deno").is_file() and (directory / "import_map.json").is_file():
        return directory
    npm = shutil.which("npm")
    if npm is None:
        raise ToolUsageError("dspy runtime: npm is needed to fetch Deno and Pyodide (apt-get install npm)")
    runner = (
        Path(
            _run(
                [
                    python,
                    "-c",
                    "import dspy.primitives.python_interpreter as m, os; print(os.path.dirname(m.__file__))",
                ],
                "finding dspy",
            ).strip()
        )
        / "runner.js"
    )
    text = runner.read_text(encoding="utf-8")
    remote = sorted(set(re.findall(r'from "(https://[^"]+)"', text)))
    unknown = [url for url in remote if not re.fullmatch(r"https://deno\.land/std@[0-9.]+/io/mod\.ts", url)]
    if unknown or not remote:
        raise ToolUsageError(
            f"dspy runtime: {runner} imports {remote}; only deno.land's io/mod.ts (readLines) has a local "
            "stand-in here"
        )
    directory.mkdir(parents=True, exist_ok=True)
    packages = directory / "npm"
    _run(
        [
            npm,
            "install",
            "--silent",
            "--no-audit",
            "--no-fund",
            "--prefix",
            str(packages),
            f"deno@{DENO_VERSION}",
        ],
        "npm install deno",
    )
    binaries = sorted(packages.glob("node_modules/@deno/*/deno"))
    if not binaries:
        raise ToolUsageError(f"dspy runtime: npm's deno package left no binary under {packages}")
    shutil.copy2(binaries[0], directory / "deno")
    (directory / "read_lines.ts").write_text(_READ_LINES, encoding="utf-8")
    target = (directory / "read_lines.ts").as_uri()
    (directory / "import_map.json").write_text(
        json.dumps({"imports": {url: target for url in remote}}, indent=2) + "\n", encoding="utf-8"
    )
    env = {**os.environ, "DENO_DIR": str(directory / "denodir"), "DENO_NO_PACKAGE_JSON": "1"}
    _run(
        [
            str(directory / "deno"),
            "cache",
            "--no-config",
            "--no-lock",
            "--node-modules-dir=false",
            f"--import-map={directory / 'import_map.json'}",
            str(runner),
        ],
        "deno cache (npm:pyodide)",
        env,
    )
    return directory
