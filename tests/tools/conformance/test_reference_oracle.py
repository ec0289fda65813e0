"""Profile fixed gated against the CPython reference executor (issue 11's second oracle).

The reference recording of the running Python (``reference_fixtures/repl.cpython3.X.jsonl``)
holds what plain CPython answers to every REPL input of the conformance suite; fixed must answer
the same, or exactly what a registered restriction (``reference_fixtures/restrictions.toml``)
says, with its reason. The gate's own rules (unregistered difference, unexpected pass, wrong
outcome, unused pattern) are tested on small synthetic recordings.
"""

from __future__ import annotations

import json
import platform
import sys
from pathlib import Path
from typing import Any

import pytest
from locations import ROOT

from rlm_compat.tools.conformance import inputs, oracle, reference
from rlm_compat.tools.conformance.adapters import ProfileAdapter
from rlm_compat.tools.conformance.fixtures import FixtureSet, write_jsonl
from rlm_compat.tools.conformance.implementations import REGISTRY, make_adapter
from rlm_compat.tools.conformance.report import render_json, render_markdown, render_summary
from rlm_compat.tools.conformance.suite_runner import run_conformance

ROOT = ROOT
REF_DIR = ROOT / "reference_fixtures"


def test_recordings_cover_every_supported_python_and_every_input() -> None:
    provenance = json.loads((REF_DIR / "PROVENANCE.json").read_text())
    ids = {c.id for c in inputs.load_repl_cases()}
    for minor in (10, 11, 12, 13):
        name = f"repl.cpython3.{minor}.jsonl"
        assert name in provenance["fixtures"], name
        recorded = oracle.load_reference(REF_DIR, (3, minor))
        assert set(recorded) == ids, f"{name}: re-record with `rlm-compat oracle record`"
        assert provenance["fixtures"][name]["python"].startswith(f"3.{minor}.")


def test_recordings_are_current() -> None:
    """The recording was made by this reference executor from these inputs."""
    provenance = json.loads((REF_DIR / "PROVENANCE.json").read_text())
    for key, digest in oracle.source_hashes().items():
        assert provenance[key] == digest, f"{key}: re-record the reference fixtures"
    current = {str(p.relative_to(p.parents[2])): oracle._sha256(p) for p in inputs.input_files("repl")}
    assert provenance["inputs"] == current, "inputs changed: re-record the reference fixtures"


def test_restrictions_name_a_reason_and_an_outcome() -> None:
    restrictions = oracle.load_restrictions(REF_DIR / "restrictions.toml")
    assert restrictions
    for r in restrictions:
        assert r.reason in oracle.REASONS
        assert r.expected


def test_fixed_behaves_as_cpython_minus_registered_restrictions() -> None:
    """Every REPL input, profile fixed (inline) against the recording of this Python."""
    report = oracle.gate(
        oracle.load_reference(REF_DIR), oracle.load_restrictions(REF_DIR / "restrictions.toml")
    )
    assert report.ok, report.summary()
    assert len(report.passed) > 5 * len(report.restricted)


# --- the gate's rules, on synthetic recordings ------------------------------------------------


def _item(case_id: str, code: str, expected_steps: list[dict[str, Any]]) -> dict[str, Any]:
    case = {"id": case_id, "topic": "t", "steps": [code], "options": {"timeout": 5}}
    return {"id": case_id, "input": case, "expected": {"steps": expected_steps}}


def _restriction(tmp_path: Path, body: str) -> list[oracle.Restriction]:
    path = tmp_path / "r.toml"
    path.write_text(body)
    return oracle.load_restrictions(path)


_OPEN_RULE = """
[[restriction]]
reason = "security"
why = "no file system in the sandbox, the data is in context"
cases = ["t.open"]
expected = { type = "REPLSecurityError", message = "`context`" }
"""


def test_gate_passes_equal_and_registered_differences(tmp_path: Path) -> None:
    ref = {
        "t.same": _item("t.same", "print(1 + 1)", [{"output": "2", "env": {}}]),
        "t.open": _item(
            "t.open", "open('x')", [{"error": {"type": "REPLError", "message": "No such file"}, "env": {}}]
        ),
    }
    report = oracle.gate(ref, _restriction(tmp_path, _OPEN_RULE))
    assert report.ok, report.summary()
    assert report.passed == ["t.same"] and report.restricted == ["t.open"]


def test_gate_fails_an_unregistered_difference(tmp_path: Path) -> None:
    ref = {"t.other": _item("t.other", "print(2)", [{"output": "3", "env": {}}])}
    report = oracle.gate(ref, [])
    assert not report.ok and report.unexplained


