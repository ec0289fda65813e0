"""The recorded fixtures: schemas, ids, provenance, and agreement with the current inputs."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from upstream_checkout import missing

from rlm_compat.tools.conformance import inputs
from rlm_compat.tools.conformance.deviations import Registry as Deviations
from rlm_compat.tools.conformance.fixtures import (
    DEVIATIONS,
    PROVENANCE,
    FixtureSet,
    default_fixtures_dir,
    read_jsonl,
    sha256_file,
)
from rlm_compat.tools.conformance.recorder import Checkout, recorder_hashes, verify_provenance

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = default_fixtures_dir()
FIXTURES = FixtureSet.open(ROOT)
KINDS = ("repl", "parser", "loop")


def _schemas() -> dict[str, dict[str, Any]]:
    return {
        p.name.removesuffix(".schema.json"): json.loads(p.read_text())
        for p in sorted((ROOT / "schemas").glob("*.schema.json"))
    }


SCHEMAS = _schemas()
REGISTRY = Registry().with_resources([(s["$id"], Resource.from_contents(s)) for s in SCHEMAS.values()])


def _validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(SCHEMAS[name], registry=REGISTRY)


def _files() -> Iterator[tuple[str, Path]]:
    for kind in KINDS:
        for path in FIXTURES.files.get(kind, {}).values():
            yield kind, path


def test_every_kind_is_recorded_with_enough_cases() -> None:
    provenance = FIXTURES.provenance()
    counts = {name: meta["cases"] for name, meta in provenance["fixtures"].items()}
    for version in ("3.11", "3.12"):
        assert counts[f"repl.py{version}.jsonl"] >= 400
        assert counts[f"loop.py{version}.jsonl"] >= 30
    parser_counts = [n for name, n in counts.items() if name.startswith("parser")]
    assert parser_counts and min(parser_counts) >= 5000


def test_schemas_are_valid_schemas() -> None:
    assert set(SCHEMAS) >= {"value", "repl", "parser", "loop", "provenance", "deviations"}
    for schema in SCHEMAS.values():
        Draft202012Validator.check_schema(schema)


# once_per_ci: the fixture files are data, validated against their JSON schemas the same way by
# any interpreter (~15 s)
@pytest.mark.once_per_ci
@pytest.mark.parametrize("kind,path", list(_files()), ids=lambda x: getattr(x, "name", x))
def test_fixture_lines_match_their_schema(kind: str, path: Path) -> None:
    validator = _validator(kind)
    for line in read_jsonl(path):
        errors = sorted(validator.iter_errors(line), key=lambda e: list(e.absolute_path))
        assert not errors, f"{path.name} {line['id']}: {errors[0].message} at {list(errors[0].absolute_path)}"


@pytest.mark.parametrize(
    "kind,bad",
    [
        (
            "repl",
            {
                "id": "repl.x.y",
                "input": {"id": "repl.x.y", "topic": "x", "steps": ["1"]},
                "expected": {"steps": [{"output": "1"}]},
            },
        ),  # env missing
        (
            "repl",
            {
                "id": "repl.x.y",
                "input": {"id": "repl.x.y", "topic": "x", "steps": ["1"]},
                "expected": {"steps": [{"output": "1", "env": {"a": {"$tuple": [], "$set": []}}}]},
            },
        ),
        (
            "repl",
            {
                "id": "loop.x.y",
                "input": {"id": "repl.x.y", "topic": "x", "steps": ["1"]},
                "expected": {"steps": [{"hang": True}]},
            },
        ),  # id of another kind
        (
            "parser",
            {
                "id": "parser.a.b",
                "input": {"id": "parser.a.b", "topic": "a", "response": "", "env": {}},
                "expected": {
                    "extract_final": 1,
                    "extract_final_var": None,
                    "is_final": False,
                    "parse_response": None,
                },
            },
        ),
        (
            "loop",
            {
                "id": "loop.a.b",
                "input": {
                    "id": "loop.a.b",
                    "topic": "a",
                    "replies": [],
                    "options": {"call": "completion", "prompt_version": "2fb46cc"},
                },
                "expected": {"calls": [], "answer": "x", "error": {"type": "E", "message": ""}},
            },
        ),
    ],
)
def test_schemas_reject_malformed_lines(kind: str, bad: dict[str, Any]) -> None:
    assert list(_validator(kind).iter_errors(bad))


@pytest.mark.parametrize("kind,path", list(_files()), ids=lambda x: getattr(x, "name", x))
def test_ids_unique_sorted_and_well_formed(kind: str, path: Path) -> None:
    ids = [line["id"] for line in read_jsonl(path)]
    assert ids == sorted(ids), f"{path.name} is not sorted by id"
    assert len(ids) == len(set(ids)), f"{path.name} has duplicate ids"
    for line in read_jsonl(path):
        assert line["id"] == line["input"]["id"] and line["id"].startswith(kind + ".")
        if kind == "repl":
            steps = line["expected"]["steps"]
            hangs = [i for i, s in enumerate(steps) if s.get("hang")]
            assert hangs in ([], [len(steps) - 1]), f"{line['id']}: a hang must be the last step"
            assert len(steps) <= len(line["input"]["steps"])
            assert hangs or len(steps) == len(line["input"]["steps"])


def test_every_version_records_the_same_cases() -> None:
    for kind in KINDS:
        id_sets = {
            path.name: {line["id"] for line in read_jsonl(path)}
            for path in FIXTURES.files.get(kind, {}).values()
        }
        assert len({frozenset(s) for s in id_sets.values()}) == 1, f"{kind}: versions disagree"


def test_fixtures_are_recorded_from_the_current_inputs() -> None:
    """Editing an input (or the parser generator) without re-recording fails here."""
    current = inputs.load_all()
    for kind in KINDS:
        expected = {case.id: case.as_input() for case in current[kind]}
        for path in FIXTURES.files[kind].values():
            recorded = {line["id"]: line["input"] for line in read_jsonl(path)}
            missing = sorted(expected.keys() - recorded.keys())
            stale = sorted(recorded.keys() - expected.keys())
            changed = sorted(k for k in expected.keys() & recorded.keys() if expected[k] != recorded[k])
            assert not (missing or stale or changed), (
                f"{path.name} is out of date with the inputs — re-run `rlm-compat record`: "
                f"not recorded {missing[:5]}, no longer an input {stale[:5]}, changed {changed[:5]}"
            )


def test_provenance_validates_and_hashes_match() -> None:
    provenance = FIXTURES.provenance()
    errors = list(_validator("provenance").iter_errors(provenance))
    assert not errors, errors[0].message
    assert verify_provenance(FIXTURES) == []
    assert provenance["upstream"]["checkouts"]["2fb46cc"]["commit"].startswith("2fb46cc")


def test_provenance_names_the_current_recorder_and_inputs() -> None:
    """Fixtures must come from the recorder in this tree, fed the inputs in this tree."""
    provenance = FIXTURES.provenance()
    assert provenance["recorder"]["files"] == recorder_hashes(), (
        "the recorder changed since the fixtures were recorded: re-run `rlm-compat record`"
    )
    root = Path(inputs.__file__).parent
    for name, digest in provenance["inputs"].items():
        assert sha256_file(root / name) == digest, f"{name} changed since recording"


def test_hand_edited_fixture_is_detected(tmp_path: Path) -> None:
    for path in ROOT.iterdir():
        if path.is_file():
            (tmp_path / path.name).write_bytes(path.read_bytes())
    victim = tmp_path / "loop.py3.11.jsonl"
    victim.write_text(victim.read_text().replace('"answer":', '"answer": ', 1))
    problems = verify_provenance(FixtureSet.open(tmp_path))
    assert problems == ["loop.py3.11.jsonl: sha256 differs from PROVENANCE.json (edited by hand?)"]


# An implementation that enforces `timeout` (rlm_compat) waits it out on every case that hung
# upstream; at the default 5 s, six such cases once made the default conformance run a minute longer.
HANG_TIMEOUT_LIMIT = 1


def test_cases_that_hung_upstream_set_a_short_timeout() -> None:
    slow = sorted(
        {
            line["id"]
            for kind, path in _files()
            if kind == "repl"
            for line in read_jsonl(path)
            if any(step.get("hang") for step in line["expected"]["steps"])
            and line["input"].get("options", {}).get("timeout", 5) > HANG_TIMEOUT_LIMIT
        }
    )
    assert slow == [], f"set options = {{ timeout = {HANG_TIMEOUT_LIMIT} }} on these inputs: {slow}"


def test_deviations_file_is_valid_and_consistent() -> None:
    raw = tomllib.loads((ROOT / DEVIATIONS).read_text())
    errors = list(_validator("deviations").iter_errors(raw))
    assert not errors, errors[0].message
    registry = Deviations.load(ROOT / DEVIATIONS)
    ids = {line["id"] for _, path in _files() for line in read_jsonl(path)}
    assert registry.check_against(ids) == []


def _upstream_checkout() -> Path:
    path = os.environ.get("RLM_COMPAT_UPSTREAM")
    if not path:
        missing("RLM_COMPAT_UPSTREAM is not set (path to a ysz/recursive-llm 2fb46cc checkout)")
    return Path(path)


def test_upstream_file_hashes_match_the_live_checkout() -> None:
    checkout = Checkout.inspect(_upstream_checkout())
    if not checkout.commit.startswith("2fb46cc"):
        missing(f"RLM_COMPAT_UPSTREAM is at {checkout.commit[:12]}, not 2fb46cc")
    recorded = FIXTURES.provenance()["upstream"]["checkouts"]["2fb46cc"]
    assert recorded["commit"] == checkout.commit
    assert recorded["files"] == checkout.files
    assert PROVENANCE == "PROVENANCE.json"
