"""The headline facts as one plain script a reader can paste, run under a given Python."""

from __future__ import annotations

import json

from ...shared.package_paths import import_root
from ...shared.tooling_errors import ToolUsageError

QUICK_CODE = (
    "import re",
    'print(re.findall(r"[A-Z]\\w+", context))',
    "chunks = [context[i:i+10] for i in range(0, len(context), 10)]",
    "count = 0\ncount += 1",
)
"""The headline facts as one plain script a reader can paste (the doc shows it and its output)."""


def quick_script(target: str) -> str:
    """The script for ``target``: ``2fb46cc`` (imports ``rlm``) or an rlm_compat profile name."""
    if target == "2fb46cc":
        head = ["from rlm.repl import REPLExecutor", "", "def new():", "    return REPLExecutor()"]
    else:
        head = [
            "from rlm_compat.repl import REPLExecutor",
            "",
            "def new():",
            f'    return REPLExecutor(profile="{target}")',
        ]
    return "\n".join(
        [
            *head,
            "",
            'env = {"context": "Hello World from the RLM baseline memo"}',
            "codes = [",
            *(f"    {json.dumps(code)}," for code in QUICK_CODE),
            "]",
            "for code in codes:",
            "    try:",
            '        print("->", repr(new().execute(code, env)))',
            "    except Exception as e:",
            '        print("->", type(e).__name__ + ":", e)',
            "",
        ]
    )


def run_quick(python: str, target: str, pythonpath: str | None = None) -> str:
    """Run :func:`quick_script` under ``python`` in an empty temporary directory; its stdout.

    Only the script's own lines come back (each starts with ``->``), so no path of this machine
    reaches the doc; a failure to run is a clear error with the tail of stderr.
    """
    import os
    import subprocess
    import tempfile

    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TMPDIR", "HOME")}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    env["PYTHONHASHSEED"] = "0"
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    with tempfile.TemporaryDirectory() as cwd:
        try:
            done = subprocess.run(
                [python, "-"],
                input=quick_script(target),
                capture_output=True,
                text=True,
                cwd=cwd,
                env=env,
                timeout=300,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ToolUsageError(f"cannot run the quick script with {python}: {exc}") from None
    if done.returncode != 0:
        raise ToolUsageError(
            f"the quick script failed under {python} (exit {done.returncode}): {done.stderr[-800:]}"
        )
    return "".join(line + "\n" for line in done.stdout.splitlines() if line.startswith("->"))


def run_quick_here(profile: str) -> str:
    """:func:`run_quick` for an rlm_compat profile with this interpreter and this rlm_compat."""
    import sys

    return run_quick(sys.executable, profile, str(import_root()))


def python_minor(python: str) -> str:
    """``3.11`` for an interpreter path (asked, not guessed from the name)."""
    import subprocess

    try:
        done = subprocess.run(
            [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise ToolUsageError(f"cannot run {python}: {exc}") from None
    return done.stdout.strip()
