"""The second oracle: profile fixed against the CPython reference executor.

``record`` runs every REPL input of the conformance suite under :mod:`.reference` on each given
Python and writes ``reference_fixtures/repl.cpython3.X.jsonl`` plus ``PROVENANCE.json`` (who ran
what: interpreter, reference executor and inputs hashes). ``gate`` runs the same inputs through
an executor (profile fixed) and compares step by step with the recording of the running Python:
every difference must be covered by a ``[[restriction]]`` of ``restrictions.toml`` naming why
(``security`` or ``resource``) and what fixed answers instead (the error type and a message
pattern); a difference no restriction covers, a restriction whose case now matches CPython
("unexpected pass"), or a pattern that matches no case fails the gate.

Two observations are equal when their output texts are equal, or both are errors with the same
text, or both timed out (a hang in the reference is a timeout: it stops only by being killed);
the namespace left behind is compared too.
"""

from __future__ import annotations

import datetime
import fnmatch
import hashlib
import json
import platform
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import RLMError
from ..shared.package_paths import package_dir, shipped_data
from ..shared.tooling_errors import ToolError, ToolUsageError
from . import inputs, values
from .fixtures import FixtureSet

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]

__all__ = [
    "REASONS",
    "GateReport",
    "OracleError",
    "Restriction",
    "Verdict",
    "default_reference_dir",
    "gate",
    "judge",
    "load_reference",
    "load_restrictions",
    "record",
    "reference_fixture_set",
    "run_fixed",
    "source_hashes",
]

REASONS = ("security", "resource")
_HERE = Path(__file__).parent  # the recorder's own sources, hashed into each recording's provenance


class OracleError(ToolUsageError):
    """The reference fixtures or the restrictions registry are missing or malformed."""


def default_reference_dir() -> Path:
    """``reference_fixtures/`` beside the package (a checkout) or inside it (an installed wheel)."""
    found = shipped_data("_reference_fixtures", "reference_fixtures")
    if found is not None:
        return found
    raise OracleError(
        "no reference fixtures found (looked in rlm_compat/_reference_fixtures and ./reference_fixtures)"
    )


def _python_tag(version: Sequence[int]) -> str:
    return f"cpython{version[0]}.{version[1]}"


# --- recording -----------------------------------------------------------------------------------


_STEP_LIMIT = 10.0  # seconds without a step before a case is killed as a hang (timeouts are <= 5 s)
_CASE_LIMIT = 300.0


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def source_hashes() -> dict[str, str]:
    """sha256 of what produces a recording: the executor, the driver serving it, its codecs."""
    here = _HERE
    files = {
        "reference_sha256": here / "reference.py",
        "driver_sha256": here / "driver.py",
        "case_isolation_sha256": here / "case_isolation.py",
        "case_runs_sha256": here / "case_runs.py",
        "peer_backends_sha256": here / "peer_backends.py",
        "values_sha256": here / "values.py",
        "fences_sha256": package_dir() / "fences.py",
    }
    return {key: _sha256(path) for key, path in files.items()}


def _expected(outcome: dict[str, Any]) -> dict[str, Any]:
    """A recorded reference outcome: its steps, or the steps before a crash and the crash."""
    if "result" in outcome:
        result: dict[str, Any] = outcome["result"]
        return result
    if "failure" in outcome:
        return {"steps": outcome.get("partial", {}).get("steps", []), "crash": outcome["failure"]}
    raise OracleError(f"the reference executor skipped a case: {outcome.get('skip')}")


