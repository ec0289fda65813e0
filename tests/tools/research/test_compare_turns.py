"""Follow-up questions and tools in the comparison grid: sessions against a fresh run per question."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from rlm_compat.clients import LLMClient
from rlm_compat.record import read_trajectory
from rlm_compat.tools.cli import main
from rlm_compat.tools.research.base import RunRecord, RunSpec, TaskInstance
from rlm_compat.tools.research.compare.comparison import run_grid
from rlm_compat.tools.research.compare.executors import LocalExecutor
from rlm_compat.tools.research.compare.grid import GridJob, plan
from rlm_compat.tools.research.compare.impls import IMPLEMENTATIONS
from rlm_compat.tools.research.suites import load_suite
from rlm_compat.tools.research.task_policies import policy_for
from rlm_compat.tools.research.tasks import GeneratedTask

_ROW = re.compile(r"^ticket=T-[0-9]+ region=(\w+) status=(\w+) qty=([0-9]+)$", re.M)
_SHIPMENT = re.compile(r"^shipment=S-[0-9]+ warehouse=(W-[0-9]+) units=([0-9]+)$", re.M)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("size", [2_000, 60_000])
def test_every_answer_is_what_the_context_and_the_tool_say(size: int, seed: int) -> None:
    spec = GeneratedTask("followup", size, seed)
    task = spec.build()
    assert len(task.context) == size and len(task.queries) == 3 and not task.tools
    rows = [(r, s, int(q)) for r, s, q in _ROW.findall(task.context)]
    expected = []
    for query in task.queries:
        found = re.search(r"region=(\w+) and status=(\w+)\?", query)
        assert found is not None
        picked = [q for r, s, q in rows if (r, s) == found.groups()]
        if "total qty" in query:
            expected.append(sum(picked))
        elif "how many" in query:
            expected.append(len(picked))
        else:
            expected.append(max(picked, default=0))
    assert spec.answers == tuple(map(str, expected))
    assert [g.grade(a).passed for g, a in zip(spec.turn_graders, spec.answers, strict=True)] == [True] * 3
    assert spec.build() is task  # cached, and the same bytes on a rebuild elsewhere (hash in records)

    lookup = GeneratedTask("lookup", size, seed)
    built = lookup.build()
    (tool,) = built.tools
    city = re.search(r"from warehouses in (\w+)\?", built.query)
    assert city is not None and len(built.context) == size and tool.name not in built.context
    where = tool.function()
    total = sum(int(u) for w, u in _SHIPMENT.findall(built.context) if where(w) == city.group(1))
    assert lookup.turn_graders == (lookup.grader,) and lookup.answers == (str(total),)
    with pytest.raises(KeyError, match="no entry for 'W-1'"):
        where("W-1")


def _server_reply(tasks: list[TaskInstance]) -> Any:
    """The tasks' scripted policies behind the loopback server, each picked by its questions."""
    policies = [(task, policy_for(task)) for task in tasks]

    def reply(request: dict[str, Any]) -> str:
        text = json.dumps(request["messages"])
        for task, policy in policies:
            if any(json.dumps(q)[1:-1] in text for q in task.queries):
                return policy.reply(request["messages"])
        return "FINAL(no task)"

    return reply


def _later_turns(server: Any) -> int:
    """Requests whose question came with the note of a session's later call (what its REPL holds)."""
    note = re.compile(r"\[Persistent REPL session, call [2-9]")
    return sum(note.search(str(r["messages"][1].get("content"))) is not None for r in server.requests)


