"""Profile fixed gated against the CPython reference executor (issue 11's second oracle).

The reference recording of the running Python (``reference_fixtures/repl.cpython3.X.jsonl``)
holds what plain CPython answers to every REPL input of the conformance suite; fixed must answer
the same, or exactly what a registered restriction (``reference_fixtures/restrictions.toml``)
says, with its reason. The gate's own rules (unregistered difference, unexpected pass, wrong
outcome, unused pattern) are tested on small synthetic recordings.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from rlm_compat.conformance import inputs, oracle, reference

ROOT = Path(__file__).resolve().parents[1]
REF_DIR = ROOT / "reference_fixtures"


def test_recordings_cover_every_supported_python_and_every_input() -> None:
    provenance = json.loads((REF_DIR / "PROVENANCE.json").read_text())
    ids = {c.id for c in inputs.load_repl_cases()}
    for minor in (10, 11, 12, 13):
        name = f"repl.cpython3.{minor}.jsonl"
        assert name in provenance["fixtures"], name
        recorded = oracle.load_reference(REF_DIR, (3, minor))
        assert set(recorded) == ids, (
            f"{name}: re-record with `python -m rlm_compat.conformance.oracle record`"
        )
        assert provenance["fixtures"][name]["python"].startswith(f"3.{minor}.")


def test_recordings_are_current() -> None:
    """The recording was made by this reference executor from these inputs."""
    provenance = json.loads((REF_DIR / "PROVENANCE.json").read_text())
    assert provenance["reference_sha256"] == oracle._sha256(Path(reference.__file__))
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


def test_reference_script_runs_each_case_in_a_fresh_child() -> None:
    import subprocess

    cases = [
        {
            "id": "a",
            "steps": ["import decimal\ndecimal.getcontext().prec = 3\nprint(decimal.Decimal(1) / 7)"],
        },
        {"id": "b", "steps": ["import decimal\nprint(decimal.Decimal(1) / 7)"]},
        {
            "id": "c",
            "steps": ["while True:\n    try:\n        pass\n    except BaseException:\n        pass"],
            "options": {"timeout": 0.3},
        },
    ]
    payload = "".join(json.dumps(c) + "\n" for c in cases)
    done = subprocess.run(
        [sys.executable, "-I", reference.__file__], input=payload, capture_output=True, text=True, timeout=120
    )
    results = {r["id"]: r["expected"] for r in map(json.loads, done.stdout.split("\n")[:-1])}
    assert results["a"]["steps"][0]["output"] == "0.143"
    assert results["b"]["steps"][0]["output"] == "0.1428571428571428571428571429"
    steps = results["c"]["steps"]  # the alarm repeats until it lands outside the handler, or a kill
    assert results["c"].get("hang") is True or steps[0]["error"]["type"] == "REPLTimeoutError"
