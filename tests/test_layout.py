"""The package's layout: tooling apart from the library, one module per name, tooling errors apart.

The library (``rlm_compat`` outside ``rlm_compat/tools/``) never imports the tooling, so ``import
rlm_compat`` and a program embedding RLMs carry none of the conformance, research, view or CLI
code. Two modules of one name (three ``compare.py`` once) make tracebacks, grep and imports
ambiguous. And a user's ``except RLMError`` must catch the library's errors only.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from collections import defaultdict
from pathlib import Path

import pytest

import rlm_compat
from rlm_compat.errors import RLMError
from rlm_compat.tools import ToolError, ToolUsageError

PACKAGE = Path(rlm_compat.__file__).parent
TOOLS = PACKAGE / "tools"

#: ``python -m rlm_compat`` is ``rlm-compat``: the one library file that names the tooling.
ENTRY_POINT = PACKAGE / "__main__.py"

#: Run as scripts under other implementations' interpreters (no rlm_compat there): not imported.
STANDALONE = {
    "rlm_compat.tools.conformance.driver",
    "rlm_compat.tools.conformance.reference",
    "rlm_compat.tools.conformance.dspy_cases",  # under dspy's venv, beside driver.py
    "rlm_compat.tools.conformance.dspy_observer",  # sent into Pyodide as source
}


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _dotted(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_two_modules_or_packages_share_a_name() -> None:
    seen: dict[str, list[str]] = defaultdict(list)
    for path in _modules():
        if path.name == "__main__.py":
            continue
        name = path.parent.name if path.name == "__init__.py" else path.stem
        seen[name].append(str(path.relative_to(PACKAGE.parent)))
    shared = {name: paths for name, paths in seen.items() if len(paths) > 1}
    assert not shared, f"modules (or packages) sharing a name: {shared}"


def _imported_modules(path: Path) -> list[tuple[int, str]]:
    """Every module ``path`` imports (relative imports resolved), with its line."""
    package = _dotted(path) if path.name == "__init__.py" else _dotted(path).rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            found.append((node.lineno, module))
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value.startswith("rlm_compat.tools")  # importlib / "-m" / mock targets
        ):
            found.append((node.lineno, node.value))
    return found


def test_the_library_never_imports_the_tooling() -> None:
    offenders = [
        f"{path.relative_to(PACKAGE.parent)}:{line} imports {module}"
        for path in _modules()
        if TOOLS not in path.parents and path != ENTRY_POINT
        for line, module in _imported_modules(path)
        if module == "rlm_compat.tools" or module.startswith("rlm_compat.tools.")
    ]
    assert not offenders, offenders
    assert any(m.startswith("rlm_compat.tools") for _, m in _imported_modules(ENTRY_POINT))


def _tool_modules() -> list[str]:
    names = [m.name for m in pkgutil.walk_packages([str(TOOLS)], prefix="rlm_compat.tools.")]
    return sorted(set(names) - STANDALONE)


def test_tooling_errors_are_rooted_at_tool_error_not_rlm_error() -> None:
    classes = {
        obj
        for name in _tool_modules()
        for obj in vars(importlib.import_module(name)).values()
        if inspect.isclass(obj)
        and issubclass(obj, Exception)
        and obj.__module__.startswith("rlm_compat.tools")
    }
    named = {cls.__name__ for cls in classes}
    for expected in (
        "DriverError",
        "FixtureError",
        "GridError",
        "OracleError",
        "ViewInputError",
        "ContextInputError",
    ):
        assert expected in named, f"{expected} not found in the tooling"
    leaking = sorted(f"{cls.__module__}.{cls.__qualname__}" for cls in classes if issubclass(cls, RLMError))
    assert not leaking, f"tooling errors a user's `except RLMError` would catch: {leaking}"
    for cls in classes:
        # the driver's own (ProtocolViolation, UnsupportedTask) run in other venvs, without rlm_compat
        if cls.__name__ in named - {
            "ApiError",
            "DecodeError",
            "ProtocolViolation",
            "UnsupportedTask",
            "_Failure",
        }:
            assert issubclass(cls, ToolError), f"{cls.__module__}.{cls.__qualname__} is not a ToolError"


def test_a_users_except_rlm_error_does_not_catch_a_tools_error(tmp_path: Path) -> None:
    """What a program around RLMs sees when tooling it calls fails: not an RLMError."""
    from rlm_compat.tools.conformance.fixtures import FixtureSet
    from rlm_compat.tools.conformance.implementations import make_adapter
    from rlm_compat.tools.research.compare.suite_registry import resolve_suite
    from rlm_compat.tools.view import write_view

    for failing in (
        lambda: make_adapter("no-such-implementation"),
        lambda: resolve_suite("no-such-suite"),
        lambda: write_view([tmp_path / "missing.jsonl"], tmp_path / "out.html"),
        lambda: FixtureSet.open(tmp_path / "missing"),
    ):
        with pytest.raises(ToolError) as caught:
            try:
                failing()
            except RLMError:  # what a user's code around its RLM runs says
                pytest.fail("an RLMError handler caught a tooling error")
        assert isinstance(caught.value, ToolUsageError) and isinstance(caught.value, ValueError)
        assert str(caught.value)


def test_the_cli_maps_tool_errors_to_its_exit_code_and_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rlm_compat.tools.cli import main

    assert main(["view", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "v.html")]) == 1
    assert capsys.readouterr().err.startswith("rlm-compat view: ViewInputError: ")
    assert main(["conformance", "--impl", "no-such-implementation"]) == 1
    assert "rlm-compat conformance: ToolUsageError: unknown implementation" in capsys.readouterr().err
