"""Input loading is strict (a typo must never be recorded), and fixture directories diff by case."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlm_compat.tools.conformance import inputs
from rlm_compat.tools.conformance.fixtures import FixtureSet, write_jsonl
from rlm_compat.tools.conformance.recorder import diff_dirs


def _write(root: Path, kind: str, text: str) -> Path:
    (root / kind).mkdir(parents=True, exist_ok=True)
    path = root / kind / "topic.toml"
    path.write_text(text)
    return root


def test_shipped_inputs_load_with_full_ids_and_topics() -> None:
    cases = inputs.load_all()
    assert len(cases["repl"]) >= 400 and len(cases["loop"]) >= 30 and len(cases["parser"]) >= 5000
    for kind, found in cases.items():
        assert all(c.id.startswith(kind + ".") and c.kind == kind for c in found)
        assert [c.id for c in found] == sorted(c.id for c in found)
    loop = cases["loop"][0].as_input()
    assert loop["options"]["call"] in inputs.LOOP_CALLS and loop["topic"]


def test_a_loop_case_gets_defaults_and_extra_options_become_llm_kwargs(tmp_path: Path) -> None:
    root = _write(
        tmp_path,
        "loop",
        "[[case]]\nid = 'x.y'\nreplies = ['FINAL(\"a\")']\n"
        "options = { temperature = 0.5, max_iterations = 2 }\n",
    )
    (case,) = inputs.load_loop_cases(root)
    assert case.id == "loop.x.y" and case.topic == "topic"
    assert case.data["options"] == {
        "max_iterations": 2,
        "llm_kwargs": {"temperature": 0.5},
        "call": "acompletion",
        "prompt_version": "2fb46cc",
    }


@pytest.mark.parametrize(
    "kind,text,message",
    [
        ("repl", "[[case]]\nid = 'x.y'\nsteps = ['1']\nstep = 'typo'\n", "unknown key"),
        ("repl", "[[case]]\nid = 'x.y'\n", "missing key"),
        ("repl", "[[case]]\nid = 'Bad Id'\nsteps = ['1']\n", "dotted lower-case"),
        ("repl", "[[case]]\nid = 'x.y'\nsteps = []\n", "non-empty list"),
        ("repl", "[[case]]\nid = 'x.y'\nsteps = ['1']\noptions = { timout = 1 }\n", "unknown key"),
        ("repl", "[[case]]\nid = 'x.y'\nsteps = ['1']\nenv = { m = { '$module' = 'nope_mod' } }\n", "env"),
        (
            "repl",
            "[[case]]\nid = 'x.y'\nsteps = ['1']\n[[case]]\nid = 'x.y'\nsteps = ['2']\n",
            "duplicate id",
        ),
        ("repl", "[[cases]]\nid = 'x.y'\n", "top-level"),
        ("repl", "[[case]\n", "topic.toml"),
        ("loop", "[[case]]\nid = 'x.y'\nreplies = ['a']\noptions = { call = 'run' }\n", "options.call"),
        (
            "loop",
            "[[case]]\nid = 'x.y'\nreplies = ['a']\noptions = { prompt_version = 'v9' }\n",
            "prompt_version",
        ),
        ("loop", "[[case]]\nid = 'x.y'\nreplies = ['a']\noptions = { max_depth = true }\n", "max_depth"),
    ],
)
def test_malformed_inputs_are_refused_with_file_and_case(
    tmp_path: Path, kind: str, text: str, message: str
) -> None:
    root = _write(tmp_path, kind, text)
    load = inputs.load_repl_cases if kind == "repl" else inputs.load_loop_cases
    with pytest.raises(inputs.InputError, match=message) as raised:
        load(root)
    assert "topic.toml" in str(raised.value)


def test_diff_dirs_reports_case_level_changes(tmp_path: Path) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    for root in (old, new):
        root.mkdir()
        (root / "PROVENANCE.json").write_text(json.dumps({"format": 1}))
    line = {"id": "repl.a.b", "input": {"id": "repl.a.b"}, "expected": {"steps": []}}
    write_jsonl(old / "repl.py3.11.jsonl", [line, {**line, "id": "repl.a.gone"}])
    write_jsonl(
        new / "repl.py3.11.jsonl",
        [{**line, "expected": {"steps": [{"hang": True}]}}, {**line, "id": "repl.a.new"}],
    )
    assert diff_dirs(old, old) == []
    assert diff_dirs(old, new) == [
        "repl.py3.11.jsonl: repl.a.b differs in ['expected']",
        "repl.py3.11.jsonl: repl.a.gone no longer recorded",
        "repl.py3.11.jsonl: repl.a.new is new",
    ]
    (new / "PROVENANCE.json").write_text(json.dumps({"format": 2}))
    assert diff_dirs(old, new)[0] == "PROVENANCE.json: differs (keys format)"


def test_fixture_selection_falls_back_to_the_nearest_version(tmp_path: Path) -> None:
    for name in ("repl.py3.11.jsonl", "repl.py3.13.jsonl", "parser.jsonl"):
        (tmp_path / name).write_text("")
    fixtures = FixtureSet.open(tmp_path)
    assert fixtures.select("repl", "3.13")[1:] == ("3.13", None)
    path, version, note = fixtures.select("repl", "3.14")
    assert path == tmp_path / "repl.py3.13.jsonl"
    assert version == "3.13" and note and "nearest" in note
    assert fixtures.select("repl", "3.10")[1] == "3.11"
    assert fixtures.select("parser", "3.12")[0] == tmp_path / "parser.jsonl"
    assert fixtures.select("loop", "3.12") == (None, None, f"no loop fixtures in {tmp_path}")
