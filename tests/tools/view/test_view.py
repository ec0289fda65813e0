"""``rlm-compat view`` without a browser: the model built from real trajectories, the page's
self-containment and escaping, the comparison tables, conformance data, and typed input errors.
(The pages in a real browser: tests/tools/view/test_view_browser.py.)
"""

from __future__ import annotations

import html as html_lib
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import view_data
from locations import DATA

from rlm_compat.errors import TrajectoryError
from rlm_compat.record import read_trajectory
from rlm_compat.tools.cli import main
from rlm_compat.tools.replay.foreign import load_run
from rlm_compat.tools.view import (
    TrajectoryModel,
    ViewInputError,
    from_events,
    read_divergence,
    read_trajectory_model,
    register_reader,
    write_view,
)
from rlm_compat.tools.view.comparison_page import write_compare
from rlm_compat.tools.view.conformance_page import conformance_payload
from rlm_compat.tools.view.model import NodeModel, StepModel
from rlm_compat.tools.view.render import script_json
from rlm_compat.tools.view.sources import READERS


def _data_block(html: str, block_id: str) -> Any:
    match = re.search(rf'<script type="application/json" id="{block_id}">(.*?)</script>', html, re.S)
    assert match is not None
    return json.loads(match.group(1))


def test_tree_of_a_real_run(tmp_path: Path) -> None:
    header, events = read_trajectory(view_data.tree_trajectory(tmp_path / "run.jsonl"))
    model = from_events(header, events)
    root, child, leaf = model.nodes
    assert (root.kind, child.kind, leaf.kind) == ("rlm", "rlm", "leaf")
    assert (root.depth, child.depth, leaf.depth) == (0, 1, 1)
    assert root.children == [child.node_id, leaf.node_id]
    assert [s.iteration for s in root.steps] == [1, 2, 3, 4]
    batches = root.steps[1].subcalls
    assert [(b.function, b.children) for b in batches] == [
        ("recursive_llm", [child.node_id]),
        ("llm_query", [leaf.node_id]),
    ]
    assert root.steps[2].error and "ZeroDivisionError" in (root.steps[2].output or "")
    assert root.steps[0].reply and root.steps[0].code is None  # the reply is what ran
    assert child.answer == "child found needle-42"
    assert root.system_prompt and "Depth: 0" in root.system_prompt
    assert child.system_prompt and "Depth: 1" in child.system_prompt
    assert leaf.query == "summarise: " + ("haystack " * 5)[:40]
    assert leaf.answer and leaf.answer.startswith("leaf answer: summarise:")
    assert model.answer == "needle-42" and model.query == "Which needle is in the context?"
    assert root.steps[0].call is not None and root.steps[0].call.total_tokens
    from rlm_compat.tools.view.render import trajectory_payload

    subtree = trajectory_payload(model)["nodes"][0]["subtree"]  # the root's: the whole run
    assert subtree["tokens"] == model.stats["total_tokens"] and subtree["calls"] == model.stats["llm_calls"]
    assert subtree["cost_usd"] == pytest.approx(model.stats["estimated_cost_usd"])
    totals = root.totals()
    assert totals["calls"] == 4 and totals["tokens"] == sum(
        s.call.total_tokens or 0 for s in root.steps if s.call
    )


def test_a_batch_links_every_child(tmp_path: Path) -> None:
    from rlm_compat.testing import ScriptedChatServer

    def script(request: dict[str, Any]) -> str:
        messages = request["messages"]
        if messages[0]["role"] != "system":
            return "leaf " + str(messages[-1]["content"])
        if sum(m["role"] == "assistant" for m in messages) == 0:
            return '```python\nout = llm_query_batched(["a", "b", "c", "d"])\nprint(out)\n```'
        return 'FINAL("done")'

    from rlm_compat import RLM

    with ScriptedChatServer(script) as server:
        RLM(
            "openai/gpt-4o-mini",
            api_base=server.base_url,
            api_key="sk",
            isolation="inline",
            trajectory_path=str(tmp_path / "run.jsonl"),
        ).complete("q", "c")
    model = read_trajectory_model(tmp_path / "run.jsonl")
    (batch,) = model.nodes[0].steps[0].subcalls
    leaves = [n for n in model.nodes if n.kind == "leaf"]
    assert (batch.function, batch.count, batch.errors) == ("llm_query_batched", 4, 0)
    assert sorted(batch.children) == sorted(n.node_id for n in leaves) and len(leaves) == 4
    assert sorted(n.answer or "" for n in leaves) == ["leaf a", "leaf b", "leaf c", "leaf d"]


