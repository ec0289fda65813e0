"""Deviations registry strictness, classification, reports and the CLI, on synthetic fixtures."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from rlm_compat.tools import ToolUsageError
from rlm_compat.tools.cli import main
from rlm_compat.tools.conformance import result_diff as compare
from rlm_compat.tools.conformance.adapters import ProfileAdapter
from rlm_compat.tools.conformance.deviations import DeviationError, Registry
from rlm_compat.tools.conformance.fixtures import FixtureSet, write_jsonl
from rlm_compat.tools.conformance.implementations import make_adapter
from rlm_compat.tools.conformance.report import render_json, render_markdown, render_summary
from rlm_compat.tools.conformance.suite_runner import Progress, run_conformance

REASON = "a sentence long enough to tell a reader why this differs"


def _repl_line(case_id: str, steps: list[str], expected: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": case_id,
        "input": {"id": case_id, "topic": case_id.split(".")[1], "steps": steps},
        "expected": {"steps": expected},
    }


def _fixtures(tmp_path: Path, registry: str) -> FixtureSet:
    """Two REPL cases with hand-made expectations, and an empty parser/loop set."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    lines = [
        # What every profile does: plain assignment and a trailing expression.
        _repl_line("repl.syn.same", ["x = 2\nx * 3"], [{"output": "6", "env": {"x": 2}}]),
        # A made-up upstream result nobody reproduces.
        _repl_line("repl.syn.other", ["y = 1"], [{"output": "something else", "env": {"y": 1}}]),
    ]
    for version in ("3.10", "3.11", "3.12", "3.13"):
        write_jsonl(tmp_path / f"repl.py{version}.jsonl", lines)
    (tmp_path / "PROVENANCE.json").write_text("{}")
    (tmp_path / "deviations.toml").write_text(registry)
    return FixtureSet.open(tmp_path)


def _toml(value: Any) -> str:
    """A TOML inline value for simple JSON data (strings, ints, bools, lists, tables)."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value)


def _statuses(report: Any) -> dict[tuple[str, str], str]:
    return {(impl.name, r.id): r.status for impl in report.implementations for r in impl.results}


def _run(fixtures: FixtureSet) -> Any:
    adapters = [ProfileAdapter("upstream"), ProfileAdapter("fixed")]
    return run_conformance(adapters, fixtures, kinds=["repl"], progress_enabled=False)


def test_unregistered_difference_is_unexplained_and_fails(tmp_path: Path) -> None:
    report = _run(_fixtures(tmp_path, ""))
    statuses = _statuses(report)
    assert statuses[("rlm_compat-upstream", "repl.syn.same")] == "pass"
    assert statuses[("rlm_compat-upstream", "repl.syn.other")] == "unexplained"
    assert report.failed


def test_registered_difference_is_explained(tmp_path: Path) -> None:
    registry = f"""
[[deviation]]
cases = ["repl.syn.other"]
profile = ["upstream", "fixed"]
kind = "safety"
reason = "{REASON}"
"""
    report = _run(_fixtures(tmp_path, registry))
    assert _statuses(report)[("rlm_compat-fixed", "repl.syn.other")] == "deviation"
    assert not report.failed
    assert "#1" in render_markdown(report)


def test_registered_case_that_now_matches_is_an_unexpected_pass(tmp_path: Path) -> None:
    registry = f"""
[[deviation]]
cases = ["repl.syn.s*", "repl.syn.other"]
profile = "fixed"
kind = "fix"
reason = "{REASON}"
"""
    report = _run(_fixtures(tmp_path, registry))
    statuses = _statuses(report)
    assert statuses[("rlm_compat-fixed", "repl.syn.same")] == "unexpected-pass"
    assert statuses[("rlm_compat-upstream", "repl.syn.other")] == "unexplained"  # not registered there
    assert report.failed
    assert "UNEXPECTED-PASS: rlm_compat-fixed: repl.syn.same" in render_summary(report)


def test_registered_expected_result_must_also_match(tmp_path: Path) -> None:
    good = {"steps": [{"output": "Code executed successfully (no output)", "env": {"y": 1}}]}
    bad = {"steps": [{"output": "nope", "env": {"y": 1}}]}
    for expected, status in ((good, "deviation"), (bad, "unexplained")):
        registry = f"""
[[deviation]]
cases = ["repl.syn.other"]
profile = "fixed"
kind = "fix"
reason = "{REASON}"
expected = {_toml(expected)}
"""
        report = run_conformance(
            [ProfileAdapter("fixed")], _fixtures(tmp_path, registry), kinds=["repl"], progress_enabled=False
        )
        assert _statuses(report)[("rlm_compat-fixed", "repl.syn.other")] == status


def test_stale_pattern_is_a_registry_problem(tmp_path: Path) -> None:
    registry = f"""
