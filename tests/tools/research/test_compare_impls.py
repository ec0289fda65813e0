"""``rlm-compat compare --impl``: other implementations' own loops in the grid (issue 25).

Offline and fast: a minimal third-party implementation speaking protocol 2 (a script below, its
own tiny loop over the loopback endpoint) solves the paper-style smoke suite; one
that crashes and one that hangs are graded failures with their errors; one that cannot start
fails the command. rlm_compat itself and the real peers (ysz/recursive-llm 2fb46cc,
recursive-llm 0.5.0, rlms) run
when ``RLM_COMPAT_IMPL_TESTS=1`` (``.ci/run`` sets it for the default Python only); with
``RLM_COMPAT_CI=1`` a peer that cannot be set up fails that test instead of skipping it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import dspy_venv
import jsonschema
import pytest

from rlm_compat.tools.cli import main
from rlm_compat.tools.conformance.case_runs import lookup_tools
from rlm_compat.tools.conformance.driver import Backend, Driver, ProtocolViolation
from rlm_compat.tools.conformance.protocol import SCHEMA_PATH
from rlm_compat.tools.research.base import RunRecord
from rlm_compat.tools.research.compare.impls import hello_message, task_message
from rlm_compat.tools.research.compare.turns import task_extra
from rlm_compat.tools.research.paper_tasks import PAPER_SIZES
from rlm_compat.tools.research.suites import TaskSuite
from rlm_compat.tools.research.tasks import GeneratedTask, task_from_id
from rlm_compat.tools.view.comparison_page import write_compare

# once_per_ci: the implementations' grid columns (other implementations' venvs, their failures graded)
# are orchestration over processes, the same on every host Python
pytestmark = pytest.mark.once_per_ci

MINI = textwrap.dedent(
    """
    import contextlib, io, json, re, sys, time, urllib.request

    mode = sys.argv[1]

    def send(message):
        sys.stdout.write(json.dumps(message) + "\\n")
        sys.stdout.flush()

    def run(task):
        context = open(task["context_file"], encoding="utf-8").read()
        system = ("You are a Recursive Language Model. The context is in `context`. "
                  f"Size: {len(context):,} characters.\\nDepth: 0")
        messages = [{"role": "system", "content": system}, {"role": "user", "content": task["query"]}]
        namespace = {"context": context}
        for turn in range(1, task["max_iterations"] + 1):
            body = json.dumps({"model": task["model"].split("/", 1)[-1], "messages": messages}).encode()
            request = urllib.request.Request(task["api_base"] + "/chat/completions", data=body,
                                             headers={"Content-Type": "application/json"})
            reply = json.load(urllib.request.urlopen(request))["choices"][0]["message"]["content"]
            messages.append({"role": "assistant", "content": reply})
            block = re.search(r"```python\\n(.*?)```", reply, re.S)
            output = ""
            if block:
                code = "\\n".join(l for l in block.group(1).splitlines() if not l.startswith("FINAL_VAR("))
                buffer = io.StringIO()
                try:
                    with contextlib.redirect_stdout(buffer):
                        exec(code, namespace)
                    output = buffer.getvalue()
                except Exception as exc:
                    output = f"Error: {type(exc).__name__}: {exc}"
            final = re.search(r"^FINAL_VAR\\((\\w+)\\)\\s*$", reply, re.M)
            if final and final.group(1) in namespace and not output.startswith("Error"):
                return str(namespace[final.group(1)]), turn
            messages.append({"role": "user", "content": output})
        return None, task["max_iterations"]

    for line in sys.stdin:
        message = json.loads(line)
        if message["type"] == "hello":
            send({"type": "hello", "protocol": message["protocol"], "implementation": "mini",
                  "version": "0", "kinds": []})
        elif message["type"] == "task":
            print(f"mini: {mode} task", file=sys.stderr, flush=True)
            if mode == "crash":
                sys.exit(3)
            if mode == "hang":
                time.sleep(120)
            answer, turns = run(message)
            send({"type": "task-result", "id": message["id"], "answer": answer, "iterations": turns})
        else:
            break
    """
)


def _records(out: Path) -> dict[str, list[RunRecord]]:
    found: dict[str, list[RunRecord]] = {}
    for line in (out / "runs.jsonl").read_text(encoding="utf-8").splitlines():
        record = RunRecord.from_json(json.loads(line))
        found.setdefault(record.spec.config, []).append(record)
    return found


def test_implementations_are_grid_columns_and_their_failures_are_graded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mini = tmp_path / "mini.py"
    mini.write_text(MINI, encoding="utf-8")
    out = tmp_path / "grid"
    args = ["compare", "--suite", "paper-smoke", "--no-progress", "--time-limit", "2", "--concurrency", "12"]
    impls = [f"{m}={sys.executable} {mini} {m}" for m in ("ok", "crash", "hang")]
    assert main([*args, "--out", str(out), *(a for name in impls for a in ("--impl", name))]) == 0
    runs = _records(out)
    assert set(runs) == {"impl:ok", "impl:crash", "impl:hang"}
    assert all(r.grade.passed for r in runs["impl:ok"]), [(r.answer, r.grade.reason) for r in runs["impl:ok"]]
    # calls and tokens are counted at the endpoint (the implementation reported neither)
    assert all(r.calls >= 2 and r.prompt_tokens > 0 and r.iterations == r.calls for r in runs["impl:ok"])
    oolong = next(r for r in runs["impl:ok"] if r.spec.task_id.startswith("oolong"))
    assert oolong.grade.score == 1.0 and oolong.grade.grader == "oolong-numeric"
    for record in runs["impl:crash"]:
        assert record.error_type == "Crash" and "status 3" in (record.error or "")
        assert not record.grade.passed and record.logs is not None
        assert "mini: crash task" in (out / record.logs / "stderr.log").read_text(encoding="utf-8")
    assert {(r.error_type, r.grade.passed) for r in runs["impl:hang"]} == {("Hang", False)}
    ok = runs["impl:ok"][0]
    served = [json.loads(line) for line in (out / str(ok.logs) / "endpoint.jsonl").read_text().splitlines()]
    assert (
        len(served) == ok.calls
        and served[0]["messages"][1]["content"] == task_from_id(ok.spec.task_id).build().query
    )
    assert served[-1]["reply"].endswith("```")  # the policy's last block, FINAL_VAR inside it
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert "| `impl:ok` | 3 | 100.0 % |" in summary and "## Scores and cost" in summary
    assert json.loads((out / "summary.json").read_text())["charts"] == [
        "pass_rate.png",
        "cost_iterations.png",
    ]
    report = tmp_path / "report.html"
    write_compare(out, report)
    html = report.read_text(encoding="utf-8")
    assert "impl:crash" in html and "mean score" in html
    capsys.readouterr()

    # an implementation that cannot start fails the command, and says so
    assert main([*args, "--no-charts", "--out", str(tmp_path / "bad"), "--impl", "bad=/bin/false"]) == 1
    assert "FAILED: impl:bad could not start" in capsys.readouterr().out


def test_impl_names_and_unavailable_entries_get_clear_errors(capsys: pytest.CaptureFixture[str]) -> None:
    for extra, message in (
        (["--impl", "nope"], "unknown implementation 'nope'"),
        (["--impl", "dspy-rlm=/usr/bin/python3"], "offline Deno + Pyodide runtime"),
        (["--impl", "rlms"], "runs in its own venv"),
        (["--impl", "bad name=x"], "NAME of letters"),
        (["--impl", "rlm_compat", "--time-limit", "0"], "--time-limit must be"),
    ):
        assert main(["compare", "--suite", "paper-smoke", "--out", "/nonexistent", *extra]) == 1
        assert message in capsys.readouterr().err


class _Echo(Backend):
    implementation = "echo"

    def info(self) -> dict[str, Any]:
        return {"implementation": "echo", "version": "0"}

    def task(self, task: dict[str, Any], context: str) -> dict[str, Any]:
        return {"answer": f"{task['query']}:{len(context)}", "iterations": 1}


def _valid(definition: str, message: dict[str, Any]) -> None:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.validate(message, {"$ref": f"#/$defs/{definition}", "$defs": schema["$defs"]})


def test_protocol_2_adds_the_task_message_and_protocol_1_stays_as_it_was(tmp_path: Path) -> None:
    context = tmp_path / "context.txt"
    context.write_text("x" * 10, encoding="utf-8")
    task = task_message(
        query="q",
        context_file=context,
        model="m",
        api_base=None,
        api_key=None,
        max_iterations=3,
        log_dir=tmp_path,
    )
    _valid("runnerHello", hello_message(5.0))
    _valid("taskMessage", task)
    v1 = Driver(_Echo(), fork=False)
    assert v1.handle({"type": "hello", "protocol": 1})["protocol"] == 1
    with pytest.raises(ProtocolViolation, match="needs protocol 2"):
        v1.handle(task)
    v2 = Driver(_Echo(), fork=False)
    assert v2.handle({"type": "hello", "protocol": 2})["protocol"] == 2
    reply = v2.handle(task)
    assert reply is not None and reply["type"] == "task-result" and reply["answer"] == "q:10"
    _valid("taskResult", reply)
    broken = Driver(_Echo(), fork=False)
    broken.handle({"type": "hello", "protocol": 2})
    failed = broken.handle({**task, "context_file": str(tmp_path / "missing.txt")})
    assert failed is not None and failed["answer"] is None and failed["error"]["type"] == "FileNotFoundError"
    with pytest.raises(ProtocolViolation, match="speaks 1 or 2"):
        Driver(_Echo(), fork=False).handle({"type": "hello", "protocol": 3})


def test_follow_ups_sessions_and_tools_are_optional_task_fields(tmp_path: Path) -> None:
    context = tmp_path / "context.txt"
    context.write_text("x" * 10, encoding="utf-8")
    built = GeneratedTask("lookup", 2_000).build()
    base = task_message(
        query="q",
        context_file=context,
        model="m",
        api_base=None,
        api_key=None,
        max_iterations=3,
        log_dir=tmp_path,
    )
    plain = {**base, **task_extra(GeneratedTask("needle", 2_000).build(), False)}
    assert plain == base  # a one-question task without tools: the message it always was
    driver = Driver(_Echo(), fork=False)
    driver.handle({"type": "hello", "protocol": 2})
    followups = {
        **base,
        **task_extra(GeneratedTask("followup", 2_000).build(), False),
        "followups": ["a", "b"],
    }
    _valid("taskMessage", followups)
    reply = driver.handle(followups)
    assert reply is not None and [t["answer"] for t in reply["turns"]] == ["q:10", "a:10", "b:10"]
    assert reply["answer"] == "b:10" and reply["iterations"] == 3
    _valid("taskResult", reply)
    for extra in ({"session": True}, task_extra(built, False)):  # the echo backend has neither
        message = {**base, **extra}
        _valid("taskMessage", message)
        refused = driver.handle(message)
        assert refused is not None and refused["answer"] is None
        assert refused["error"]["type"] == "UnsupportedTask"
    (tool,) = lookup_tools(task_extra(built, True)["tools"])
    code, city = built.tools[0].table[0]
    assert tool.__name__ == "warehouse_city" and tool(code) == city
    with pytest.raises(KeyError, match="no entry for 'W-1'"):
        tool("W-1")


# --- the real peers (default Python in CI) --------------------------------------------------------

PEERS = os.environ.get("RLM_COMPAT_IMPL_TESTS") == "1"


def _need(condition: bool, why: str) -> None:
    if not condition:
        if os.environ.get("RLM_COMPAT_CI") == "1":
            pytest.fail(f"RLM_COMPAT_IMPL_TESTS=1 under CI, but {why}")
        pytest.skip(why)


def _target(tmp_path: Path, requirement: str) -> Path:
    """``pip install --no-deps --target``: the peer's own code, run by this interpreter (whose
    venv already holds what they import: litellm, RestrictedPython, openai, rich...)."""
    target = tmp_path / requirement.replace("==", "-")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), requirement],
        capture_output=True,
        text=True,
        check=False,
    )
    _need(done.returncode == 0, f"pip could not fetch {requirement}: {done.stderr.strip()[-400:]}")
    return target


@pytest.fixture(scope="module")
def peer_code(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """recursive-llm 0.5.0's and rlms' code, fetched once for the module's peer tests."""
    where = tmp_path_factory.mktemp("peers")
    return {name: _target(where, name) for name in ("recursive-llm==0.5.0", "rlms==0.1.3")}


