"""Profile ``upstream`` against 2fb46cc's executor, case by case (outputs, errors, env after each step).

The cases are ``inputs/repl/upstream_parity.toml``: 2fb46cc's executor as its loop calls it (env with
``context``, ``query`` and the real ``re``). The recorded half needs nothing: it replays each case
through profile upstream and compares with what ``rlm-compat record`` recorded from the 2fb46cc
checkout on this Python. The live half runs the checkout named by ``RLM_COMPAT_UPSTREAM`` in-process
on the running Python (which may be one the fixtures were not recorded on) and compares every step.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import pytest
import upstream_truth as truth
from upstream_checkout import missing

CASES = truth.recorded("upstream_parity")
IDS = [truth.name(line) for line in CASES]


@pytest.mark.parametrize("line", CASES, ids=IDS)
def test_recorded_upstream_behaviour(line: dict[str, Any]) -> None:
    truth.skip_unless_comparable(line)
    assert truth.replay(line) == truth.recorded_steps(line)


def _upstream_executor() -> tuple[Any, type[BaseException]]:
    root = os.environ.get("RLM_COMPAT_UPSTREAM")
    if not root:
        missing("set RLM_COMPAT_UPSTREAM to a ysz/recursive-llm checkout to compare live")
    path = Path(root) / "src" / "rlm" / "repl.py"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    spec = importlib.util.spec_from_file_location("_upstream_rlm_repl", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.REPLExecutor, module.REPLError


@pytest.mark.upstream
@pytest.mark.parametrize("line", CASES, ids=IDS)
def test_live_upstream_parity(line: dict[str, Any]) -> None:
    truth.skip_unless_comparable(line)
    make, error = _upstream_executor()
    assert truth.replay(line) == truth.replay(line, make, error)