[[deviation]]
cases = ["repl.nothing.*"]
profile = "fixed"
kind = "fix"
reason = "{REASON}"
"""
    fixtures = _fixtures(tmp_path, registry)
    report = run_conformance([ProfileAdapter("fixed")], fixtures, progress_enabled=False)
    assert report.registry_problems == ["deviation #1: pattern 'repl.nothing.*' matches no recorded case"]
    assert report.failed


@pytest.mark.parametrize(
    "entry,message",
    [
        (
            'cases = ["a.b"]\nprofile = "upstream"\nkind = "fix"\nreason = "' + REASON + '"',
            "may only register",
        ),
        ('cases = ["a.b"]\nprofile = "fixed"\nkind = "fix"\nreason = "because"', "full sentence"),
        ('cases = ["a.b"]\nprofile = "fixed"\nkind = "oops"\nreason = "' + REASON + '"', "kind must"),
        (
            'cases = ["a.*"]\nprofile = "fixed"\nkind = "fix"\nreason = "' + REASON + '"\nexpected = {}',
            "exactly one case id",
        ),
        (
            'cases = ["a.b"]\nprofile = "fixed"\nkind = "fix"\nreason = "' + REASON + '"\nwhy = 1',
            "unknown key",
        ),
        ('cases = []\nprofile = "fixed"\nkind = "fix"\nreason = "' + REASON + '"', "non-empty"),
        ('profile = "fixed"\nkind = "fix"\nreason = "' + REASON + '"', "missing 'cases'"),
    ],
)
def test_malformed_entries_are_refused(entry: str, message: str) -> None:
    with pytest.raises(DeviationError, match=message):
        Registry.parse("[[deviation]]\n" + entry)


def test_overlapping_entries_are_refused_unless_pythons_are_disjoint() -> None:
    two = f"""
[[deviation]]
cases = ["repl.a.*"]
profile = "fixed"
kind = "fix"
reason = "{REASON}"
pythons = ["3.11"]
[[deviation]]
cases = ["repl.a.b"]
profile = "fixed"
kind = "runtime-difference"
reason = "{REASON}"
pythons = ["PY"]
"""
    disjoint = Registry.parse(two.replace("PY", "3.12"))
    assert disjoint.check_against(["repl.a.b"]) == []
    assert disjoint.lookup("repl.a.b", "fixed", "3.12") is not None
    assert disjoint.lookup("repl.a.b", "fixed", "3.13") is None
    clash = Registry.parse(two.replace("PY", "3.11"))
    assert clash.check_against(["repl.a.b"]) == ["repl.a.b (fixed) is matched by several entries: #1, #2"]
    with pytest.raises(DeviationError):
        clash.lookup("repl.a.b", "fixed", "3.11")


def test_subclass_errors_conform_but_messages_must_match() -> None:
    expected = {"steps": [{"error": {"type": "REPLError", "message": "m"}, "env": {}}]}
    sub = {
        "steps": [
            {
                "error": {
                    "type": "REPLSecurityError",
                    "message": "m",
                    "isa": ["REPLSecurityError", "REPLError", "Exception"],
                },
                "env": {},
            }
        ]
    }
    assert compare.compare("repl", expected, sub) is None
    other = json.loads(json.dumps(sub))
    other["steps"][0]["error"]["message"] = "n"
    assert compare.compare("repl", expected, other) == "step 1 error.message: expected 'm', got 'n'"
    unrelated = {
        "steps": [
            {"error": {"type": "ValueError", "message": "m", "isa": ["ValueError", "Exception"]}, "env": {}}
        ]
    }
    assert "error.type" in str(compare.compare("repl", expected, unrelated))


def test_semantic_mode_ignores_messages_and_placeholders() -> None:
    expected = {
        "steps": [
            {"output": "Code executed successfully (no output)", "env": {"x": 1, "_print": {"$opaque": "P"}}},
            {"error": {"type": "REPLError", "message": "Execution error: boom"}, "env": {"x": 1}},
            {"hang": True},
        ]
    }
    peer = {
        "steps": [
            {"output": "", "env": {"x": 1}},
            {"error": {"type": "ZeroDivisionError", "message": "division by zero"}, "env": {"x": 1}},
            {"hang": True},
        ]
    }
    assert compare.compare("repl", expected, peer, "semantic") is None
    assert compare.compare("repl", expected, peer, "exact") is not None
    peer["steps"][0]["env"] = {"x": 2}
    assert compare.compare("repl", expected, peer, "semantic") == ".steps[0].env.x: expected 1, got 2"
    rlms = {"answer": "a"}
    assert (
        compare.compare(
            "parser",
            {"is_final": True, "parse_response": "a", "extract_final": "a", "extract_final_var": None},
            rlms,
            "semantic",
        )
        is None
    )


def test_nothing_after_a_recorded_hang_is_compared() -> None:
    expected = {"steps": [{"output": "1", "env": {}}, {"hang": True}]}
    timed_out = {
        "steps": [
            {"output": "1", "env": {}},
            {"error": {"type": "REPLTimeoutError", "message": "t"}, "env": {}},
            {"output": "later", "env": {}},
        ]
    }
    assert str(compare.compare("repl", expected, timed_out)).startswith("step 2: expected hang, got error")
    assert compare.compare("repl", expected, {"steps": [{"output": "1", "env": {}}, {"hang": True}]}) is None


def test_progress_bar_draws_only_when_enabled() -> None:
    quiet, loud = io.StringIO(), io.StringIO()
    for stream, enabled in ((quiet, None), (loud, True)):
        bar = Progress(4, stream, enabled)
        for _ in range(4):
            bar.advance(label="case")
        bar.close()
    assert quiet.getvalue() == ""  # StringIO is not a terminal
    assert "[" + "#" * 30 + "] 4/4" in loud.getvalue()


def test_unknown_implementation_and_missing_python_are_clear_errors() -> None:
    with pytest.raises(ToolUsageError, match="unknown implementation"):
        make_adapter("nope")
    with pytest.raises(ToolUsageError, match="own venv"):
        make_adapter("rlms-0.1.1")
    with pytest.raises(ToolUsageError, match="needs the checkout"):
        make_adapter("ysz-2fb46cc", python="python3")


def test_cli_writes_reports_and_exits_by_result(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fixtures = _fixtures(tmp_path / "fx", "")
    md, js = tmp_path / "out.md", tmp_path / "out.json"
    code = main(
        [
            "conformance",
            "--fixtures",
            str(fixtures.root),
            "--report",
            str(md),
            "--json",
            str(js),
            "--cases",
            "repl.syn.same",
        ]
    )
    assert code == 0
    data = json.loads(js.read_text())
    assert [i["counts"]["pass"] for i in data["implementations"]] == [1, 1]
    assert "`repl.syn.same`" in md.read_text()
    assert "OK" in capsys.readouterr().out
    assert main(["conformance", "--fixtures", str(fixtures.root), "--quiet"]) == 1
    assert json.loads(render_json(_run(fixtures)))["failed"] is True


def test_a_named_implementation_that_cannot_start_fails_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 25 item 6: an ungated implementation the user named that never starts is no "OK"."""
    fixtures = _fixtures(tmp_path / "fx", "")
    js = tmp_path / "out.json"
    args = ["conformance", "--fixtures", str(fixtures.root), "--cases", "repl.syn.same", "--json", str(js)]
    assert main([*args, "--impl", "fixed", "--impl", "bad=/bin/false"]) == 1
    out = capsys.readouterr().out
    assert "FAILED: bad could not start (none of its cases ran)" in out
    assert out.rstrip().endswith("FAILED")
    bad = json.loads(js.read_text())["implementations"][1]
    assert bad["name"] == "bad" and "Error" in bad["start_error"]  # DriverError or ProtocolError: a race
    assert main([*args, "--impl", "fixed"]) == 0


