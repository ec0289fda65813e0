"""The shape of the code: import contracts, one runner interface, texts built in one place, sizes.

The import graph is grimp's (every import in a file: functions and TYPE_CHECKING too) and the
package rules are import-linter contracts in pyproject.toml (``[tool.importlinter]``; ``lint-imports``
checks the same from a shell): no package circles at any level, the library's and the sandbox's
layers, the sandbox's sub-packages behind its facade, the tools apart from the library. Names
(private ones taken across modules) are read from the syntax tree: grimp sees modules, not names.
"""

from __future__ import annotations

import ast
import copy
import inspect
import sys
from pathlib import Path
from typing import Any

import grimp
import pytest
from importlinter import configuration
from importlinter.application.use_cases import read_user_options
from importlinter.contracts.acyclic_siblings import AcyclicSiblingsContract
from importlinter.contracts.forbidden import ForbiddenContract
from importlinter.contracts.layers import LayersContract
from importlinter.contracts.protected import ProtectedContract
from importlinter.domain.contract import Contract

import rlm_compat
from rlm_compat.sandbox import InlineRunner, ProcessRunner, Runner

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

PACKAGE = Path(rlm_compat.__file__).parent
PYPROJECT = PACKAGE.parent / "pyproject.toml"
TOOLS = "rlm_compat.tools"

#: Library modules a program imports that, inside the package, only the tools import (each is
#: public API a doc names); any other such module belongs in the tools wing.
FOR_USERS_TOO = {
    "rlm_compat.config": "docs/repl.md: where users import ReplConfig and Limits (the sandbox's)",
    "rlm_compat.openai_client": "docs/serve.md: the lean client for OpenAI-compatible endpoints",
    "rlm_compat.testing": "README: the scripted loopback server for tests and demos",
    "rlm_compat.repl_namespace": "docs/architecture.md: the public home of the namespace contract",
}


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = ("rlm_compat", *path.relative_to(PACKAGE).with_suffix("").parts)
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("rlm_compat", cache_dir=None)


def _contracts() -> dict[str, Contract]:
    configuration.configure()
    options = read_user_options(str(PYPROJECT))
    kinds: dict[str, Any] = {
        kind.type_name: kind
        for kind in (AcyclicSiblingsContract, ForbiddenContract, LayersContract, ProtectedContract)
    }
    return {
        raw["id"]: kinds[raw["type"]](
            name=raw["name"], session_options=options.session_options, contract_options=raw
        )
        for raw in options.contracts_options
    }


def _broken(graph: grimp.ImportGraph) -> dict[str, Any]:
    """The contracts ``graph`` breaks, by id, with what import-linter found."""
    checks = {
        key: contract.check(copy.deepcopy(graph), verbose=False) for key, contract in _contracts().items()
    }
    return {key: check.metadata for key, check in checks.items() if not check.kept}


def test_the_import_contracts_hold(graph: grimp.ImportGraph) -> None:
    assert set(_contracts()) == {
        "acyclic",
        "library-layers",
        "options-without-executor",
        "sandbox-layers",
        "sandbox-step-layers",
        "sandbox-facade",
        "tools-apart",
    }
    assert _broken(graph) == {}


@pytest.mark.parametrize(
    ("contract", "importer", "imported"),
    [
        # package circles: settings <-> record, sandbox/restrict <-> the sandbox's host calls
        ("acyclic", "rlm_compat.record.budget", "rlm_compat.settings.table"),
        ("acyclic", "rlm_compat.sandbox.restrict.prep", "rlm_compat.sandbox.step.hostcall"),
        # a module circle inside one package is a circle of siblings too
        ("acyclic", "rlm_compat.record.trajectory", "rlm_compat.record.run"),
        ("library-layers", "rlm_compat.settings.table", "rlm_compat._loop.engine"),
        ("library-layers", "rlm_compat.record.run", "rlm_compat.core"),
        ("library-layers", "rlm_compat.sandbox.step.inline", "rlm_compat._releases.contract"),
        ("options-without-executor", "rlm_compat.settings.table", "rlm_compat.repl_v050"),
        ("sandbox-layers", "rlm_compat.sandbox.restrict.prep", "rlm_compat.sandbox.isolate.worker"),
        ("sandbox-step-layers", "rlm_compat.sandbox.step.texts", "rlm_compat.sandbox.step.hostcall"),
        ("sandbox-facade", "rlm_compat.repl", "rlm_compat.sandbox.isolate.process"),
        ("tools-apart", "rlm_compat.core", "rlm_compat.tools.cli"),
    ],
)
def test_each_contract_breaks_on_the_import_it_forbids(
    graph: grimp.ImportGraph, contract: str, importer: str, imported: str
) -> None:
    changed = copy.deepcopy(graph)
    assert importer in changed.modules and imported in changed.modules
    assert not changed.direct_import_exists(importer=importer, imported=imported)
    if contract == "acyclic":  # the added import closes a circle of siblings
        shared = next(
            i
            for i, (a, b) in enumerate(zip(importer.split("."), imported.split("."), strict=False))
            if a != b
        )
        above, below = (".".join(name.split(".")[: shared + 1]) for name in (importer, imported))
        assert changed.chain_exists(importer=below, imported=above, as_packages=True)
    changed.add_import(importer=importer, imported=imported)
    assert contract in _broken(changed)


