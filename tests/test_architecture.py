"""The shape of the code: no import circles, one runner interface, texts built in one place."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import rlm_compat
from rlm_compat.sandbox import InlineRunner, ProcessRunner, Runner

PACKAGE = Path(rlm_compat.__file__).parent


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = ("rlm_compat", *path.relative_to(PACKAGE).with_suffix("").parts)
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every rlm_compat module ``name`` imports, anywhere in the file (functions and TYPE_CHECKING too)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            submodules = [f"{module}.{alias.name}" for alias in node.names]
            hits = [m for m in submodules if m in modules]
            # `from . import x` imports submodule x; `from .m import y` imports m
            targets.update(hits if hits else [module])
        elif isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
    return {t for t in targets if t in modules and t != name}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles() -> None:
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_cycles() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]


def test_both_runners_have_the_runner_interface() -> None:
    wanted = {name: inspect.signature(getattr(Runner, name)) for name in ("execute", "render", "close")}
    for runner in (InlineRunner, ProcessRunner):
        for name, signature in wanted.items():
            assert inspect.signature(getattr(runner, name)) == signature, (runner, name)


def test_the_worker_never_imports_the_facade() -> None:
    modules = _modules()
    worker = _imports(
        "rlm_compat.sandbox.isolate.worker", modules["rlm_compat.sandbox.isolate.worker"], modules
    )
    assert "rlm_compat.repl" not in worker and "rlm_compat.core" not in worker


def test_error_texts_are_built_only_in_texts() -> None:
    """The 'Execution error:' prefix appears in one sandbox module only (the facade's own guard aside)."""
    offenders = [
        path.name
        for path in (PACKAGE / "sandbox").rglob("*.py")
        if path.name != "texts.py" and "Execution error:" in path.read_text(encoding="utf-8")
    ]
    assert offenders == []
