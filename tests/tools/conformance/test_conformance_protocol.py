"""The published implementation protocol: its example adapter, its schema, and broken adapters.

* The example adapter in docs/protocol.md is taken from the doc as written, saved in a temporary
  directory and run through ``rlm-compat conformance --impl NAME=COMMAND`` over the shipped fixtures:
  a newcomer's implementation is added without touching rlm_compat's source.
* Every message of real traffic (rlm_compat in process, the example adapter) and the recorded
  fixtures' inputs and expectations validate against the shipped JSON Schema.
* Adapters that break the protocol (not JSON, another version, dying mid-run, hanging, answering for
  another case) give typed errors naming the cause, never a hang, and the run goes on.
"""

from __future__ import annotations

import json
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from locations import ROOT

from rlm_compat.profiles import Profile
from rlm_compat.tools import ToolUsageError
from rlm_compat.tools.cli import main
from rlm_compat.tools.conformance.adapters import ProfileBackend
from rlm_compat.tools.conformance.driver import BACKENDS, Driver
from rlm_compat.tools.conformance.fixtures import FixtureSet, read_jsonl, write_jsonl
from rlm_compat.tools.conformance.implementations import REGISTRY, make_adapter, parse_impl
from rlm_compat.tools.conformance.protocol import (
    DRIVER_PATH,
    SCHEMA_PATH,
    Connection,
    DriverError,
    LocalConnection,
    PipeConnection,
    ProtocolError,
    Session,
)
from rlm_compat.tools.conformance.suite_runner import run_conformance

ROOT = ROOT
SCHEMA = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def _validator(definition: str) -> jsonschema.protocols.Validator:
    schema = {"$ref": f"#/$defs/{definition}", "$defs": SCHEMA["$defs"]}
    return jsonschema.Draft202012Validator(schema)


def _example_adapter(directory: Path) -> Path:
    text = (ROOT / "docs" / "protocol.md").read_text(encoding="utf-8")
    found = re.search(r"## Example adapter\n.*?```python\n(.*?)```", text, re.S)
    assert found, "docs/protocol.md lost its example adapter"
    path = directory / "my_adapter.py"
    path.write_text(found.group(1), encoding="utf-8")
    return path


class _Checked(Connection):
    """A connection that validates every message, both ways, against the shipped schema."""

    def __init__(self, inner: Connection) -> None:
        self.inner = inner
        self.runner = _validator("runnerMessage")
        self.implementation = _validator("implementationMessage")
        self.seen = 0

    def open(self) -> None:
        self.inner.open()

    def send(self, message: dict[str, Any]) -> None:
        self.runner.validate(message)
        self.inner.send(message)

    def receive(self, limit: float) -> dict[str, Any]:
        reply = self.inner.receive(limit)
        self.implementation.validate(reply)
        self.seen += 1
        return reply

    def close(self) -> None:
        self.inner.close()


# --- the example adapter ----------------------------------------------------------------------


# once_per_ci: a doc's script speaking JSON lines over pipes to the runner (a whole conformance run,
# ~6 s); the protocol's failure modes below, and every message's schema, are checked on every Python.
@pytest.mark.once_per_ci
def test_example_adapter_from_the_doc_runs_the_suite(tmp_path: Path) -> None:
    adapter = _example_adapter(tmp_path)
    assert len(adapter.read_text().splitlines()) <= 20
    out = tmp_path / "out.json"
    code = main(
        ["conformance", "--impl", f"my-rlm={sys.executable} {adapter}", "--json", str(out), "--quiet"]
    )
    assert code == 0  # a peer: differences are reported, never gating
    (impl,) = json.loads(out.read_text())["implementations"]
    assert impl["name"] == "my-rlm" and impl["info"]["implementation"] == "my-rlm"
    by_kind: dict[str, set[str]] = {}
    for result in impl["results"]:
        by_kind.setdefault(result["kind"], set()).add(result["status"])
    assert by_kind["repl"] == by_kind["loop"] == {"skipped"}
    assert "errored" not in by_kind["parser"] and "pass" in by_kind["parser"]
    fixtures = FixtureSet.open()
    path, _, _ = fixtures.select("parser", "3.11")
    assert path is not None
    assert sum(1 for r in impl["results"] if r["kind"] == "parser") == sum(1 for _ in read_jsonl(path))
    differs = next(r for r in impl["results"] if r["status"] == "unexplained")
    assert differs["detail"].startswith("answer: expected")