def dspy_smoke() -> TaskSuite:
    """dspy.RLM's CI suite: the OOLONG-style task and the task that needs a tool."""
    return TaskSuite(
        "dspy-smoke", "1", (GeneratedTask("oolong", PAPER_SIZES["2^13t"]), GeneratedTask("lookup", 10_000))
    )


def oolong_smoke() -> TaskSuite:
    """CI's smoke suite for the peers: the OOLONG-style task alone (each peer's driver imports
    litellm, seconds each, so one task per implementation keeps CI's budget). ``paper-smoke``
    (all three families) runs the same way: see docs/research/compare.md."""
    return TaskSuite("paper-smoke-oolong", "1", (GeneratedTask("oolong", PAPER_SIZES["2^13t"]),))


@pytest.mark.xdist_group("peer-code")
@pytest.mark.skipif(not PEERS, reason="set RLM_COMPAT_IMPL_TESTS=1 (CI does, on the default Python)")
def test_the_peers_run_the_paper_smoke_suite_end_to_end(tmp_path: Path, peer_code: dict[str, Path]) -> None:
    checkout = os.environ.get("RLM_COMPAT_UPSTREAM")
    _need(
        bool(checkout) and (Path(str(checkout)) / "src" / "rlm").is_dir(),
        "RLM_COMPAT_UPSTREAM is no checkout",
    )
    rl050, rlms = peer_code["recursive-llm==0.5.0"], peer_code["rlms==0.1.3"]
    out = tmp_path / "grid"
    python = sys.executable
    code = main(
        [
            "compare",
            "--suite",
            "test_compare_impls:oolong_smoke",
            "--impl",
            "rlm_compat",
            "--impl",
            f"ysz-2fb46cc={python}",
            "--impl",
            f"recursive-llm-0.5.0={python}",
            "--impl",
            f"rlms={python}",
            "--impl-path",
            f"recursive-llm-0.5.0={rl050}",
            "--impl-path",
            f"rlms={rlms}",
            "--upstream",
            str(checkout),
            "--time-limit",
            "120",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert code == 0
    runs = _records(out)
    passed = {c: [r.grade.passed for r in rs] for c, rs in runs.items()}
    # 2fb46cc reads FINAL_VAR from the reply even when the code before it failed (its `+=` is
    # refused): it answers the count as it stood, 0. The others follow the scripted model through.
    assert passed == {
        "impl:rlm_compat": [True],
        "impl:ysz-2fb46cc": [False],
        "impl:recursive-llm-0.5.0": [True],
        "impl:rlms": [True],
    }, {c: [(r.answer, r.error) for r in rs] for c, rs in runs.items()}
    # peek, `+=` refused, the count again, then FINAL_VAR alone (0.5.0 wants it standalone)
    assert [r.iterations for r in runs["impl:recursive-llm-0.5.0"]] == [4]
    ysz_oolong = next(r for r in runs["impl:ysz-2fb46cc"] if r.spec.task_id.startswith("oolong"))
    assert ysz_oolong.answer == "0" and 0 < (ysz_oolong.grade.score or 0) < 1
    rlms_logs = [r.logs for r in runs["impl:rlms"]]
    assert all(logs and list((out / logs).glob("rlm_*.jsonl")) for logs in rlms_logs)  # its own logger's


@pytest.mark.xdist_group("peer-code")
@pytest.mark.skipif(not PEERS, reason="set RLM_COMPAT_IMPL_TESTS=1 (CI does, on the default Python)")
def test_rlms_answers_follow_ups_in_its_session_and_calls_the_tool(
    tmp_path: Path, peer_code: dict[str, Path]
) -> None:
    """rlms' ``persistent=True`` and ``custom_tools`` through the protocol's optional fields;
    recursive-llm 0.5.0, which has neither, runs follow-ups fresh and refuses the tool."""
    rl050, rlms = peer_code["recursive-llm==0.5.0"], peer_code["rlms==0.1.3"]
    out = tmp_path / "grid"
    python = sys.executable
    code = main(
        [
            *("compare", "--suite", "turns-smoke", "--impl", f"rlms={python}"),
            *("--impl", f"recursive-llm-0.5.0={python}", "--impl-path", f"rlms={rlms}"),
            *("--impl-path", f"recursive-llm-0.5.0={rl050}", "--config", "session:impl:rlms"),
            *("--time-limit", "120", "--out", str(out), "--no-progress"),
        ]
    )
    assert code == 0
    runs = {(r.spec.task_id.split("-")[0], r.spec.config): r for rs in _records(out).values() for r in rs}
    for kind in ("followup", "lookup"):
        session = runs[(kind, "session:impl:rlms")]
        assert session.grade.passed and session.error_type is None, (session.answer, session.error)
    assert [t.context_chars for t in runs[("followup", "session:impl:rlms")].turns] == [10_000, 0, 0]
    fresh = runs[("followup", "impl:recursive-llm-0.5.0")]
    assert fresh.grade.passed and [t.context_chars for t in fresh.turns] == [10_000] * 3
    refused = runs[("lookup", "impl:recursive-llm-0.5.0")]
    assert refused.error_type == "UnsupportedTask" and not refused.grade.passed


# --- dialects: the same policy in each implementation's conventions ------------------------------


def _dspy_messages(query: str, context_size: int, steps: list[tuple[str, str]]) -> list[dict[str, str]]:
    """dspy.RLM's layout (dspy 3.4.1's ChatAdapter, as captured from a run): one system message with
    the fields and SUBMIT, one user message with the variables' previews and the REPL history."""
    system = (
        "Your input fields are:\n1. `variables_info` (str)\n2. `repl_history` (REPLHistory)\n"
        "[[ ## variables_info ## ]]\n{variables_info}\n\n[[ ## repl_history ## ]]\n{repl_history}\n\n"
        "[[ ## code ## ]]\n{code}\n\n[[ ## completed ## ]]\n- `SUBMIT(answer)` - submit final output when done"
    )
    history = "".join(
        f"=== Step {i} ===\nReasoning: r\nCode:\n```python\n{code}\n```\nOutput ({len(out)} chars):\n{out}\n"
        for i, (code, out) in enumerate(steps, 1)
    )
    user = (
        "[[ ## variables_info ## ]]\n[1] «««\n    Variable: `context` (access it in your code)\n    Type: str\n"
        f"    Total length: {context_size:,} characters\n    Preview:\n    ```\n    Date: ...\n    ```\n»»»\n"
        "[2] «««\n    Variable: `query` (access it in your code)\n    Type: str\n"
        f"    Total length: {len(query)} characters\n    Preview:\n    ```\n    {query}\n    ```\n»»»\n\n"
        f"[[ ## repl_history ## ]]\n{history}\n\n[[ ## iteration ## ]]\n{len(steps) + 1}/20\n"
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def test_the_policy_writes_each_implementations_dialect() -> None:
    from rlm_compat.tools.research.scripted_policy import read_conversation
    from rlm_compat.tools.research.task_policies import policy_for

    task = GeneratedTask("sniah", PAPER_SIZES["2^13t"]).build()
    policy = policy_for(task)
    # dspy.RLM: adapter fields, no FINAL; SUBMIT only in a step of its own, after seeing the output
    first = policy.reply(_dspy_messages(task.query, task.size, []))
    assert first.startswith("[[ ## reasoning ## ]]") and "print(context[:400])" in first
    assert first.rstrip().endswith("[[ ## completed ## ]]")
    search = policy.reply(_dspy_messages(task.query, task.size, [("print(context[:400])", "Pond face")]))
    assert "re.search" in search and "SUBMIT" not in search and "FINAL" not in search
    done = _dspy_messages(task.query, task.size, [("peek", "Pond"), ("search", "NUMBER 7179739\n")])
    assert "```python\nSUBMIT(answer)\n```" in policy.reply(done)
    conversation = read_conversation(done)
    assert conversation.query == task.query and conversation.size == task.size and conversation.dialect.submit
    # rlms 0.1.3: ```repl fences, the answer dict (computed into another name), no FINAL
    rlms_system = 'You are a Recursive Language Model (RLM). ```repl\nx\n``` answer["ready"] = True'
    rlms = [
        {"role": "system", "content": rlms_system},
        {
            "role": "user",
            "content": f"Answer the following: {task.query}\n\nYour context is a str of 32768 total characters.",
        },
        {"role": "user", "content": "Turn 1/30:"},
        {"role": "assistant", "content": "```repl\nprint(context[:400])\n```"},
        {"role": "user", "content": "REPL output:\nPond face"},
        {"role": "user", "content": "Turn 2/30:"},
    ]
    reply = policy.reply(rlms)
    assert reply.startswith("```repl\n") and 'answer["ready"] = True' in reply and "result = " in reply
    assert "FINAL" not in reply


@pytest.mark.once_per_ci  # dspy and Pyodide do not vary with the host Python
@pytest.mark.skipif(not dspy_venv.ENABLED, reason=dspy_venv.SKIP_REASON)
def test_dspy_rlm_runs_offline_in_the_grid(tmp_path: Path) -> None:
    """dspy.RLM through its own loop, its Deno + Pyodide interpreter from npm copies that
    ``--setup`` prepares beside the venv (docs/research/compare.md)."""
    python = dspy_venv.dspy_python(tmp_path)
    out = tmp_path / "grid"
    args = ["compare", "--suite", "test_compare_impls:dspy_smoke", "--impl", f"dspy-rlm={python}"]
    code = main(
        [*args, "--setup", "--setup-dir", str(tmp_path / "setup"), "--out", str(out), "--no-progress"]
    )
    assert code == 0
    record, lookup = sorted(_records(out)["impl:dspy-rlm"], key=lambda r: r.spec.task_id != "oolong-2^13t-s0")
    assert record.grade.passed and record.error_type is None, (record.answer, record.error)
    assert record.iterations == 3 and record.calls == 3  # peek, count, SUBMIT alone
    # the lookup task's tool, given as dspy.RLM(tools=[...]) and called from its sandbox
    assert lookup.grade.passed and lookup.error_type is None, (lookup.answer, lookup.error)