def test_gate_fails_an_unexpected_pass_and_an_unused_pattern(tmp_path: Path) -> None:
    ref = {"t.open": _item("t.open", "print(2)", [{"output": "2", "env": {}}])}
    rules = _restriction(tmp_path, _OPEN_RULE + _OPEN_RULE.replace('"t.open"', '"t.nothing*"'))
    report = oracle.gate(ref, rules)
    assert report.unexpected_pass and report.unused_patterns and not report.ok


def test_gate_fails_a_registered_case_with_another_outcome(tmp_path: Path) -> None:
    ref = {"t.open": _item("t.open", "1/0", [{"output": "x", "env": {}}])}
    report = oracle.gate(ref, _restriction(tmp_path, _OPEN_RULE))
    assert report.wrong_outcome and not report.ok


@pytest.mark.parametrize(
    "body",
    [
        '[[restriction]]\nreason = "taste"\nwhy = "because it looks nicer this way"\ncases = ["a"]\n'
        'expected = { output = "x" }',
        '[[restriction]]\nreason = "security"\nwhy = "x"\ncases = ["a"]\nexpected = { output = "x" }',
        '[[restriction]]\nreason = "security"\nwhy = "a long enough sentence here"\ncases = ["a"]\n'
        'expected = { type = "X" }',
        '[[restriction]]\nreason = "security"\nwhy = "a long enough sentence here"\ncases = []\n'
        'expected = { output = "x" }',
        '[[restriction]]\nreason = "security"\nwhy = "a long enough sentence here"\ncases = ["a"]\n'
        'expected = { output = "(" }',
    ],
    ids=["reason", "why", "expected", "cases", "regex"],
)
def test_malformed_restrictions_are_refused(tmp_path: Path, body: str) -> None:
    with pytest.raises(oracle.OracleError):
        _restriction(tmp_path, body)


# --- the reference executor itself ------------------------------------------------------------


def _ref(code: str, env: dict[str, Any] | None = None, **options: Any) -> str:
    return reference.ReferenceExecutor(**options).execute(code, {} if env is None else env)


def test_reference_rules() -> None:
    env: dict[str, Any] = {}
    assert _ref("x = 2\n[x * i for i in range(3)]", env) == "[0, 2, 4]"
    assert env["x"] == 2 and "__builtins__" not in env
    assert _ref("print('a')\nNone") == "a"
    assert _ref("") == reference.NO_CODE
    assert _ref("y = 1") == reference.NO_OUTPUT
    assert _ref("Counter('aab').most_common(1)") == "[('a', 2)]"  # docs/repl.md's injected names
    assert _ref("text\n```python\na = 1\n```\nmore\n```py\nprint(a + 1)\n```") == "2"
    assert _ref("print('x' * 30)", max_output_chars=10).endswith(
        "[Output truncated: 31 chars total, showing first 10]"
    )


def test_reference_errors_name_type_and_line() -> None:
    with pytest.raises(
        reference.ReferenceStepError,
        match=r"^Execution error: ZeroDivisionError: division by zero \(line 2\)$",
    ):
        _ref("a = 1\n1 / 0")
    with pytest.raises(reference.ReferenceStepError, match=r"line 1 of code block 2"):
        _ref("```python\nok = 1\n```\n```python\nundefined_name\n```")
    with pytest.raises(reference.ReferenceStepError, match=r"^Execution error: SyntaxError: .* \(line 1\)$"):
        _ref("x = (")


@pytest.mark.skipif(not hasattr(__import__("signal"), "setitimer"), reason="needs SIGALRM")
def test_reference_timeout() -> None:
    with pytest.raises(reference.ReferenceTimeout, match=r"exceeded the 0\.2 s timeout"):
        _ref("while True:\n    pass", timeout=0.2)


