"""The dependency policy: every range is tested, and no code leans on another package's internals
without a test that fails when the package changes under it.

``.ci/run`` runs the suite twice over: with the newest versions the ranges allow (a plain ``pip
install``, what a new user gets that day) and with every range at its floor (``nox -s oldest``,
constraints from scripts/dependency_floor.py). These tests keep the ranges fit for that.
"""

from __future__ import annotations

import asyncio
import importlib.util
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rlm_compat.clients import LiteLLMClient
from rlm_compat.testing import ScriptedChatServer

ROOT = Path(__file__).resolve().parent.parent
PRICED = "openai/gpt-4o-mini"

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib


def _floor_script() -> Any:
    spec = importlib.util.spec_from_file_location(
        "dependency_floor", ROOT / "scripts" / "dependency_floor.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _project() -> dict[str, Any]:
    return dict(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"])


def test_every_user_facing_range_has_a_tested_floor_and_a_major_version_ceiling() -> None:
    project = _project()
    script = _floor_script()
    groups = {"runtime": project["dependencies"]}
    groups.update({k: v for k, v in project["optional-dependencies"].items() if k != script.TOOLS_GROUP})
    for group, requirements in groups.items():
        for requirement in requirements:
            spec = requirement.split(";")[0]
            assert ">=" in spec, f"{group}: {requirement!r} needs a floor (the oldest version CI tests)"
            assert "<" in spec.replace("<=", ""), (
                f"{group}: {requirement!r} needs a ceiling below the next major"
            )
    pins = script.floors()
    assert any(pin.startswith("litellm==") for pin in pins)
    assert all(re.fullmatch(r"[a-z0-9._-]+==[0-9][0-9a-z.]*(; .+)?", pin) for pin in pins), pins


def test_linters_are_pinned_exactly() -> None:
    tools = _project()["optional-dependencies"]["test"]
    for name in ("ruff", "mypy"):
        (spec,) = [r for r in tools if re.match(rf"{name}\b", r)]
        assert re.fullmatch(rf"{name}==[0-9.]+", spec), spec


def test_the_floor_script_refuses_a_range_without_a_floor(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\ndependencies = ["litellm<2"]\n', encoding="utf-8")
    with pytest.raises(SystemExit, match="no lower bound"):
        _floor_script().floors(pyproject)


# --- seams into litellm ------------------------------------------------------------------------


def _complete_through_litellm(
    server: ScriptedChatServer, edit: Callable[[Any], None] = lambda response: None
) -> tuple[Any, Any]:
    import litellm

    seen: dict[str, Any] = {}

    async def acompletion(**kwargs: Any) -> Any:
        response = await litellm.acompletion(**kwargs)
        edit(response)
        seen["response"] = response
        return response

    client = LiteLLMClient(lambda: litellm, acompletion)
    reply = asyncio.run(
        client.complete(
            PRICED,
            [{"role": "user", "content": "hi"}],
            api_base=server.base_url,
            api_key="sk-loopback",
            num_retries=0,
        )
    )
    return reply, seen["response"]


def test_cost_read_from_litellm_agrees_with_its_public_completion_cost(
    chat_server: Callable[..., ScriptedChatServer],
) -> None:
    """The cost comes from litellm's response (a private ``_hidden_params``), else its public
    ``completion_cost``: both must say the same, so a change of the private one fails here."""
    import litellm

    reply, response = _complete_through_litellm(chat_server(["hello"]))
    assert reply.cost_usd is not None and reply.cost_usd > 0
    assert reply.cost_usd == pytest.approx(litellm.completion_cost(completion_response=response))


def test_cost_falls_back_to_completion_cost_without_the_private_field(
    chat_server: Callable[..., ScriptedChatServer],
) -> None:
    import litellm

    def strip(response: Any) -> None:
        response._hidden_params = {}

    reply, response = _complete_through_litellm(chat_server(["hello"]), strip)
    assert reply.cost_usd == pytest.approx(litellm.completion_cost(completion_response=response))
    assert reply.prompt_tokens and reply.completion_tokens