def test_a_failed_run_keeps_its_error(tmp_path: Path) -> None:
    path = view_data.tree_trajectory(tmp_path / "run.jsonl")
    lines = path.read_text().splitlines()
    cut = [line for line in lines if '"kind":"run_end"' not in line and '"kind":"rlm_end"' not in line]
    last = json.loads(cut[-1])
    cut.append(
        json.dumps(
            {
                **last,
                "sequence": last["sequence"] + 1,
                "kind": "run_error",
                "data": {"error_type": "BudgetExceededError", "error": "calls 5 > 4", "stats": {}},
            }
        )
    )
    path.write_text("\n".join(cut) + "\n")
    model = read_trajectory_model(path)
    assert model.error == "BudgetExceededError: calls 5 > 4"


def test_retries_and_rejected_answers_are_noted(tmp_path: Path) -> None:
    from rlm_compat import RLM
    from rlm_compat.testing import ErrorReply, ScriptedChatServer

    replies = [ErrorReply(503, retry_after=0.01), 'FINAL("draft")', 'FINAL("final")']
    with ScriptedChatServer(replies) as server:
        rlm = RLM(
            "openai/gpt-4o-mini",
            api_base=server.base_url,
            api_key="sk-loopback",
            isolation="inline",
            max_retries=2,
            trajectory_path=str(tmp_path / "run.jsonl"),
            final_answer_validator=lambda answer: "not final yet" if answer == "draft" else None,
        )
        assert rlm.complete("q", "c") == "final"
    steps = read_trajectory_model(tmp_path / "run.jsonl").nodes[0].steps
    notes = [note for step in steps for note in step.notes]
    assert any(note.startswith("provider retry: attempt") for note in steps[0].notes), notes
    assert any("rejected a 5-character answer" in note for note in steps[0].notes), notes
    assert any("accepted the answer (5 characters)" in note for note in steps[1].notes), notes


def test_tool_calls_and_compactions_are_noted_on_their_steps(tmp_path: Path) -> None:
    from rlm_compat import RLM
    from rlm_compat.testing import ScriptedChatServer

    def lookup(key: str) -> str:
        if key == "bad":
            raise KeyError(key)
        return key.upper()

    step = "```python\nr = lookup('ok')\ntry:\n    lookup('bad')\nexcept KeyError:\n    pass\nprint('x' * 900)\n```"

    steps = iter([step, step, step, step, 'FINAL_VAR("r")'])

    def reply(request: dict[str, Any]) -> str:
        last = str(request["messages"][-1]["content"])
        if last.startswith("Your conversation is about to be compacted"):
            return "summary"
        return next(steps)

    with ScriptedChatServer(reply) as server:
        rlm = RLM(
            "openai/m",
            api_base=server.base_url,
            api_key="sk-loopback",
            isolation="inline",
            custom_tools={"lookup": lookup},
            compaction=True,
            context_window_tokens=1000,
            trajectory_path=str(tmp_path / "run.jsonl"),
        )
        assert rlm.complete("q", "c") == "OK"
    notes = [
        note
        for node in read_trajectory_model(tmp_path / "run.jsonl").nodes
        for s in node.steps
        for note in s.notes
    ]
    assert any(n.startswith("tool lookup(): ") and "B out" in n for n in notes), notes
    assert any(n.startswith("tool lookup(): ") and "raised KeyError" in n for n in notes), notes
    assert any(n.startswith("compaction 1: about") for n in notes), notes
    assert any("the REPL is untouched" in n for n in notes), notes


def test_json_block_cannot_be_closed_by_text() -> None:
    nasty = "</script><script>alert(1)</script><!-- \u2028 & >"
    text = str(script_json({"t": nasty}))
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"t": nasty}