def test_registered_reference_runs_each_case_in_a_fresh_child() -> None:
    """``cpython-reference`` through the protocol: a forked child per case, stdin empty, a
    swallowed alarm killed as a hang, site-packages out of reach."""
    entry = REGISTRY["cpython-reference"]
    assert entry.oracle == "cpython" and entry.gated and entry.kinds == frozenset({"repl"})
    cases = [
        {
            "id": "a",
            "steps": ["import decimal\ndecimal.getcontext().prec = 3\nprint(decimal.Decimal(1) / 7)"],
        },
        {"id": "b", "steps": ["import decimal\nprint(decimal.Decimal(1) / 7)"]},
        {"id": "c", "steps": ["input()"]},
        {"id": "d", "steps": ["import pytest"]},
        {
            "id": "e",
            "steps": ["while True:\n    try:\n        pass\n    except BaseException:\n        pass"],
            "options": {"timeout": 0.3},
        },
    ]
    adapter = make_adapter("cpython-reference", step_limit=3, case_limit=30)
    try:
        info = adapter.start()
        results = [o["result"] for o in adapter.run_many("repl", cases)]
    finally:
        adapter.stop()
    assert info["implementation"] == "cpython-reference" and info["python"] == platform.python_version()
    assert results[0]["steps"][0]["output"] == "0.143"
    assert results[1]["steps"][0]["output"] == "0.1428571428571428571428571429"
    assert "EOFError" in results[2]["steps"][0]["error"]["message"]
    assert "ModuleNotFoundError: No module named 'pytest'" in results[3]["steps"][0]["error"]["message"]
    assert results[4]["steps"][-1] == {"hang": True} or results[4]["steps"][0]["error"]["type"] == (
        "REPLTimeoutError"
    )


def _reference_set(tmp_path: Path, lines: list[dict[str, Any]], rules: str) -> FixtureSet:
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    tmp_path.mkdir()
    (tmp_path / f"repl.cpython{version}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (tmp_path / "restrictions.toml").write_text(rules)
    return oracle.reference_fixture_set(tmp_path)


def _gated(fixtures: FixtureSet, reference: FixtureSet) -> Any:
    """A REPL-only conformance run of profile fixed (inline) with ``reference`` as CPython oracle."""
    adapters = [ProfileAdapter("fixed", isolation="inline")]
    return run_conformance(adapters, fixtures, kinds=["repl"], reference=reference, progress_enabled=False)


def test_conformance_run_gates_fixed_against_the_cpython_oracle(tmp_path: Path) -> None:
    """The runner adds ``rlm_compat-fixed vs CPython``; a registered restriction is ≈, an
    unregistered difference fails the run, and the report shows both oracles."""
    upstream = tmp_path / "up"
    upstream.mkdir()
    same = _item("repl.t.same", "print(1 + 1)", [{"output": "2", "env": {}}])
    opened = _item(
        "repl.t.open", "open('x')", [{"error": {"type": "REPLError", "message": "No such file"}, "env": {}}]
    )
    write_jsonl(upstream / f"repl.py{sys.version_info[0]}.{sys.version_info[1]}.jsonl", [same, opened])
    (upstream / "PROVENANCE.json").write_text("{}")
    (upstream / "deviations.toml").write_text("")
    fixtures = FixtureSet.open(upstream)
    rule = _OPEN_RULE.replace('"t.open"', '"repl.t.open"')
    good = _reference_set(tmp_path / "ok", [same, opened], rule)
    report = _gated(fixtures, good)
    runs = {r.name: r for r in report.implementations}
    gated = runs["rlm_compat-fixed-inline vs CPython"]
    assert gated.oracle == "cpython" and gated.gated
    assert {r.id: r.status for r in gated.results} == {"repl.t.same": "pass", "repl.t.open": "deviation"}
    assert not report.restriction_problems
    text = render_markdown(report)
    assert "## The CPython oracle" in text and 'id="restriction-1"' in text and "[R1](#restriction-1)" in text
    assert json.loads(render_json(report))["restrictions"][0]["reason"] == "security"

    unregistered = _reference_set(tmp_path / "bad", [same, opened], "")
    report = _gated(fixtures, unregistered)
    assert report.failed
    assert "UNEXPLAINED: rlm_compat-fixed-inline vs CPython: repl.t.open" in render_summary(report)

    stale = _reference_set(
        tmp_path / "stale", [same, opened], rule + rule.replace('"repl.t.open"', '"repl.t.gone"')
    )
    report = _gated(fixtures, stale)
    assert report.failed and report.restriction_problems == ["restriction #2: repl.t.gone"]


def test_docs_list_every_restriction_with_its_reason() -> None:
    """docs/deviations.md's table has one row per restrictions.toml entry, in order, same reason."""
    import re

    text = (ROOT / "docs" / "deviations.md").read_text(encoding="utf-8")
    section = text.split("## Profile fixed against CPython", 1)[1]
    rows = re.findall(r"^\| R(\d+) \| (\w+) \|", section, flags=re.MULTILINE)
    restrictions = oracle.load_restrictions(REF_DIR / "restrictions.toml")
    assert [int(n) for n, _ in rows] == list(range(1, len(restrictions) + 1)), (
        "docs/deviations.md must list R1..Rn, one per [[restriction]] of restrictions.toml"
    )
    assert [reason for _, reason in rows] == [r.reason for r in restrictions]