def record(pythons: Iterable[str], out_dir: Path, *, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Record every REPL input under the registered ``cpython-reference`` on each interpreter.

    It runs as every other implementation does (``driver.py --backend cpython-reference`` behind
    the protocol), each case in a forked child, so a recording is what a conformance run of
    ``--impl cpython-reference=PYTHON`` reproduces.
    """
    from .implementations import REGISTRY

    cases = inputs.load_repl_cases()
    out_dir.mkdir(parents=True, exist_ok=True)
    provenance: dict[str, Any] = {
        "format": 2,
        "oracle": "CPython reference executor (rlm_compat/tools/conformance/reference.py)",
        "implementation": "cpython-reference (driver.py --backend cpython-reference)",
        **source_hashes(),
        "inputs": {str(p.relative_to(_HERE)): _sha256(p) for p in sorted(inputs.input_files("repl"))},
        "recorded": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": platform.machine(),
        "step_limit": _STEP_LIMIT,
        "fixtures": {},
    }
    for python in pythons:
        entry = REGISTRY["cpython-reference"]
        adapter = entry.adapter(python, step_limit=_STEP_LIMIT, case_limit=_CASE_LIMIT)
        try:
            info = adapter.start()
            log(f"recording {len(cases)} REPL cases under CPython {info['python']} ({python})")
            outcomes = adapter.run_many("repl", [c.as_input() for c in cases])
        except (RLMError, ToolError) as exc:
            raise OracleError(f"the reference executor failed under {python}: {exc}") from None
        finally:
            adapter.stop()
        lines: list[dict[str, Any]] = [
            {"id": case.id, "input": case.as_input(), "expected": _expected(outcome)}
            for case, outcome in zip(cases, outcomes, strict=True)
        ]
        lines.sort(key=lambda x: x["id"])
        major, minor = (int(n) for n in str(info["python"]).split(".")[:2])
        name = f"repl.{_python_tag((major, minor))}.jsonl"
        text = "".join(json.dumps(x, ensure_ascii=False, sort_keys=True) + "\n" for x in lines)
        (out_dir / name).write_text(text, encoding="utf-8")
        provenance["fixtures"][name] = {
            "cases": len(lines),
            "python": info["python"],
            "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
        }
    (out_dir / "PROVENANCE.json").write_text(
        json.dumps(provenance, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    return provenance


def reference_fixture_set(ref_dir: Path | None = None) -> FixtureSet:
    """The reference recordings as a :class:`~.fixtures.FixtureSet` (REPL files by Python)."""
    ref_dir = ref_dir or default_reference_dir()
    found = FixtureSet(ref_dir)
    for path in sorted(ref_dir.glob("repl.cpython*.jsonl")):
        found.files.setdefault("repl", {})[path.name[len("repl.cpython") : -len(".jsonl")]] = path
    return found


def load_reference(
    ref_dir: Path | None = None, version: Sequence[int] | None = None
) -> dict[str, dict[str, Any]]:
    """The reference recording of one Python (the running one by default), by case id."""
    ref_dir = ref_dir or default_reference_dir()
    path = ref_dir / f"repl.{_python_tag(version or tuple(sys.version_info[:2]))}.jsonl"
    if not path.is_file():
        raise OracleError(
            f"no reference recording for this Python: {path} is missing; "
            "record it with `rlm-compat oracle record`"
        )
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        out[item["id"]] = item
    return out


# --- restrictions --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Restriction:
    """Where fixed deliberately differs from CPython, why, and what it answers instead."""

    cases: tuple[str, ...]
    reason: str
    why: str
    expected: dict[str, re.Pattern[str] | str]
    pythons: tuple[str, ...] = ()

    def covers(self, case_id: str, python: str) -> bool:
        if self.pythons and not any(_python_matches(spec, python) for spec in self.pythons):
            return False
        return any(fnmatch.fnmatchcase(case_id, pattern) for pattern in self.cases)

    def accepts(self, step: dict[str, Any]) -> bool:
        """Whether fixed's differing step is the registered outcome.

        ``{type, message}``: an error of that type (or a subclass) whose text matches;
        ``{output}``: a successful step whose output matches; ``{env}``: a step whose namespace
        (as canonical JSON) matches — for what fixed shows differently without failing.
        """
        expected = self.expected
        if "type" in expected:
            error = step.get("error")
            if not isinstance(error, dict) or expected["type"] not in error.get("isa", [error.get("type")]):
                return False
            return _search(expected["message"], error.get("message", ""))
        if "output" in expected:
            return "output" in step and _search(expected["output"], step["output"])
        return _search(expected["env"], json.dumps(step.get("env"), sort_keys=True))


def _python_matches(spec: str, python: str) -> bool:
    """``"3.12"``: that line; ``"3.12<3.12.9"``: that line while the running interpreter (the one
    profile fixed runs on) is older than 3.12.9 — for a restriction a later release makes moot."""
    line, _, below = spec.partition("<")
    if line != python:
        return False
    if not below:
        return True
    return tuple(sys.version_info[:3]) < tuple(int(part) for part in below.split("."))


_PYTHON_SPEC = re.compile(r"^3\.\d+(<3\.\d+\.\d+)?$")

_RESTRICTION_KEYS = {"cases", "reason", "why", "expected", "pythons"}
_EXPECTED_FORMS = ({"type", "message"}, {"output"}, {"env"})


def _search(pattern: re.Pattern[str] | str, text: Any) -> bool:
    return isinstance(pattern, re.Pattern) and pattern.search(str(text)) is not None


def load_restrictions(path: Path | None = None) -> list[Restriction]:
    """Parse and validate ``restrictions.toml`` (unknown keys, bad reasons, bad patterns are errors)."""
    path = path or default_reference_dir() / "restrictions.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise OracleError(f"{path}: {exc}") from None
    out = []
    for n, entry in enumerate(data.get("restriction", []), 1):
        where = f"{path.name} restriction #{n}"
        unknown = set(entry) - _RESTRICTION_KEYS
        if unknown:
            raise OracleError(f"{where}: unknown keys {sorted(unknown)}")
        if entry.get("reason") not in REASONS:
            raise OracleError(f"{where}: reason must be one of {REASONS}, not {entry.get('reason')!r}")
        expected = entry.get("expected")
        if not isinstance(expected, dict) or set(expected) not in _EXPECTED_FORMS:
            raise OracleError(
                f"{where}: expected = {{ type = ..., message = <regex> }}, {{ output = <regex> }} "
                "or {{ env = <regex> }} is required"
            )
        cases = entry.get("cases")
        if not isinstance(cases, list) or not cases or not all(isinstance(c, str) for c in cases):
            raise OracleError(f"{where}: cases must be a non-empty list of ids or globs")
        why = entry.get("why")
        if not isinstance(why, str) or len(why) < 20:
            raise OracleError(f"{where}: `why` must say, in a sentence, what would be unsafe")
        compiled: dict[str, re.Pattern[str] | str] = {}
        for key, text in expected.items():
            try:
                compiled[key] = str(text) if key == "type" else re.compile(str(text))
            except re.error as exc:
                raise OracleError(f"{where}: bad {key} pattern: {exc}") from None
        pythons = entry.get("pythons", [])
        if not isinstance(pythons, list) or not all(
            isinstance(p, str) and _PYTHON_SPEC.match(p) for p in pythons
        ):
            raise OracleError(f'{where}: pythons must be a list of "3.N" or "3.N<3.N.M"')
        out.append(Restriction(tuple(cases), entry["reason"], why, compiled, tuple(pythons)))
    return out


# --- running fixed and comparing -----------------------------------------------------------------


def run_fixed(case: dict[str, Any], isolation: str | None = "inline") -> dict[str, Any]:
    """One case through ``REPLExecutor(profile='fixed')``, recorded like the reference
    (``isolation`` None: the profile's own, a worker process)."""
    from ...errors import REPLError
    from ...repl import REPLExecutor

    env = values.decode(case.get("env", {}))
    steps = []
    options = dict(case.get("options", {}))
    with REPLExecutor(profile="fixed", isolation=isolation, **options) as executor:
        for code in case["steps"]:
            step: dict[str, Any]
            try:
                step = {"output": values.normalize_text(executor.execute(code, env))}
            except REPLError as exc:
                step = {
                    "error": {
                        "type": type(exc).__name__,
                        "isa": [c.__name__ for c in type(exc).__mro__],
                        "message": values.normalize_text(str(exc)),
                    }
                }
            step["env"] = {
                str(k): values.encode(_as_python_sees_it(v))
                for k, v in env.items()
                if not (isinstance(k, str) and k.startswith("__") and k.endswith("__"))
            }
            steps.append(step)
    return {"steps": steps}


def _as_python_sees_it(value: Any) -> Any:
    """A module proxy stands for its module (``import json`` binds "the json module" in both)."""
    import importlib

    from ...sandbox import ALLOWED_MODULES, ModuleProxy, real_module

    if isinstance(value, ModuleProxy):
        return real_module(value) or value
    # isolation="process": a proxy stays in the worker; the parent holds a named stand-in
    if (
        getattr(type(value), "__name__", "") == "WorkerObject"
        and getattr(value, "type_name", "") == "ModuleProxy"
    ):
        label = re.match(r"<module '([\w.]+)' \(sandboxed\)>", str(getattr(value, "worker_repr", "")))
        if label and label.group(1) in ALLOWED_MODULES:
            return importlib.import_module(label.group(1))
    return value


_TIMEOUT_TEXT = re.compile(r"^Execution error: TimeoutError: execution exceeded")


def _timed_out(step: dict[str, Any]) -> bool:
    error = step.get("error")
    return isinstance(error, dict) and (
        error.get("type") == "REPLTimeoutError" or bool(_TIMEOUT_TEXT.match(str(error.get("message", ""))))
    )


_KILLED = {"error": {"type": "REPLTimeoutError", "message": "(killed: a hang)"}}


def _reference_steps(expected: dict[str, Any], count: int) -> list[dict[str, Any] | None]:
    """The recorded steps, a hang (killed by the driver: ``{"hang": true}``) read as a timeout."""
    steps: list[dict[str, Any] | None] = [_KILLED if s.get("hang") else s for s in expected.get("steps", [])]
    while len(steps) < count:
        steps.append(None)
    return steps


def first_difference(
    fixed: dict[str, Any], expected: dict[str, Any]
) -> tuple[int, dict[str, Any], Any] | None:
    """``(step index, fixed's step, the reference's step)`` of the first differing step, or None."""
    ours = [_KILLED if step.get("hang") else step for step in fixed["steps"]]
    for i, (mine, ref) in enumerate(zip(ours, _reference_steps(expected, len(ours)), strict=True)):
        if ref is None:
            return i, mine, None
        if _timed_out(mine) and _timed_out(ref):
            continue
        if mine.get("output") != ref.get("output"):
            return i, mine, ref
        if ("error" in mine) != ("error" in ref):
            return i, mine, ref
        if "error" in mine and mine["error"].get("message") != ref["error"].get("message"):
            return i, mine, ref
        if mine.get("env") != ref.get("env"):
            return i, mine, ref
    return None


VERDICTS = ("pass", "restricted", "unexplained", "wrong-outcome", "unexpected-pass")
"""A case's verdict: the last three fail the gate."""


@dataclass(frozen=True)
class Verdict:
    """One case against the reference: its verdict, the first difference, the restriction used."""

    case_id: str
    verdict: str
    detail: str = ""
    restriction: int | None = None  # 1-based number in restrictions.toml

    @property
    def failing(self) -> bool:
        return self.verdict not in ("pass", "restricted")


@dataclass
class GateReport:
    """The gate's verdict per case, and the restriction patterns no case used."""

    python: str
    verdicts: list[Verdict] = field(default_factory=list)
    unused_patterns: list[str] = field(default_factory=list)

    def _ids(self, verdict: str) -> list[str]:
        return [v.case_id for v in self.verdicts if v.verdict == verdict]

    def _details(self, verdict: str) -> list[str]:
        return [v.detail for v in self.verdicts if v.verdict == verdict]

    @property
    def passed(self) -> list[str]:
        return self._ids("pass")

    @property
    def restricted(self) -> list[str]:
        return self._ids("restricted")

    @property
    def unexplained(self) -> list[str]:
        return self._details("unexplained")

    @property
    def wrong_outcome(self) -> list[str]:
        return self._details("wrong-outcome")

    @property
    def unexpected_pass(self) -> list[str]:
        return self._details("unexpected-pass")

    @property
    def ok(self) -> bool:
        return not (self.unused_patterns or any(v.failing for v in self.verdicts))

    def summary(self) -> str:
        lines = [
            f"fixed vs CPython {self.python}: {len(self.passed)} same, {len(self.restricted)} registered "
            f"restrictions, {len(self.unexplained)} unexplained, {len(self.wrong_outcome)} wrong outcome, "
            f"{len(self.unexpected_pass)} unexpected pass, {len(self.unused_patterns)} unused patterns"
        ]
        lines.extend(f"{v.verdict.upper()}: {v.detail}" for v in self.verdicts if v.failing)
        lines.extend(f"UNUSED-PATTERN: {item}" for item in self.unused_patterns)
        return "\n".join(lines)


def judge(
    case_id: str,
    ours: dict[str, Any],
    expected: dict[str, Any],
    restrictions: Sequence[Restriction],
    python: str,
) -> Verdict:
    """The verdict on one case: fixed's result ``ours`` against the reference's ``expected``."""
    diff = first_difference(ours, expected)
    covering = [n for n, r in enumerate(restrictions) if r.covers(case_id, python)]
    if diff is None:
        if covering:
            return Verdict(
                case_id,
                "unexpected-pass",
                f"{case_id}: fixed now behaves as CPython; drop it from restriction #{covering[0] + 1}",
                covering[0] + 1,
            )
        return Verdict(case_id, "pass")
    index, mine, ref = diff
    shown = json.dumps(mine, sort_keys=True)[:300], json.dumps(ref, sort_keys=True)[:300]
    detail = f"{case_id} step {index + 1}: fixed {shown[0]} / CPython {shown[1]}"
    if not covering:
        return Verdict(case_id, "unexplained", detail)
    for n in covering:
        if restrictions[n].accepts(mine):
            return Verdict(case_id, "restricted", detail, n + 1)
    return Verdict(
        case_id, "wrong-outcome", f"{detail} (not what restriction #{covering[0] + 1} says)", covering[0] + 1
    )


def unused_patterns(restrictions: Sequence[Restriction], case_ids: Iterable[str], python: str) -> list[str]:
    """Restriction patterns (applying to ``python``) that match none of ``case_ids``."""
    ids = list(case_ids)
    return [
        f"restriction #{n + 1}: {pattern}"
        for n, r in enumerate(restrictions)
        if not r.pythons or python in r.pythons
        for pattern in r.cases
        if not any(fnmatch.fnmatchcase(case_id, pattern) for case_id in ids)
    ]


def gate(
    reference: dict[str, dict[str, Any]],
    restrictions: Sequence[Restriction],
    run: Callable[[dict[str, Any]], dict[str, Any]] = run_fixed,
    python: str | None = None,
) -> GateReport:
    """Compare ``run`` (profile fixed) with the reference on every recorded case."""
    python = python or f"{sys.version_info[0]}.{sys.version_info[1]}"
    report = GateReport(python)
    for case_id in sorted(reference):
        item = reference[case_id]
        report.verdicts.append(judge(case_id, run(item["input"]), item["expected"], restrictions, python))
    report.unused_patterns = unused_patterns(restrictions, reference, python)
    return report