def test_trajectory_page_is_self_contained_and_escaped(tmp_path: Path) -> None:
    html_path = tmp_path / "xss.html"
    write_view([view_data.xss_trajectory(tmp_path / "xss.jsonl")], html_path)
    html = html_path.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)  # no CDN, no network
    assert "<link" not in html
    nonce = re.search(r"script-src 'nonce-([^']+)'", html)
    assert nonce is not None
    assert re.findall(r"<script[^>]*>", html) == [
        '<script type="application/json" id="trajectory-data">',
        f'<script nonce="{nonce.group(1)}">',
    ]
    assert "window.__xss" not in html.split('id="trajectory-data">', 1)[0]
    data = _data_block(html, "trajectory-data")
    assert view_data.XSS_IMG in data["query"]
    tokens = data["nodes"][0]["steps"][0]["hl_reply"]
    assert view_data.XSS_SCRIPT in "".join(tokens[1::2])  # the page rebuilds the reply from tokens
    assert "nb" in tokens[0::2]  # Pygments' builtin class (print): highlighted on the server


def test_run_page_escapes_the_record(tmp_path: Path) -> None:
    from rlm_compat.tools.view.render import trajectory_page

    html = trajectory_page(
        None,
        record={
            "run_id": "r",
            "note": "",
            "spec": {"suite": "s", "task_id": "t", "config": "fixed", "model": "m", "run_index": 0},
            "grade": {"passed": False, "reason": view_data.XSS, "grader": "g", "grader_version": "1"},
            "answer": view_data.XSS,
            "error_type": None,
            "error": None,
            "iterations": 1,
            "calls": 1,
            "prompt_tokens": 1,
            "completion_tokens": 1,
            "wall_seconds": 0.1,
        },
    )
    assert "<script>window" not in html and "<img" not in html
    assert "&lt;script&gt;window.__xss" in html


def test_comparison_tables_and_run_pages(tmp_path: Path) -> None:
    directory = view_data.compare_dir(tmp_path / "grid")
    written = write_compare(directory, tmp_path / "out" / "report.html")
    report, *runs = written
    assert len(runs) == 6 and all(p.parent.name == "report_runs" for p in runs)
    html = report.read_text()
    hrefs = re.findall(r'href="(report_runs/run-\d{4}\.html)"', html)
    assert set(hrefs) == {f"report_runs/{p.name}" for p in runs}
    assert html.count("data:image/png;base64,") == 1
    ablation = html.split('id="ablation"', 1)[1].split("</table>", 1)[0]
    assert "separate_scopes" in ablation and "+50 pt" in ablation and "count-words" in ablation
    assert '"suite": "demo"' in html_lib.unescape(html)  # summary.json
    page = runs[1].read_text()
    assert 'href="../report.html"' in page
    assert _data_block(page, "trajectory-data")["answer"] == "unknown"


def test_comparison_without_trajectory_files(tmp_path: Path) -> None:
    directory = view_data.compare_dir(tmp_path / "grid", with_chart=False)
    for path in (directory / "trajectories").iterdir():
        path.unlink()
    report, *runs = write_compare(directory, tmp_path / "report.html")
    assert "not found" in runs[0].read_text()
    assert "<h2>Charts</h2>" not in report.read_text()


def test_conformance_payload_has_both_sides(tmp_path: Path) -> None:
    results = tmp_path / "c.json"
    assert (
        main(
            [
                "conformance",
                "--cases",
                "repl.scoping.lambda_body_env",
                "--json",
                str(results),
                "--quiet",
            ]
        )
        == 0
    )
    payload = conformance_payload([results, results])
    (case_id,) = [c["id"] for c in payload["cases"]]
    names = ["rlm_compat-upstream", "rlm_compat-fixed", "rlm_compat-fixed vs CPython"]
    assert [c["name"] for c in payload["columns"]] == names * 2
    assert [c["oracle"] for c in payload["columns"]] == ["upstream", "upstream", "cpython"] * 2
    oracle_file = payload["columns"][2]["fixtures"]["repl"]
    assert oracle_file.endswith(f"repl.cpython3.{sys.version_info[1]}.jsonl")
    assert payload["recorded"][oracle_file], "the CPython recording of the case is found"
    assert payload["cells"][2][case_id]["status"] == "pass"  # fixed sees top-level names, as CPython
    assert payload["restrictions"]["1"].startswith("security: ")
    fixed = payload["cells"][1][case_id]
    assert fixed["status"] == "deviation" and '"output": "6"' in fixed["actual"]
    upstream = payload["cells"][0][case_id]
    assert upstream["status"] == "pass" and "actual" not in upstream
    recorded = payload["recorded"][payload["columns"][0]["fixtures"]["repl"]][case_id]
    assert recorded["texts"] == [["step 1", "k = 5\nf = lambda v: v + k\nf(1)"]]
    assert "lambda body reads env" in recorded["input"] and '"steps"' in recorded["expected"]
    assert payload["deviations"][str(fixed["deviation"])]


