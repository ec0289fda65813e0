"""Where the memo's structural claims sit in a 2fb46cc checkout, and which revision it is."""

from __future__ import annotations

import ast
from pathlib import Path

_CALLS = ("compile_restricted_exec", "exec", "eval")


def source_facts(checkout: Path) -> dict[str, list[str]]:
    """Where the memo's structural claims sit in the checkout, per fact id (read with ``ast``).

    Only names, line numbers and argument counts are reported: the doc never quotes upstream code.
    """
    found: dict[str, list[str]] = {}

    def note(fact: str, path: str, line: int, what: str) -> None:
        found.setdefault(fact, []).append(f"`{path}:{line}`: {what}")

    def parse(path: str) -> ast.Module | None:
        file = checkout / path
        return ast.parse(file.read_text(encoding="utf-8")) if file.is_file() else None

    repl = parse("src/rlm/repl.py")
    for node in ast.walk(repl) if repl else ():
        if isinstance(node, ast.ClassDef) and node.name == "REPLExecutor":
            note("executor", "src/rlm/repl.py", node.lineno, "class `REPLExecutor`")
        elif isinstance(node, ast.Call):
            func = node.func
            name = (
                func.id
                if isinstance(func, ast.Name)
                else func.attr
                if isinstance(func, ast.Attribute)
                else ""
            )
            if name in _CALLS:
                fact = "last_line" if name == "eval" else "executor"
                note(
                    fact,
                    "src/rlm/repl.py",
                    node.lineno,
                    f"call `{name}(...)` with {len(node.args)} positional argument(s)",
                )
        elif isinstance(node, ast.FunctionDef) and node.name == "_build_globals":
            for inner in ast.walk(node):
                if isinstance(inner, ast.Dict):
                    keys = [
                        k.value
                        for k in inner.keys
                        if isinstance(k, ast.Constant) and isinstance(k.value, str)
                    ]
                    if "re" in keys:
                        names = ", ".join(f"`{k}`" for k in keys)
                        note(
                            "injected",
                            "src/rlm/repl.py",
                            inner.lineno,
                            f"`_build_globals` dict with keys {names}",
                        )
        elif isinstance(node, ast.FunctionDef) and node.name == "_extract_code":
            note("fences", "src/rlm/repl.py", node.lineno, "method `_extract_code` (fence stripping)")
    parser = parse("src/rlm/parser.py")
    for node in parser.body if parser else ():
        if isinstance(node, ast.FunctionDef) and node.name in ("extract_final", "extract_final_var"):
            note("final", "src/rlm/parser.py", node.lineno, f"function `{node.name}`")
    prompts = parse("src/rlm/prompts.py")
    for node in ast.walk(prompts) if prompts else ():
        if isinstance(node, ast.FunctionDef) and node.name == "build_system_prompt":
            note("prompt", "src/rlm/prompts.py", node.lineno, "function `build_system_prompt`")
    tests = checkout / "tests" / "test_repl.py"
    tree = parse("tests/test_repl.py")
    if tree is not None:
        text = tests.read_text(encoding="utf-8")
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and "import os" in (
                ast.get_source_segment(text, node) or ""
            ):
                note(
                    "import_os", "tests/test_repl.py", node.lineno, f"test `{node.name}` executes `import os`"
                )
    for lines in found.values():
        lines.sort(key=lambda line: int(line.split(":")[1].split("`")[0]))
    return found


def revision(checkout: Path) -> dict[str, str]:
    """The checkout's commit and subject (``git log -1``), or why they are unknown."""
    import subprocess

    try:
        done = subprocess.run(
            ["git", "-C", str(checkout), "log", "-1", "--format=%H%n%s"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"commit": "unknown", "subject": f"git failed: {exc}"}
    if done.returncode != 0:
        return {"commit": "unknown", "subject": f"not a git checkout ({done.stderr.strip()[:200]})"}
    commit, _, subject = done.stdout.strip().partition("\n")
    return {"commit": commit, "subject": subject}