def test_example_adapter_traffic_matches_the_schema(tmp_path: Path) -> None:
    connection = _Checked(PipeConnection([sys.executable, str(_example_adapter(tmp_path))]))
    fixtures = FixtureSet.open()
    path, _, _ = fixtures.select("parser", "3.11")
    assert path is not None
    cases = [line["input"] for n, line in enumerate(read_jsonl(path)) if n % 97 == 0]
    with Session(connection, name="my-rlm") as session:
        outcomes = session.run("parser", cases)
    assert [o["id"] for o in outcomes] == [c["id"] for c in cases]
    assert all("result" in o for o in outcomes) and connection.seen == len(cases) + 1


@pytest.mark.parametrize("profile", ["upstream", "fixed"])
def test_rlm_compat_traffic_matches_the_schema(profile: str) -> None:
    backend = ProfileBackend(Profile.named(profile), None)
    connection = _Checked(LocalConnection(lambda: Driver(backend, fork=False)))
    fixtures = FixtureSet.open()
    with Session(connection, name=profile) as session:
        assert session.info["implementation"] == "rlm_compat" and session.info["compare"] == "exact"
        for kind, stride in (("repl", 40), ("parser", 400), ("loop", 15)):
            path, _, _ = fixtures.select(kind, "3.11")
            assert path is not None
            cases = [line["input"] for n, line in enumerate(read_jsonl(path)) if n % stride == 0]
            outcomes = session.run(kind, cases)
            assert all("result" in o for o in outcomes), [o for o in outcomes if "result" not in o][:3]


def test_recorded_fixtures_have_the_published_shapes() -> None:
    fixtures = FixtureSet.open()
    for kind in ("repl", "parser", "loop"):
        case, result = _validator(f"{kind}Case"), _validator(f"{kind}Result")
        path, _, _ = fixtures.select(kind, "3.11")
        assert path is not None
        for n, line in enumerate(read_jsonl(path)):
            if kind != "parser" or n % 20 == 0:
                case.validate(line["input"])
                result.validate(line["expected"])


# --- the registry -----------------------------------------------------------------------------


def test_registry_entries_start_what_exists() -> None:
    for entry in REGISTRY.values():
        assert entry.start in ("in-process", "python", "checkout"), entry.name
        if entry.script:  # a driver of its own beside driver.py (dspy-rlm: test_conformance_dspy.py)
            assert (DRIVER_PATH.parent / entry.script).is_file(), entry.name
        elif entry.start in ("python", "checkout") and not entry.unavailable:
            assert entry.backend in BACKENDS, entry.name
        assert not any(re.search(r"(^|\s)/(work|home|root|tmp)/", line) for line in entry.setup)
    entry, target = parse_impl("mine=python3 -u adapter.py --flag 'a b'")
    assert entry.command == ("python3", "-u", "adapter.py", "--flag", "a b") and target is None
    with pytest.raises(ToolUsageError, match="NAME=COMMAND"):
        parse_impl("not-registered")


# --- broken adapters --------------------------------------------------------------------------

_BROKEN = textwrap.dedent(
    """
    import json, sys, time

    mode = sys.argv[1]
    for line in sys.stdin:
        msg = json.loads(line)
        if msg["type"] == "hello":
            if mode == "notjson":
                print("hello there", flush=True)
                continue
            hello = {"type": "hello", "protocol": 2 if mode == "version" else 1,
                     "implementation": "broken", "version": "0", "kinds": ["repl"], "compare": "exact"}
            print(json.dumps(hello), flush=True)
            continue
        if msg["type"] != "case":
            break
        case_id = msg["case"]["id"]
        if mode == "dies" and case_id.endswith("other"):
            print("dying on purpose", file=sys.stderr, flush=True)
            sys.exit(3)
        if mode == "hangs" and case_id.endswith("other"):
            time.sleep(3600)
        if mode == "wrongid":
            case_id = "repl.syn.someone_else"
        result = {"steps": [{"output": "6", "env": {"x": 2}}]}
        print(json.dumps({"type": "result", "id": case_id, "result": result}), flush=True)
    """
)


@pytest.fixture
def broken(tmp_path: Path) -> Path:
    path = tmp_path / "broken.py"
    path.write_text(_BROKEN, encoding="utf-8")
    return path


def _cases() -> list[dict[str, Any]]:
    return [
        {"id": "repl.syn.same", "steps": ["x = 2\nx * 3"]},
        {"id": "repl.syn.other", "steps": ["y = 1"]},
        {"id": "repl.syn.after", "steps": ["x = 2\nx * 3"]},
    ]


