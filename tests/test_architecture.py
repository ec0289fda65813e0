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


# --- layers (docs/architecture.md draws them) ---------------------------------------------------


def _importers_of(prefixes: tuple[str, ...], within: str) -> list[str]:
    modules = _modules()
    return sorted(
        f"{name} imports {target}"
        for name, path in modules.items()
        if name == within or name.startswith(within + ".")
        for target in _imports(name, path, modules)
        if any(target == p or target.startswith(p + ".") for p in prefixes)
    )


def test_record_sits_below_the_loop() -> None:
    """The observers hear events; they never reach back into the engine or the facade."""
    assert (
        _importers_of(("rlm_compat.core", "rlm_compat._loop", "rlm_compat.tools"), "rlm_compat.record") == []
    )


def test_the_engine_never_imports_the_facade_or_the_tools() -> None:
    assert _importers_of(("rlm_compat.core", "rlm_compat.tools"), "rlm_compat._loop") == []


def test_settings_never_import_the_engine() -> None:
    """Settings are data the engine is built from: the arrow goes one way."""
    assert _importers_of(("rlm_compat._loop", "rlm_compat.core"), "rlm_compat.settings") == []


def _private_names_taken() -> list[str]:
    """``from m import _x`` across modules (``from . import _sub`` of a private module is fine)."""
    modules = _modules()
    found = []
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or node.module == "__future__":
                continue
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                if private and f"{source}.{alias.name}" not in modules and source != name:
                    found.append(f"{name}:{node.lineno} takes {alias.name} from {source}")
    return found


def test_no_module_imports_another_modules_private_names() -> None:
    assert _private_names_taken() == []


# --- sizes ----------------------------------------------------------------------------------------

MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
#: the comment a function over the limit carries right above it (its decorators) saying why
LONG_REASON = "# Over 80 lines for a reason:"


def test_no_module_is_over_600_lines() -> None:
    sizes = {name: path.read_text(encoding="utf-8").count("\n") for name, path in _modules().items()}
    assert {name: n for name, n in sizes.items() if n > MAX_MODULE_LINES} == {}


def _long_functions_without_a_reason() -> list[str]:
    found = []
    for name, path in _modules().items():
        lines = path.read_text(encoding="utf-8").splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length <= MAX_FUNCTION_LINES:
                continue
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            above = " ".join(line.strip() for line in lines[max(0, first - 4) : first - 1])
            if LONG_REASON not in above:
                found.append(f"{name}.{node.name} ({length} lines)")
    return found


def test_no_function_is_over_80_lines_without_a_reason_written_at_it() -> None:
    assert _long_functions_without_a_reason() == []


def test_the_tools_import_only_the_librarys_public_modules() -> None:
    """Tooling is a user of the library: a private module it needs gets a public home first."""
    taken = _importers_of(tuple(_private_library_modules()), "rlm_compat.tools")
    assert taken == []


def _private_library_modules() -> list[str]:
    names = [n for n in _modules() if not n.startswith("rlm_compat.tools")]
    return [n for n in names if any(part.startswith("_") for part in n.split(".")[1:])]
