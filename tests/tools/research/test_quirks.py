"""``rlm-compat quirks``: per-quirk step costs from recorded (loopback) and imported trajectories."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from locations import DATA

from rlm_compat import RLM
from rlm_compat.errors import TrajectoryError
from rlm_compat.profiles import QUIRKS
from rlm_compat.testing import ScriptedChatServer
from rlm_compat.tools.cli import main
from rlm_compat.tools.research.ablation.quirks import quirk_table

ServerFactory = Callable[..., ScriptedChatServer]
DATA = DATA / "replay"
FIXTURE_CONTEXT = (DATA / "context.txt").read_text(encoding="utf-8")

# each step trips exactly one quirk of upstream, and none depends on another
ONE_QUIRK_EACH = {
    "imports_refused": "import math\nprint(math.floor(2.5))",
    "no_inplace_guard": "x = 1\nx += 1\nprint(x)",
    "no_write_guard": "d = {}\nd['k'] = 1\nprint(d)",
    "no_unpack_guard": "a, b = 1, 2\nprint(a + b)",
    "": "print(len(context))",
    "minimal_env": 'FINAL("done")',
}


@pytest.fixture
def one_quirk_each(chat_server: ServerFactory, tmp_path: Path) -> Path:
    replies = [f"```python\n{code}\n```" for code in ONE_QUIRK_EACH.values()]

    def script(request: dict[str, Any]) -> str:
        return replies[sum(1 for m in request["messages"] if m["role"] == "assistant")]

    path = tmp_path / "run.jsonl"
    server = chat_server(script)
    rlm = RLM(
        "openai/gpt-4o-mini",
        api_base=server.base_url,
        api_key="sk-loopback",
        isolation="inline",
        trajectory_path=path,
    )
    assert rlm.complete("q", "some context") == "done"
    return path


def test_each_quirk_costs_the_step_it_alone_breaks(one_quirk_each: Path) -> None:
    table = quirk_table([one_quirk_each], context="some context")
    assert table.steps == 6
    presets = {c.name: c for c in table.presets}
    assert (presets["fixed"].errors, presets["fixed"].broken) == (0, 0)
    assert (presets["upstream"].errors, presets["upstream"].broken) == (5, 5)
    costs = {c.name: c for c in table.quirks}
    assert set(costs) == set(QUIRKS)
    tripped = {q for q in ONE_QUIRK_EACH if q}
    for name, cost in costs.items():
        expected = 1 if name in tripped else 0
        assert (name, cost.repaired, cost.alone) == (name, expected, expected)
        assert cost.broken == 5 - expected
    assert [c.name for c in table.quirks[:5]] == sorted(tripped)  # most repairs first, then by name


def test_a_dependent_step_is_repaired_only_with_the_quirk_that_broke_its_input() -> None:
    table = quirk_table([DATA / "rlms_run.jsonl"], context=FIXTURE_CONTEXT)
    costs = {c.name: c for c in table.quirks}
    # `import re` refused: the findall step fails and every later step that reads `orders` too
    assert costs["imports_refused"].alone == 5
    # with imports allowed in upstream only that one step comes back: the others trip other quirks
    assert costs["imports_refused"].repaired == 1
    assert (costs["no_inplace_guard"].alone, costs["no_write_guard"].alone) == (1, 1)
    assert costs["separate_scopes"].alone == 2  # the helper's `wanted`, then `ids`
    assert costs["minimal_env"].alone == 1  # llm_query is not defined
    upstream = next(c for c in table.presets if c.name == "upstream")
    assert (upstream.broken, table.steps) == (5, 7)  # the last step fails under fixed too


def test_markdown_table_and_cli(one_quirk_each: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = [str(one_quirk_each), str(DATA / "rlms_run.jsonl"), str(DATA / "dspy_prediction.json")]
    assert main(["quirks", *paths, "--context-file", str(DATA / "context.txt")]) == 0
    out = capsys.readouterr().out
    assert "Quirk cost on 18 recorded step(s) from 3 trajectory file(s) (dspy, rlm_compat, rlms)" in out
    assert "| `imports_refused` |" in out and "| `upstream` |" in out
    rows = [line for line in out.splitlines() if line.startswith("| `")]
    assert len(rows) == len(QUIRKS) + 2
    assert main(["quirks", str(one_quirk_each), "--context", "some context", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["steps"] == 6 and len(data["quirks"]) == len(QUIRKS)
    by_name = {row["name"]: row for row in data["quirks"]}
    assert (by_name["no_write_guard"]["repaired"], by_name["no_write_guard"]["alone"]) == (1, 1)


def test_without_a_context_the_code_runs_over_an_empty_one(one_quirk_each: Path) -> None:
    table = quirk_table([one_quirk_each])
    assert table.context.startswith("empty") and table.steps == 6
    assert next(c for c in table.presets if c.name == "upstream").broken == 5


def test_an_unusable_trajectory_is_a_typed_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"type": "metadata"}\n{"type": "iteration", "code_blocks": [\n', encoding="utf-8")
    with pytest.raises(TrajectoryError, match="line 2: truncated or corrupt JSON"):
        quirk_table([broken])
    assert main(["quirks", str(broken)]) == 2
    assert "broken.jsonl: line 2" in capsys.readouterr().err