def _package_node(graph: grimp.ImportGraph, name: str) -> str:
    """The node of the package graph ``name`` belongs to: its package (a package's own modules and
    its ``__init__`` together), or itself for a module at the root, where each module is a node."""
    if graph.find_children(name):
        return name
    parent = name.rsplit(".", 1)[0]
    return name if parent == "rlm_compat" else parent


def _package_circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected parts (more than one node) of the package graph (Tarjan's)."""
    edges: dict[str, set[str]] = {}
    for name in graph.modules:
        source = _package_node(graph, name)
        for imported in graph.find_modules_directly_imported_by(name):
            target = _package_node(graph, imported)
            if source != target and "rlm_compat" not in (source, target):  # the root's facade aside
                edges.setdefault(source, set()).add(target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            part = [stack.pop()]
            while part[-1] != node:
                part.append(stack.pop())
            if len(part) > 1:
                found.append(sorted(part))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_the_package_graph_has_no_circle(graph: grimp.ImportGraph) -> None:
    """Counting each package as one node (its own modules with it), imports run one way.

    acyclic_siblings compares siblings; this also sees a sub-package importing its parent's own
    modules while the parent imports it (the sandbox's facade and its sub-packages, a command
    package and the tools' top level)."""
    assert _package_circles(graph) == []


def test_the_package_check_finds_a_sub_package_importing_its_parent(graph: grimp.ImportGraph) -> None:
    changed = copy.deepcopy(graph)
    changed.add_import(importer="rlm_compat.sandbox.restrict.prep", imported="rlm_compat.sandbox.runner")
    assert _package_circles(changed) == [
        [
            "rlm_compat.sandbox",
            "rlm_compat.sandbox.isolate",
            "rlm_compat.sandbox.restrict",
            "rlm_compat.sandbox.step",
        ]
    ]
    changed = copy.deepcopy(graph)
    changed.add_import(importer="rlm_compat.tools.view.render", imported="rlm_compat.tools.cli")
    assert ["rlm_compat.tools", "rlm_compat.tools.view"] in _package_circles(changed)


def _tool_only_modules(graph: grimp.ImportGraph) -> list[str]:
    """Library modules that only the tools import (and no user is told to)."""
    found = []
    for name in sorted(graph.modules):
        if name == "rlm_compat" or name == TOOLS or name.startswith(TOOLS + ".") or name in FOR_USERS_TOO:
            continue
        importers = graph.find_modules_that_directly_import(name)
        if importers and all(i == TOOLS or i.startswith(TOOLS + ".") for i in importers):
            found.append(name)
    return found


def test_no_library_module_is_there_for_the_tools_only(graph: grimp.ImportGraph) -> None:
    """A module only the commands use belongs in the tools wing (so, say, rich stays the CLI's)."""
    assert set(FOR_USERS_TOO) <= graph.modules
    assert _tool_only_modules(graph) == []


def test_the_tool_only_check_finds_a_tool_only_module(graph: grimp.ImportGraph) -> None:
    changed = copy.deepcopy(graph)
    changed.add_module("rlm_compat.record.for_the_view")
    changed.add_import(importer="rlm_compat.tools.view.render", imported="rlm_compat.record.for_the_view")
    assert _tool_only_modules(changed) == ["rlm_compat.record.for_the_view"]


def test_only_the_tools_import_rich() -> None:
    """rich is the ``[cli]`` extra: the library installs, imports and runs without it."""
    with_externals = grimp.build_graph("rlm_compat", include_external_packages=True, cache_dir=None)
    importers = with_externals.find_modules_that_directly_import("rich")
    assert importers and all(name.startswith(TOOLS + ".") for name in importers), importers
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    assert not [r for r in project["dependencies"] if r.startswith("rich")]
    assert [r for r in project["optional-dependencies"]["cli"] if r.startswith("rich")]


def test_both_runners_have_the_runner_interface() -> None:
    wanted = {name: inspect.signature(getattr(Runner, name)) for name in ("execute", "render", "close")}
    for runner in (InlineRunner, ProcessRunner):
        for name, signature in wanted.items():
            assert inspect.signature(getattr(runner, name)) == signature, (runner, name)


def test_the_worker_never_imports_the_facade(graph: grimp.ImportGraph) -> None:
    worker = "rlm_compat.sandbox.isolate.worker"
    for facade in ("rlm_compat.repl", "rlm_compat.core", "rlm_compat"):
        assert not graph.chain_exists(importer=worker, imported=facade), facade


def test_error_texts_are_built_only_in_texts() -> None:
    """The 'Execution error:' prefix appears in one sandbox module only (the facade's own guard aside)."""
    offenders = [
        path.name
        for path in (PACKAGE / "sandbox").rglob("*.py")
        if path.name != "texts.py" and "Execution error:" in path.read_text(encoding="utf-8")
    ]
    assert offenders == []


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


def test_the_tools_import_only_the_librarys_public_modules(graph: grimp.ImportGraph) -> None:
    """Tooling is a user of the library: a private module it needs gets a public home first."""
    taken = sorted(
        f"{importer} imports {imported}"
        for importer in graph.modules
        if importer.startswith(TOOLS + ".")
        for imported in graph.find_modules_directly_imported_by(importer)
        if not imported.startswith(TOOLS) and any(part.startswith("_") for part in imported.split(".")[1:])
    )
    assert taken == []