def test_a_session_answers_follow_ups_from_what_its_repl_kept(
    tmp_path: Path, chat_server: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = load_suite("turns-smoke")
    tasks = [spec.build() for spec in suite.tasks()]
    monkeypatch.setenv("LOOPBACK_KEY", "sk-loopback")
    out = tmp_path / "grid"
    servers = []
    for configs in (["fixed"], ["fixed", "session:fixed"]):  # the second grid runs only the sessions
        server = chat_server(_server_reply(tasks))
        servers.append(server)
        flags = [word for config in configs for word in ("--config", config)]
        code = main(
            [
                *("compare", "--suite", "turns-smoke", *flags, "--model", "openai/turns"),
                *("--api-base", server.base_url, "--api-key-env", "LOOPBACK_KEY"),
                *("--out", str(out), "--no-progress"),
            ]
        )
        assert code == 0, capsys.readouterr()
    fresh, session = servers
    # turns 2 and 3 of the session (one call each) are told their REPL kept turn 1's variables
    assert (_later_turns(fresh), _later_turns(session)) == (0, 2)

    records = {
        (r.spec.task_id, r.spec.config): r
        for r in (RunRecord.from_json(json.loads(line)) for line in (out / "runs.jsonl").open())
    }
    assert len(records) == 4 and all(r.grade.passed and r.error_type is None for r in records.values())
    for config, sent in (("fixed", [10_000] * 3), ("session:fixed", [10_000, 0, 0])):
        record = records[("followup-10k-s0", config)]
        assert [t.context_chars for t in record.turns] == sent
        assert [t.answer for t in record.turns] == list(GeneratedTask("followup", 10_000).answers)
        assert record.grade.score == 1.0 and record.calls == sum(t.calls for t in record.turns)
        assert all(t.prompt_tokens > 0 for t in record.turns)
        assert record.trajectory == record.turns[0].trajectory
        for turn in record.turns:  # one readable trajectory per turn
            assert turn.trajectory is not None
            _header, events = read_trajectory(out / turn.trajectory)
            assert [e["kind"] if isinstance(e, dict) else e.kind for e in events][-1] == "run_end"

    lookup = records[("lookup-10k-s0", "session:fixed")]
    assert not lookup.turns and lookup.answer == GeneratedTask("lookup", 10_000).answer
    assert lookup.trajectory is not None
    _header, events = read_trajectory(out / lookup.trajectory)
    calls = [e["data"] for e in events if isinstance(e, dict) and e["kind"] == "tool_call"]
    warehouses = {w for w, _ in _SHIPMENT.findall(GeneratedTask("lookup", 10_000).build().context)}
    assert len(calls) == len(warehouses) and all(
        c["function"] == "warehouse_city" and not c["error"] for c in calls
    )

    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    turns = {(row["config"], row["turn"]): row for row in summary["turns"]}
    assert sorted(turns) == [(c, n) for c in ("fixed", "session:fixed") for n in (1, 2, 3)]
    assert turns[("session:fixed", 2)]["mean_context_chars"] == 0
    assert turns[("fixed", 2)]["mean_context_chars"] == 10_000
    assert "## By turn" in (out / "summary.md").read_text(encoding="utf-8")


def test_a_session_under_upstream_finals_a_stale_answer(tmp_path: Path) -> None:
    """2fb46cc resolves FINAL_VAR before it runs the code of the same reply: in a session the
    variable still holds the previous turn's answer (measured, not reproduced by hand)."""
    suite = load_suite("turns-smoke")

    def policy(task: TaskInstance, spec: RunSpec) -> LLMClient:
        return policy_for(task)

    configs = ["session:upstream", "session:upstream-without:final_before_exec", "upstream"]
    specs = [s for s in plan(suite, configs, "scripted", 1) if s.task_id.startswith("followup")]
    outcome = run_grid(GridJob(suite, policy), specs, tmp_path, LocalExecutor(), progress=False, charts=False)
    by_config = {r.spec.config: r for r in outcome.records}
    stale = by_config["session:upstream"]
    assert [t.grade.passed for t in stale.turns] == [True, False, False]
    assert [t.answer for t in stale.turns] == [stale.turns[0].answer] * 3
    assert stale.grade.score == pytest.approx(1 / 3) and not stale.grade.passed
    assert by_config["session:upstream-without:final_before_exec"].grade.passed
    assert by_config["upstream"].grade.passed


def test_rlm_compat_as_an_implementation_runs_sessions_through_the_scripted_endpoint(tmp_path: Path) -> None:
    """``impl:rlm_compat`` and ``session:impl:rlm_compat``: through litellm to the loopback
    endpoint serving the policy, figures counted there; per-turn records like the profiles'."""
    suite = load_suite("turns-smoke")
    impls = {"rlm_compat": IMPLEMENTATIONS["rlm_compat"]}
    job = GridJob(suite, lambda task, spec: None, implementations=impls)
    specs = plan(suite, ["impl:rlm_compat", "session:impl:rlm_compat"], "scripted", 1)
    outcome = run_grid(job, specs, tmp_path, LocalExecutor(2), progress=False, charts=False)
    runs = {(r.spec.task_id.split("-")[0], r.spec.config): r for r in outcome.records}
    assert all(r.grade.passed and r.error_type is None for r in runs.values()), runs
    assert [t.context_chars for t in runs[("followup", "impl:rlm_compat")].turns] == [10_000] * 3
    session = runs[("followup", "session:impl:rlm_compat")]
    assert [t.context_chars for t in session.turns] == [10_000, 0, 0]
    assert session.calls == 4 and session.prompt_tokens > 0  # counted at the endpoint
