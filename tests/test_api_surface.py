"""rlm_compat's modules expose the names upstream's modules do (2fb46cc and cc7a826)."""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import subprocess
from pathlib import Path

import pytest

import rlm_compat
from rlm_compat import RLM

# Public names of ysz/recursive-llm's modules (top-level definitions and imports that are not
# typing helpers or stdlib modules), as read from src/rlm/*.py at 2fb46cc.
UPSTREAM_NAMES: dict[str, set[str]] = {
    "": {"RLM", "RLMError", "MaxIterationsError", "MaxDepthError", "REPLError"},
    "core": {
        "RLM",
        "RLMError",
        "MaxIterationsError",
        "MaxDepthError",
        "REPLExecutor",
        "REPLError",
        "Message",
        "build_system_prompt",
        "parse_response",
        "is_final",
        "litellm",
    },
    "repl": {"REPLExecutor", "REPLError"},
    "parser": {"extract_final", "extract_final_var", "is_final", "parse_response"},
    "prompts": {"build_system_prompt", "build_user_prompt"},
    "types": {"Message", "RLMConfig", "REPLEnvironment", "CompletionResult"},
}
_IGNORED = {"__version__", "__all__"}


@pytest.mark.parametrize("module", sorted(UPSTREAM_NAMES))
def test_module_exposes_upstream_names(module: str) -> None:
    ours = importlib.import_module(f"rlm_compat.{module}" if module else "rlm_compat")
    missing = sorted(n for n in UPSTREAM_NAMES[module] if not hasattr(ours, n))
    assert missing == []


def test_rlm_signature_matches_upstream() -> None:
    params = list(inspect.signature(RLM.__init__).parameters.values())[1:]
    positional = [(p.name, p.default) for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]
    assert positional == [
        ("model", inspect.Parameter.empty),
        ("recursive_model", None),
        ("api_base", None),
        ("api_key", None),
        ("max_depth", None),  # deviation C2: the API preset's default, 5 as in 2fb46cc unless api="0.5"
        ("max_iterations", 30),
        ("_current_depth", 0),
    ]
    assert RLM("m", isolation="inline").max_depth == 5
    assert params[-1].kind is inspect.Parameter.VAR_KEYWORD
    for method in ("complete", "completion", "acomplete", "acompletion"):
        sig = inspect.signature(getattr(RLM, method))
        assert [(p.name, p.default) for p in list(sig.parameters.values())[1:3]] == [
            ("query", ""),
            ("context", ""),
        ]
    assert inspect.iscoroutinefunction(RLM.acomplete) and inspect.iscoroutinefunction(RLM.acompletion)


def test_error_hierarchy_matches_upstream() -> None:
    assert issubclass(rlm_compat.MaxIterationsError, rlm_compat.RLMError)
    assert issubclass(rlm_compat.MaxDepthError, rlm_compat.RLMError)
    assert not issubclass(rlm_compat.REPLError, rlm_compat.RLMError)
    assert rlm_compat.core.REPLError is rlm_compat.repl.REPLError is rlm_compat.REPLError


def _upstream_public_names(source: str) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Import):  # only the patch point; stdlib modules are not API
            names.update(a.name for a in node.names if a.name == "litellm")
        elif isinstance(node, ast.ImportFrom) and node.level > 0:  # re-exports of its own modules
            names.update(a.asname or a.name for a in node.names)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return {n for n in names if not n.startswith("_")} - _IGNORED


@pytest.mark.upstream
@pytest.mark.skipif(not os.environ.get("RLM_COMPAT_UPSTREAM"), reason="RLM_COMPAT_UPSTREAM is not set")
@pytest.mark.parametrize("commit", ["2fb46cc", "cc7a826"])
def test_names_against_live_checkout(commit: str) -> None:
    root = Path(os.environ["RLM_COMPAT_UPSTREAM"])
    for module in UPSTREAM_NAMES:
        path = f"src/rlm/{module or '__init__'}.py"
        if (root / ".git").exists():
            source = subprocess.run(
                ["git", "-C", str(root), "show", f"{commit}:{path}"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        else:
            source = (root / path).read_text()
        assert _upstream_public_names(source) == UPSTREAM_NAMES[module], module
