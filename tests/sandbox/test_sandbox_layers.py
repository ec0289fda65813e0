"""The sandbox's layers and names, read from its imports (every import in a file: functions and TYPE_CHECKING too).

Which module may import which is an import-linter contract (pyproject.toml, checked by
tests/test_architecture.py): ``restrict/`` (the interpreter-level restriction) never imports
``isolate/`` (the worker process layer), ``step/`` (the step engine) nor the runners above it;
``isolate/`` imports ``restrict/`` and ``step/``, never the runner choice; nothing in the sandbox
imports the RLM loop, the facade or the tooling; code outside the sandbox reaches ``restrict/``,
``isolate/`` and ``step/`` through ``rlm_compat.sandbox`` only. Here: the modules sit where the rules say,
no module imports another's private names (names, which the import graph does not see, read from
the syntax tree), every name taken from the facade is exported, and ``import rlm_compat`` loads
neither the worker machinery nor the compiler.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import rlm_compat
import rlm_compat.sandbox as sandbox

PACKAGE = Path(rlm_compat.__file__).parent
SANDBOX = "rlm_compat.sandbox"
STEP = {f"{SANDBOX}.step.{name}" for name in ("inline", "hostcall", "texts", "repl_config")}


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = ("rlm_compat", *path.relative_to(PACKAGE).with_suffix("").parts)
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = _modules()


def _imports(name: str) -> list[tuple[str, str | None]]:
    """``(module, imported name or None)`` for every import in module ``name``, made absolute.

    ``from pkg import sub`` of a submodule counts as importing ``pkg.sub`` (name None).
    """
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(MODULES[name].read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found += _imports_of(node, name)
    return found


def _within(module: str, *prefixes: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _sandbox_modules() -> list[str]:
    return sorted(m for m in MODULES if _within(m, SANDBOX))


def test_the_layers_are_where_the_rules_say() -> None:
    restrict = [m for m in _sandbox_modules() if _within(m, f"{SANDBOX}.restrict")]
    isolate = [m for m in _sandbox_modules() if _within(m, f"{SANDBOX}.isolate")]
    assert f"{SANDBOX}.restrict.prep" in restrict and f"{SANDBOX}.restrict.policy" in restrict
    assert f"{SANDBOX}.isolate.worker" in isolate and f"{SANDBOX}.isolate.zygote" in isolate
    step = {m for m in _sandbox_modules() if _within(m, f"{SANDBOX}.step")}
    assert step == {f"{SANDBOX}.step", *STEP}
    top = {m for m in _sandbox_modules() if m.count(".") <= 2}
    assert top == {
        SANDBOX,
        f"{SANDBOX}.runner",
        f"{SANDBOX}.step",
        f"{SANDBOX}.restrict",
        f"{SANDBOX}.isolate",
    }
    assert "rlm_compat.fences" in MODULES  # the fence rules: below the sandbox, shared with the parser


def _private_imports(name: str) -> list[tuple[str, str]]:
    """Private names of other rlm_compat modules that ``name`` imports or reads off an imported module."""
    found = []
    aliases: dict[str, str] = {}
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for module, imported in _imports_of(node, name):
                if imported is None:
                    alias = next(a for a in node.names if module.endswith("." + a.name))
                    aliases[alias.asname or alias.name] = module
                elif (
                    imported.startswith("_")
                    and not imported.startswith("__")
                    and _within(module, "rlm_compat")
                ):
                    found.append((module, imported))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            found.append((aliases[node.value.id], node.attr))
    return found


def _imports_of(node: ast.ImportFrom, name: str) -> list[tuple[str, str | None]]:
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    if node.level:
        base = package.split(".")[: len(package.split(".")) - node.level + 1]
        module = ".".join(base + ([node.module] if node.module else []))
    else:
        module = node.module or ""
    return [
        (f"{module}.{a.name}", None) if f"{module}.{a.name}" in MODULES else (module, a.name)
        for a in node.names
    ]


def test_no_private_names_are_imported_within_or_out_of_the_sandbox() -> None:
    offenders = [(name, hit) for name in _sandbox_modules() for hit in _private_imports(name)]
    offenders += [
        (name, hit)
        for name in MODULES
        if not _within(name, SANDBOX)
        for hit in _private_imports(name)
        if _within(hit[0], SANDBOX)
    ]
    assert offenders == []


def test_the_private_name_check_finds_private_names(tmp_path: Path) -> None:
    probe = "rlm_compat.sandbox.restrict._layers_probe"
    MODULES[probe] = tmp_path / "probe.py"
    MODULES[probe].write_text("from .registry import _view\nfrom . import deadline\ndeadline._CURRENT\n")
    try:
        assert _private_imports(probe) == [
            ("rlm_compat.sandbox.restrict.registry", "_view"),
            ("rlm_compat.sandbox.restrict.deadline", "_CURRENT"),
        ]
    finally:
        del MODULES[probe]


def test_every_exported_name_resolves_and_every_outside_import_is_exported() -> None:
    for name in sandbox.__all__:
        assert getattr(sandbox, name) is not None, name
    wanted = {
        imported
        for name in MODULES
        if not _within(name, SANDBOX)
        for module, imported in _imports(name)
        if module == SANDBOX and imported is not None
    }
    assert wanted <= set(sandbox.__all__)


def test_import_rlm_compat_loads_neither_the_worker_machinery_nor_the_compiler() -> None:
    code = "import sys, rlm_compat; print(' '.join(m for m in sys.modules if m.startswith('rlm_compat.sandbox')))"
    loaded = set(
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.split()
    )
    assert not {m for m in loaded if _within(m, f"{SANDBOX}.isolate") and m != f"{SANDBOX}.isolate"}
    assert f"{SANDBOX}.restrict.prep" not in loaded and f"{SANDBOX}.step.inline" not in loaded