def _session(script: Path, mode: str) -> Session:
    return Session(PipeConnection([sys.executable, str(script), mode]), name="broken", reply_limit=2.0)


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("notjson", "reply is not JSON: 'hello there'"),
        ("version", "it speaks protocol 2, this runner speaks 1"),
    ],
)
def test_a_broken_handshake_is_a_typed_error(broken: Path, mode: str, message: str) -> None:
    with pytest.raises(ProtocolError, match=re.escape(message)):
        _session(broken, mode).start()


def test_an_adapter_that_cannot_start_is_a_typed_error() -> None:
    with pytest.raises(DriverError, match="cannot start"):
        Session(PipeConnection(["/nonexistent/adapter"])).start()


@pytest.mark.parametrize(
    ("mode", "failure"),
    [
        ("dies", "DriverError: the implementation exited with status 3; stderr: dying on purpose"),
        ("hangs", "DriverError: no reply within 2s"),
    ],
)
def test_dying_or_hanging_mid_run_fails_that_case_and_the_run_goes_on(
    broken: Path, mode: str, failure: str
) -> None:
    with _session(broken, mode) as session:
        same, other, after = session.run("repl", _cases())
    assert same == {"id": "repl.syn.same", "result": {"steps": [{"output": "6", "env": {"x": 2}}]}}
    assert other["id"] == "repl.syn.other" and other["failure"].startswith(failure)
    assert after["result"] == same["result"]  # restarted, with a fresh handshake


def test_a_result_for_another_case_is_a_protocol_error(broken: Path) -> None:
    with _session(broken, "wrongid") as session:
        outcomes = session.run("repl", _cases()[:2])
    assert [o["id"] for o in outcomes] == ["repl.syn.same", "repl.syn.other"]
    assert all(o["failure"].startswith("ProtocolError: expected the result of 'repl.syn.") for o in outcomes)


def _synthetic(tmp_path: Path) -> FixtureSet:
    tmp_path.mkdir()
    lines = [
        {
            "id": c["id"],
            "input": {**c, "topic": "syn"},
            "expected": {"steps": [{"output": "6", "env": {"x": 2}}]},
        }
        for c in _cases()
    ]
    for version in ("3.10", "3.11", "3.12", "3.13"):
        write_jsonl(tmp_path / f"repl.py{version}.jsonl", lines)
    (tmp_path / "PROVENANCE.json").write_text("{}")
    (tmp_path / "deviations.toml").write_text("")
    return FixtureSet.open(tmp_path)


def test_the_runner_reports_broken_adapters_and_goes_on(broken: Path, tmp_path: Path) -> None:
    fixtures = _synthetic(tmp_path / "fx")
    adapters = [
        make_adapter(f"wrong-version={sys.executable} {broken} version"),
        make_adapter(f"dies={sys.executable} {broken} dies"),
    ]
    report = run_conformance(adapters, fixtures, kinds=["repl"], progress_enabled=False)
    wrong, dies = report.implementations
    assert wrong.notes == [
        "could not start: ProtocolError: wrong-version: handshake: it speaks protocol 2, this runner "
        "speaks 1 (docs/protocol.md)"
    ]
    assert {r.status for r in wrong.results} == {"errored"}
    assert [r.status for r in dies.results] == ["pass", "errored", "pass"]
    assert "exited with status 3" in dies.results[1].detail


def test_an_unsandboxed_implementation_never_gets_host_cases(tmp_path: Path) -> None:
    script = tmp_path / "echo.py"
    script.write_text(
        textwrap.dedent(
            """
            import json, sys
            for line in sys.stdin:
                msg = json.loads(line)
                if msg["type"] == "hello":
                    print(json.dumps({"type": "hello", "protocol": 1, "implementation": "echo",
                                      "version": "0", "kinds": ["repl"]}), flush=True)
                elif msg["type"] == "case":
                    assert "import" not in msg["case"]["steps"][0], "a host case reached me"
                    print(json.dumps({"type": "result", "id": msg["case"]["id"], "skip": "echo"}), flush=True)
            """
        )
    )
    adapter = make_adapter(f"echo={sys.executable} {script}")
    cases = [{"id": "repl.t.host", "steps": ["import os"]}, {"id": "repl.t.plain", "steps": ["1"]}]
    try:
        outcomes = adapter.run_many("repl", cases)
    finally:
        adapter.stop()
    assert outcomes == [{"skip": "no sandbox in echo; not run: step 1 uses 'import'"}, {"skip": "echo"}]
    assert adapter.mode == "semantic" and not adapter.gated