def test_attribution_names_the_switch_behind_a_fixed_difference(tmp_path: Path) -> None:
    from rlm_compat.profiles import QUIRKS
    from rlm_compat.tools.conformance.attribution import (
        Attribution,
        attribute_fixed,
        render_suggestions,
        switch_documentation,
    )

    assert set(switch_documentation()) == set(QUIRKS)
    case = {"id": "repl.syn.inplace", "topic": "syn", "steps": ["x = 1\nx += 1", "y = 2\ny"]}
    # "Recorded" here = what profile upstream does, so only switches can make fixed differ.
    recorded = ProfileAdapter("upstream").run("repl", case)["result"]
    for step in recorded["steps"]:
        step.get("error", {}).pop("isa", None)  # the recorder never writes it
    line = {"id": case["id"], "input": case, "expected": recorded}
    for version in ("3.10", "3.11", "3.12", "3.13"):
        write_jsonl(tmp_path / f"repl.py{version}.jsonl", [line])
    report = run_conformance(
        [ProfileAdapter("fixed")], FixtureSet.open(tmp_path), kinds=["repl"], progress_enabled=False
    )
    assert report.implementations[0].results[0].status == "unexplained"
    attribution = attribute_fixed(report, {case["id"]: line}, "3.11")
    ((switches, cases),) = attribution.by_switches.items()
    assert "no_inplace_guard" in switches and "stale_print_collector" not in switches
    assert cases == ["repl.syn.inplace"] and attribution.unexplained == []
    text = render_suggestions([attribution], ["3.11", "3.12"])
    assert 'pythons = ["3.11"]' in text and "WARNING: no attribution from Python 3.12" in text
    again = Attribution.from_json(json.loads(json.dumps(attribution.to_json())))
    both = render_suggestions([attribution, Attribution("3.12", again.by_switches, [])], ["3.11", "3.12"])
    assert "pythons" not in both and "WARNING" not in both
    entry = Registry.parse(both).entries[0]
    assert entry.kind == "fix" and entry.profiles == ("fixed",) and "no_inplace_guard" in entry.reason