def test_an_importer_can_feed_the_view(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign.log"
    foreign.write_text("FOREIGN\nreply one\n")

    def reader(path: Path) -> TrajectoryModel | None:
        if not path.read_text().startswith("FOREIGN"):
            return None
        node = NodeModel(
            "n1", "", 0, "rlm", "m", "q", "a", steps=[StepModel(1, reply=path.read_text().split("\n")[1])]
        )
        return TrajectoryModel("foreign run", "foreign", [node], answer="a")

    register_reader("foreign", reader)
    try:
        write_view([foreign], tmp_path / "f.html")
    finally:
        READERS.pop("foreign")
    data = _data_block((tmp_path / "f.html").read_text(), "trajectory-data")
    assert data["source_format"] == "foreign"
    assert "".join(data["nodes"][0]["steps"][0]["hl_reply"][1::2]) == "reply one"


def test_redacted_trajectory_shows_sizes(tmp_path: Path) -> None:
    path = view_data.tree_trajectory(tmp_path / "run.jsonl")
    header, events = read_trajectory(path)
    from rlm_compat.events import CONTENT_FIELDS

    redacted = []
    for event in events:
        data = {
            k: ({"chars": len(v)} if k in CONTENT_FIELDS and isinstance(v, str) else v)
            for k, v in event["data"].items()
        }
        if "messages" in data:
            data["messages"] = [
                {"role": m["role"], "content": {"chars": len(m["content"])}} for m in data["messages"]
            ]
        redacted.append({**event, "data": data})
    model = from_events({**header, "redacted": True}, redacted)
    assert model.redacted and model.answer == "[redacted: 9 characters]"
    assert model.nodes[0].steps[0].reply and model.nodes[0].steps[0].reply.startswith("[redacted: ")


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda d: d / "missing.jsonl", "no such file"),
        (lambda d: (d / "empty").mkdir() or d / "empty", "without runs.jsonl"),
        (
            lambda d: (d / "x.json").write_text('{"a": 1}') and d / "x.json",
            "not `rlm-compat conformance --json`",
        ),
        (
            lambda d: (d / "x.jsonl").write_text('{"schema": "other"}\n') and d / "x.jsonl",
            "not a trajectory in a known format",
        ),
        (
            lambda d: (
                (d / "x.jsonl").write_text('{"schema": "rlm_compat.trajectory", "schema_version": 99}\n')
                and d / "x.jsonl"
            ),
            "version 99",
        ),
    ],
)
def test_bad_inputs_get_typed_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], setup: Any, message: str
) -> None:
    path = setup(tmp_path)
    with pytest.raises(ViewInputError, match=re.escape(message)):
        write_view([path], tmp_path / "out.html")
    assert main(["view", str(path), "-o", str(tmp_path / "out.html")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("rlm-compat view: ViewInputError:") and message in err and "Traceback" not in err


def test_bad_divergence_and_mixed_inputs(tmp_path: Path) -> None:
    trajectory = view_data.tree_trajectory(tmp_path / "run.jsonl")
    bad = tmp_path / "d.json"
    bad.write_text('{"reason": "x", "node_id": "rlm-1", "iteration": 3}')  # not a replay report
    with pytest.raises(ViewInputError, match=re.escape("output of `rlm-compat replay TRAJECTORY --json`")):
        write_view([trajectory], tmp_path / "o.html", divergence=bad)
    bad.write_text('{"profile": "upstream", "steps": [{"node": "rlm-1"}]}')
    with pytest.raises(ViewInputError, match=r"steps\[0\] lacks 'step'"):
        write_view([trajectory], tmp_path / "o.html", divergence=bad)
    with pytest.raises(ViewInputError, match="several inputs"):
        write_view([trajectory, trajectory], tmp_path / "o.html")
    with pytest.raises(ViewInputError, match="-o takes the HTML file"):
        write_view([trajectory], tmp_path)


def test_missing_extra_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "pygments" else real(name, *a)
    )
    trajectory = view_data.tree_trajectory(tmp_path / "run.jsonl")
    assert main(["view", str(trajectory), "-o", str(tmp_path / "o.html")]) == 1
    assert (
        "ViewMissingError: rlm-compat view needs pygments: pip install 'rlm-compat[view]'"
        in capsys.readouterr().err
    )
    assert not (tmp_path / "o.html").exists()


def test_replay_view_without_the_extra_stops_before_replaying(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "jinja2" else real(name, *a)
    )
    out = tmp_path / "r.html"
    rlms = REPLAY_DATA / "rlms_run.jsonl"
    assert main(["replay", str(rlms), "--no-context", "--view", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "pip install 'rlm-compat[view]'" in captured.err
    assert not out.exists()


def test_help_lists_view(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["view", "--help"])
    assert "--divergence" in capsys.readouterr().out


# Foreign trajectories and replays: read by the importers `rlm-compat replay` uses.

REPLAY_DATA = DATA / "replay"


def _replay_steps(model: TrajectoryModel) -> list[tuple[str, int]]:
    return [(n.node_id, s.replay_step) for n in model.nodes for s in n.steps if s.replay_step is not None]


def test_an_rlms_log_renders_from_the_importers_reading() -> None:
    model = read_trajectory_model(REPLAY_DATA / "rlms_run.jsonl")
    run = load_run(REPLAY_DATA / "rlms_run.jsonl")
    assert model.source_format == "rlms" and model.answer == "2"
    root, leaf = model.nodes
    assert root.model == "gpt-5-mini" and root.answer == "2"
    assert leaf.kind == "leaf" and leaf.query == "Summarise these shipped orders: [17, 40]"
    assert leaf.answer == "Orders 17 and 40 were shipped."
    assert [b.children for s in root.steps for b in s.subcalls] == [["root.call-1"]]
    # one step per code block, numbered as replay numbers them, with the recorded code and output
    assert _replay_steps(model) == [("root", s.number) for s in run.steps]
    executed = [s for s in root.steps if s.replay_step is not None]
    assert [s.code for s in executed] == [s.code for s in run.steps]
    assert [s.output for s in executed] == [s.observation for s in run.steps]
    # iteration 3 ran two code blocks: its reply is on the first, both say so
    third = [s for s in root.steps if s.iteration == 3]
    assert len(third) == 2 and third[0].reply and "```repl" in third[0].reply and third[1].reply is None
    assert "code block 2 of 2 of this reply" in third[1].notes
    # the last iteration ran no code: it is shown, with its final answer
    last = root.steps[-1]
    assert last.replay_step is None and last.code is None and last.reply
    assert any("final answer '2'" in note for note in last.notes)


def test_an_rlms_child_rlm_and_plain_call_become_linked_nodes() -> None:
    model = read_trajectory_model(REPLAY_DATA / "rlms_nested.jsonl")
    ids = [n.node_id for n in model.nodes]
    assert ids == ["root", "root.1", "root.call-1"]  # each node before the nodes it started
    root, child, leaf = model.nodes
    (batch,) = root.steps[0].subcalls
    assert batch.count == 2 and batch.children == ["root.1", "root.call-1"]
    assert root.children == ["root.1", "root.call-1"]
    assert child.kind == "rlm" and child.depth == 1 and child.answer == "2"
    assert child.query is not None and child.query.startswith("Count these orders: Order 17")
    assert child.steps[0].code == "import re\nprint(len(re.findall('shipped', context)))"
    assert leaf.kind == "leaf" and leaf.query == "Say hi" and leaf.answer == "hi"
    assert leaf.steps[0].call is not None and leaf.steps[0].call.latency_seconds == 0.2


@pytest.mark.parametrize("name", ["dspy_prediction.json", "dspy_entries.jsonl"])
def test_dspy_trajectories_render(name: str, tmp_path: Path) -> None:
    out = tmp_path / "d.html"
    assert main(["view", str(REPLAY_DATA / name), "-o", str(out)]) == 0
    data = _data_block(out.read_text(), "trajectory-data")
    assert data["source_format"] == "dspy"
    steps = data["nodes"][0]["steps"]
    assert [s["replay_step"] for s in steps] == [1, 2, 3, 4, 5]
    assert "".join(steps[0]["hl_reply"][1::2]) == "Look at the data first."  # the reasoning
    assert steps[3]["error"] is True and steps[3]["output"].startswith("[Error] NameError")
    assert data["answer"] == ("2" if name.endswith(".json") else None)


def test_a_corrupt_foreign_log_gives_the_importers_error(tmp_path: Path) -> None:
    lines = (REPLAY_DATA / "rlms_run.jsonl").read_text().splitlines()
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join([lines[0], lines[1][:80], *lines[2:]]) + "\n")
    with pytest.raises(TrajectoryError) as replay_error:
        load_run(broken)
    with pytest.raises(ViewInputError) as view_error:
        write_view([broken], tmp_path / "o.html")
    assert str(view_error.value) == str(replay_error.value) and "line 2" in str(view_error.value)


def test_a_random_json_file_is_still_refused(tmp_path: Path) -> None:
    odd = tmp_path / "odd.json"
    odd.write_text('{"answer": "2"}')
    with pytest.raises(ViewInputError, match=re.escape("nor a dspy.RLM trajectory")):
        write_view([odd], tmp_path / "o.html")


def test_replay_json_is_the_divergence_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trajectory = view_data.replayable_trajectory(tmp_path / "run.jsonl")
    context = ["--context", view_data.REPLAY_CONTEXT]
    assert main(["replay", str(trajectory), "--profile", "upstream", "--json", *context]) == 1
    report = tmp_path / "replay.json"
    report.write_text(capsys.readouterr().out)
    printed = json.loads(report.read_text())
    marks = read_divergence(report)
    assert marks.profile == "upstream" and marks.steps == len(printed["steps"])
    assert [(d.node_id, d.step) for d in marks.divergences] == [
        (s["node"], s["step"]) for s in printed["steps"] if s["diverged"]
    ]
    first = marks.divergences[0]
    assert first.node_id == "rlm-1" and first.step == 1 and first.recorded == "5"
    assert first.reason == "fails under upstream; it ran in the recording"
    assert first.replayed is not None and "__import__" in first.replayed
    assert any(d.node_id != "rlm-1" for d in marks.divergences)  # the child's own divergence

    out = tmp_path / "run.html"
    assert main(["view", str(trajectory), "--divergence", str(report), "-o", str(out)]) == 0
    data = _data_block(out.read_text(), "trajectory-data")
    assert data["replay"]["profile"] == "upstream"
    assert len(data["replay"]["divergences"]) == printed["divergences"]
    steps = {(n["node_id"], s["replay_step"]) for n in data["nodes"] for s in n["steps"]}
    assert all((d["node_id"], d["step"]) in steps for d in data["replay"]["divergences"])

    # an identical replay is a divergence file too: nothing to mark, the banner says identical
    assert main(["replay", str(trajectory), "--json", *context]) == 0
    report.write_text(capsys.readouterr().out)
    assert read_divergence(report).divergences == []
    assert main(["view", str(trajectory), "--divergence", str(report), "-o", str(out)]) == 0


def test_replay_view_writes_the_same_marks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trajectory = view_data.replayable_trajectory(tmp_path / "run.jsonl")
    context = ["--context", view_data.REPLAY_CONTEXT, "--profile", "upstream"]
    assert main(["replay", str(trajectory), "--json", *context]) == 1
    report = tmp_path / "replay.json"
    report.write_text(capsys.readouterr().out)
    assert main(["view", str(trajectory), "--divergence", str(report), "-o", str(tmp_path / "a.html")]) == 0
    out = tmp_path / "b.html"
    assert main(["replay", str(trajectory), "--view", str(out), *context]) == 1
    captured = capsys.readouterr()
    assert captured.out.startswith("replay of ") and f"wrote {out}" in captured.err
    via_file = _data_block((tmp_path / "a.html").read_text(), "trajectory-data")["replay"]
    assert _data_block(out.read_text(), "trajectory-data")["replay"] == via_file
    assert len(via_file["divergences"]) == 4


def test_a_replay_of_another_trajectory_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rlms = REPLAY_DATA / "rlms_run.jsonl"
    context = ["--context-file", str(REPLAY_DATA / "context.txt")]
    assert main(["replay", str(rlms), "--profile", "upstream", "--json", *context]) == 1
    report = tmp_path / "replay.json"
    report.write_text(capsys.readouterr().out)
    with pytest.raises(ViewInputError, match="a replay of another trajectory"):
        write_view([REPLAY_DATA / "rlms_nested.jsonl"], tmp_path / "o.html", divergence=report)
    written = write_view([rlms], tmp_path / "o.html", divergence=report)  # its own trajectory
    data = _data_block(written[0].read_text(), "trajectory-data")
    assert [d["step"] for d in data["replay"]["divergences"]] == [
        s["step"] for s in json.loads(report.read_text())["steps"] if s["diverged"]
    ]
