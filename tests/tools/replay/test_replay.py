"""Replay: recorded runs re-executed step by step under a profile, and foreign trajectories read.

Runs are recorded for real (RLM -> litellm -> HTTP -> a scripted server on 127.0.0.1); the
foreign fixtures in tests/data/replay/ are hand-written in rlms 0.1.1's and dspy.RLM's formats.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from locations import DATA

from rlm_compat import RLM
from rlm_compat.errors import TrajectoryError
from rlm_compat.testing import ErrorReply, ScriptedChatServer
from rlm_compat.tools.cli import main
from rlm_compat.tools.replay.foreign import detect_format, load_run
from rlm_compat.tools.replay.replayer import replay
from rlm_compat.tools.runs.steps import (
    RecordedNode,
    RecordedRun,
    RecordedStep,
    RecordedSubcall,
    from_trajectory,
)

ServerFactory = Callable[..., ScriptedChatServer]
DATA = DATA / "replay"
CONTEXT = "alpha beta gamma delta epsilon"

ROOT_REPLIES = [
    # upstream refuses the import; the helper reads a top-level name (separate scopes, on every Python:
    # a comprehension alone would see it on 3.12+, where comprehensions are inlined)
    "```python\nimport re\nlimit = 5\ndef is_long(w):\n    return len(w) > limit\n"
    "long = [w for w in context.split() if is_long(w)]\nprint(long)\n```",
    "```python\nsummary = llm_query('sum up')\nchild = recursive_llm('child q', context[:10])\nprint(summary, child)\n```",
    'FINAL("done")',
]
CHILD_REPLIES = ["```python\nn = 0\nfor w in context.split():\n    n += 1\nprint(n)\n```", 'FINAL("two")']


def script(request: dict[str, Any]) -> str:
    messages = request["messages"]
    if messages[0]["role"] != "system":
        return "leaf: " + str(messages[-1]["content"])
    turn = sum(1 for m in messages if m["role"] == "assistant")
    replies = CHILD_REPLIES if messages[1]["content"] == "child q" else ROOT_REPLIES
    return replies[turn]


def record(server: ScriptedChatServer, path: Path, profile: str = "fixed") -> str:
    rlm = RLM(
        "openai/gpt-4o-mini",
        api_base=server.base_url,
        api_key="sk-loopback",
        isolation="inline",
        max_depth=3,
        profile=profile,
        trajectory_path=path,
    )
    return rlm.complete("root q", CONTEXT)


@pytest.fixture
def recorded(chat_server: ServerFactory, tmp_path: Path) -> Path:
    path = tmp_path / "run.jsonl"
    assert record(chat_server(script), path) == "done"
    return path


def test_steps_are_read_per_node_with_their_subcalls(recorded: Path) -> None:
    run = from_trajectory(recorded)
    assert [n.node_id for n in run.nodes] == ["rlm-1", "rlm-5"]
    root, child = run.nodes
    assert [len(root.steps), len(child.steps)] == [3, 2]
    assert child.parent_id == "rlm-1" and child.query == "child q" and child.context_chars == 10
    kinds = [(s.kind, s.reply, s.child) for s in root.steps[1].subcalls]
    assert kinds == [("leaf", "leaf: sum up", ""), ("child", "two", "rlm-5")]
    assert run.profile == "fixed" and run.isolation == "inline" and run.max_depth == 3


@pytest.mark.parametrize("isolation", ["inline", "process"])
def test_replay_under_the_recording_profile_is_identical(recorded: Path, isolation: str) -> None:
    report = replay(from_trajectory(recorded), isolation=isolation, context=CONTEXT)
    assert report.identical and report.profile == "fixed"
    assert [o.step.node for o in report.outcomes] == ["rlm-1", "rlm-1", "rlm-5", "rlm-5", "rlm-1"]
    assert all(o.reached and not o.error for o in report.outcomes)
    assert "identical" in report.render()


def test_replay_under_upstream_reports_the_first_divergence(recorded: Path) -> None:
    report = replay(from_trajectory(recorded), profile="upstream", context=CONTEXT)
    first = report.divergences[0]
    assert (first.step.node, first.step.number) == ("rlm-1", 1)
    assert first.step.observation == "['epsilon']"
    assert first.error and "__import__ not found" in (first.observation or "")
    text = report.render()
    assert "first divergence: node rlm-1 step 1" in text and "import re" in text
    assert text.count("divergence: node") == 1


def test_an_ablation_moves_the_first_divergence_to_the_next_quirk(recorded: Path) -> None:
    run = from_trajectory(recorded)
    report = replay(run, profile="upstream-without:imports_refused", context=CONTEXT)
    first = report.divergences[0]
    assert (first.step.node, first.step.number) == ("rlm-1", 1)
    assert first.error and "is not defined" in (first.observation or "")  # `limit` or `is_long`
    fixed_scopes = replay(run, profile="upstream-without:imports_refused,separate_scopes", context=CONTEXT)
    assert (fixed_scopes.divergences[0].step.number, fixed_scopes.divergences[0].step.node) == (2, "rlm-1")


def test_a_child_the_replayed_code_never_starts_is_reported_not_reached(recorded: Path) -> None:
    report = replay(from_trajectory(recorded), profile="upstream", context=CONTEXT)
    child_steps = [o for o in report.outcomes if o.step.node == "rlm-5"]
    assert len(child_steps) == 2 and not any(o.reached for o in child_steps)
    assert "rlm-1 did not start rlm-5 under profile upstream" in child_steps[0].note
    assert "not reached" in report.render(every=True)
    assert len(report.divergences) == 5


def test_a_run_recorded_under_upstream_replays_identically_under_upstream_only(
    chat_server: ServerFactory, tmp_path: Path
) -> None:
    path = tmp_path / "up.jsonl"

    def upstream_script(request: dict[str, Any]) -> str:
        turn = sum(1 for m in request["messages"] if m["role"] == "assistant")
        return ["```python\nx = 1\nx += 1\nprint(x)\n```", 'FINAL("x")'][turn]

    record(chat_server(upstream_script), path, profile="upstream")
    run = from_trajectory(path)
    assert run.profile == "upstream" and run.nodes[0].steps[0].error
    assert replay(run, context=CONTEXT).identical
    fixed = replay(run, profile="fixed", context=CONTEXT)
    assert fixed.divergences[0].observation == "2" and not fixed.divergences[0].error


def batch_script(request: dict[str, Any]) -> str | ErrorReply:
    messages = request["messages"]
    content = str(messages[-1]["content"])
    if messages[0]["role"] != "system":
        return ErrorReply(400, "bad prompt") if "bad" in content else "leaf " + content
    if messages[1]["content"] in ("c1", "c2"):
        return "```python\nprint(context)\nFINAL(context.upper())\n```"
    turn = sum(1 for m in messages if m["role"] == "assistant")
    return [
        "```python\nrs = rlm_query_batched(['c1', 'c2'], ['ctx one', 'ctx two'])\n"
        "ls = llm_query_batched(['p1', 'bad p2'])\nprint(rs, ls)\n```",
        "```python\nr = llm_query('bad one')\n```",
        'FINAL("ok")',
    ][turn]


@pytest.mark.parametrize("isolation", ["inline", "process"])
def test_batches_children_and_failed_calls_replay_identically(
    chat_server: ServerFactory, tmp_path: Path, isolation: str
) -> None:
    path = tmp_path / "batch.jsonl"
    server = chat_server(batch_script)
    rlm = RLM(
        "openai/gpt-4o-mini",
        api_base=server.base_url,
        api_key="sk-loopback",
        isolation=isolation,
        max_retries=0,
        trajectory_path=path,
    )
    assert rlm.complete("root q", CONTEXT) == "ok"
    run = from_trajectory(path)
    assert len(run.nodes) == 3
    first, second = run.root.steps[0], run.root.steps[1]
    assert [(s.kind, s.reply) for s in first.subcalls] == [
        ("child", "CTX ONE"),
        ("child", "CTX TWO"),
        ("leaf", "leaf p1"),
        ("leaf", None),
    ]
    assert "bad prompt" in first.subcalls[3].error and "bad prompt" in (second.observation or "")
    report = replay(run, isolation=isolation, context=CONTEXT)
    assert report.identical, report.render(every=True)
    root, one, two = (n.node_id for n in run.nodes)
    assert [o.step.node for o in report.outcomes] == [root, one, two, root, root]
    assert [o.observation for o in report.outcomes[1:3]] == ["ctx one", "ctx two"]  # what the code passed
    upstream = replay(run, profile="upstream", isolation=isolation, context=CONTEXT)
    assert [o.reached for o in upstream.outcomes] == [True, False, False, True, True]


def test_a_call_the_recording_never_made_fails_inside_the_code() -> None:
    code = "a = llm_query('one')\nb = llm_query('two')\nprint(a, b)"
    step = RecordedStep("root", 1, "entry 1", code, "x y", False, (RecordedSubcall("any", reply="x"),), seq=1)
    run = RecordedRun("made-up", "dspy", "test", (RecordedNode("root", "", 0, "", None, (step,)),))
    (outcome,) = replay(run, isolation="inline").outcomes
    assert outcome.error and outcome.diverged
    assert "the recording has no further answer for llm_query in node root step 1" in (
        outcome.observation or ""
    )


def test_the_loops_argument_checks_are_kept(chat_server: ServerFactory, tmp_path: Path) -> None:
    code = "try:\n    llm_query(5)\nexcept Exception as e:\n    print(type(e).__name__, e)\nprint(llm_query('ok'))"
    step = RecordedStep(
        "root", 1, "entry 1", code, None, None, (RecordedSubcall("leaf", reply="fine"),), seq=1
    )
    run = RecordedRun("made-up", "dspy", "test", (RecordedNode("root", "", 0, "", None, (step,)),))
    (outcome,) = replay(run, isolation="inline").outcomes
    assert outcome.observation == "TypeError llm_query(prompt) needs a str, not int\nfine"


def test_cli_replay_exit_status_and_output(recorded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(recorded), "--context", CONTEXT]) == 0
    assert "identical" in capsys.readouterr().out
    assert main(["replay", str(recorded), "--context", CONTEXT, "--profile", "upstream", "--all"]) == 1
    out = capsys.readouterr().out
    assert "5 of 5 step(s) diverge" in out and out.count("divergence: node") == 5
    assert "recorded observation:\n    ['epsilon']" in out
    assert main(["replay", str(recorded), "--context", CONTEXT, "--profile", "upstream", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert (data["profile"], data["identical"], data["divergences"]) == ("upstream", False, 5)
    first = data["steps"][0]
    assert (first["node"], first["step"], first["recorded_observation"], first["error"]) == (
        "rlm-1",
        1,
        "['epsilon']",
        True,
    )
    assert [s["reached"] for s in data["steps"]] == [True, True, False, False, True]


def test_cli_replay_reads_the_context_from_a_file(recorded: Path, tmp_path: Path) -> None:
    context_file = tmp_path / "context.txt"
    context_file.write_text(CONTEXT, encoding="utf-8")
    assert main(["replay", str(recorded), "--context-file", str(context_file)]) == 0


def test_the_context_is_required_and_checked(recorded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = from_trajectory(recorded)
    with pytest.raises(TrajectoryError, match=r"keeps only the context's size \(30 characters\)"):
        replay(run)
    with pytest.raises(TrajectoryError, match="had 30 characters, the one given has 3"):
        replay(run, context="abc")
    assert main(["replay", str(recorded)]) == 2
    assert "--context-file" in capsys.readouterr().err
    assert main(["replay", str(recorded), "--no-context"]) == 1  # runs, over "", and diverges


def cut(source: Path, target: Path, keep_chars: int) -> Path:
    target.write_text(source.read_text(encoding="utf-8")[:keep_chars], encoding="utf-8")
    return target


def test_a_truncated_trajectory_names_its_line(
    recorded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = recorded.read_text(encoding="utf-8").splitlines(keepends=True)
    keep = sum(len(line) for line in lines[:6]) + 20  # six whole lines and a piece of the seventh
    broken = cut(recorded, tmp_path / "cut.jsonl", keep)
    with pytest.raises(TrajectoryError, match=r"cut\.jsonl: line 7: truncated or corrupt JSON"):
        from_trajectory(broken)
    assert main(["replay", str(broken), "--context", CONTEXT]) == 2
    assert "line 7: truncated or corrupt JSON" in capsys.readouterr().err


def test_a_trajectory_cut_between_lines_replays_what_it_holds(recorded: Path, tmp_path: Path) -> None:
    lines = recorded.read_text(encoding="utf-8").splitlines(keepends=True)
    first_step = next(i for i, line in enumerate(lines) if '"repl_step"' in line)
    partial = cut(recorded, tmp_path / "partial.jsonl", sum(len(line) for line in lines[: first_step + 1]))
    report = replay(from_trajectory(partial), context=CONTEXT)
    assert report.identical and len(report.outcomes) == 1


@pytest.mark.parametrize(
    ("line", "match"),
    [
        ("not json at all", r"line 4: truncated or corrupt JSON"),
        ("[1, 2]", r"line 4: a JSON list, not an object"),
        ('{"kind": "repl_step"}', r"line 4: not a trajectory event"),
        (
            '{"sequence":9,"kind":"repl_step","elapsed_seconds":0,"depth":0,"node_id":"rlm-9","parent_id":"",'
            '"data":{"iteration":1,"code":"x","output":"","error":false,"duration_seconds":0,"runner":"inline"}}',
            r"line 4: event of RLM node 'rlm-9', which has no rlm_start",
        ),
    ],
)
def test_a_corrupt_line_is_a_typed_error_naming_it(
    recorded: Path, tmp_path: Path, line: str, match: str
) -> None:
    lines = recorded.read_text(encoding="utf-8").splitlines()
    lines.insert(3, line)
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(TrajectoryError, match=match):
        load_run(broken)


def test_other_unusable_files_are_typed_errors(tmp_path: Path, chat_server: ServerFactory) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(TrajectoryError, match="empty file"):
        load_run(empty)
    other = tmp_path / "other.jsonl"
    other.write_text('{"hello": "world"}\n', encoding="utf-8")
    with pytest.raises(TrajectoryError, match="line 1: not a trajectory this rlm_compat reads"):
        load_run(other)
    with pytest.raises(TrajectoryError, match="cannot read the file"):
        load_run(tmp_path / "missing.jsonl")
    redacted = tmp_path / "redacted.jsonl"
    server = chat_server(['FINAL("x")'])
    RLM(
        "openai/gpt-4o-mini",
        api_base=server.base_url,
        api_key="sk-loopback",
        isolation="inline",
        trajectory_path=redacted,
        capture_trajectory_content=False,
    ).complete("q", "c")
    with pytest.raises(TrajectoryError, match="line 1: a redacted trajectory"):
        load_run(redacted)
    assert isinstance(TrajectoryError("x"), ValueError)  # read_trajectory's callers caught ValueError


# --- foreign formats -----------------------------------------------------------------------------

FIXTURE_CONTEXT = (DATA / "context.txt").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("rlms_run.jsonl", "rlms"),
        ("rlms_nested.jsonl", "rlms"),
        ("dspy_prediction.json", "dspy"),
        ("dspy_entries.jsonl", "dspy"),
    ],
)
def test_formats_are_detected(name: str, expected: str) -> None:
    assert detect_format(DATA / name) == expected


def test_rlms_log_code_blocks_become_steps_with_their_observations() -> None:
    run = load_run(DATA / "rlms_run.jsonl")
    assert run.format == "rlms" and run.max_depth == 1 and len(run.nodes) == 1
    steps = run.steps
    assert len(steps) == 7  # iteration 3 has two code blocks; the FINAL iteration has none
    assert steps[3].where == "line 4, code block 2"
    assert steps[5].subcalls[0].reply == "Orders 17 and 40 were shipped."
    assert steps[6].error and not steps[0].error


def test_rlms_code_replays_under_fixed_with_served_subcalls() -> None:
    report = replay(
        load_run(DATA / "rlms_run.jsonl"), profile="fixed", isolation="inline", context=FIXTURE_CONTEXT
    )
    assert [o.error for o in report.outcomes] == [False] * 6 + [True]
    assert report.outcomes[5].observation == "Orders 17 and 40 were shipped."  # the recorded reply
    assert (
        report.outcomes[1].observation
        == "[('17', 'shipped'), ('25', 'delayed'), ('3', 'lost'), ('40', 'shipped')]"
    )
    assert [o.step.number for o in report.divergences] == [7]  # only the error text's form differs


def test_rlms_code_under_upstream_breaks_where_its_quirks_are() -> None:
    run = load_run(DATA / "rlms_run.jsonl")
    report = replay(run, profile="upstream", isolation="inline", context=FIXTURE_CONTEXT)
    assert "__import__ not found" in (report.outcomes[1].observation or "")
    without = replay(
        run, profile="upstream-without:imports_refused", isolation="inline", context=FIXTURE_CONTEXT
    )
    assert not without.outcomes[1].error
    assert "_inplacevar_" in (without.outcomes[2].observation or "")  # shipped += 1
    assert "_write_" in (without.outcomes[3].observation or "")  # by_status[status] = ...


@pytest.mark.parametrize("name", ["dspy_prediction.json", "dspy_entries.jsonl"])
def test_dspy_trajectories_replay_under_both_profiles(name: str) -> None:
    run = load_run(DATA / name)
    assert run.format == "dspy" and len(run.steps) == 5
    assert [s.error for s in run.steps] == [False, False, False, True, False]
    fixed = replay(run, profile="fixed", isolation="inline", context=FIXTURE_CONTEXT)
    assert [o.error for o in fixed.outcomes] == [False, False, False, True, False]  # SUBMIT is provided
    assert fixed.outcomes[2].observation == "('17', 'shipped') 3"
    upstream = replay(
        run, profile="upstream-without:imports_refused", isolation="inline", context=FIXTURE_CONTEXT
    )
    assert "_write_" in (upstream.outcomes[1].observation or "")


def test_format_can_be_named_and_a_wrong_one_is_a_typed_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(TrajectoryError, match="line 1: an entry needs code and output strings"):
        load_run(DATA / "rlms_run.jsonl", "dspy")
    code = main(["replay", str(DATA / "dspy_entries.jsonl"), "--format", "rlms", "--no-context"])
    assert (
        code == 2
        and "nothing to replay (skipped lines of type None (first at line 1" in capsys.readouterr().err
    )


def test_corrupt_foreign_files_name_the_line(tmp_path: Path) -> None:
    lines = (DATA / "rlms_run.jsonl").read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[2])
    del record["code_blocks"]
    broken = tmp_path / "rlms.jsonl"
    broken.write_text("\n".join([lines[0], lines[1], json.dumps(record)]) + "\n", encoding="utf-8")
    with pytest.raises(
        TrajectoryError, match=r"rlms\.jsonl: line 3: an iteration without a code_blocks list"
    ):
        load_run(broken)
    broken.write_text("\n".join([lines[0], lines[1][:50]]) + "\n", encoding="utf-8")
    with pytest.raises(TrajectoryError, match="line 2: truncated or corrupt JSON"):
        load_run(broken)
    entries = json.loads((DATA / "dspy_prediction.json").read_text(encoding="utf-8"))["trajectory"]
    del entries[2]["code"]
    dspy = tmp_path / "dspy.json"
    dspy.write_text(json.dumps(entries), encoding="utf-8")
    with pytest.raises(TrajectoryError, match="entry 3: an entry needs code and output strings"):
        load_run(dspy)


def test_a_run_under_the_0_5_api_replays_in_its_namespace(chat_server: ServerFactory, tmp_path: Path) -> None:
    def script(request: dict[str, Any]) -> str:
        messages = request["messages"]
        last = str(messages[-1]["content"])
        if last.startswith("Task:"):  # 0.5's plain sub-call: "Task:\n<query>\n\nContext:\n..."
            return "leaf: " + last.splitlines()[1]
        return (
            "```python\nsaid = llm_query('what', 'some text')\nprint(said, sorted(SHOW_VARS()))\n"
            "answer['content'] = said\nanswer['ready'] = True\n```"
        )

    path = tmp_path / "v05.jsonl"
    server = chat_server(script)
    rlm = RLM(
        "openai/gpt-4o-mini",
        api_base=server.base_url,
        api_key="sk-loopback",
        isolation="inline",
        trajectory_path=path,
        api="0.5",
        capture_trajectory_content=True,  # 0.5's default keeps lengths only: nothing to replay
    )
    assert rlm.complete("q", CONTEXT) == "leaf: what"
    run = from_trajectory(path)
    assert run.api == "0.5"
    assert replay(run, context=CONTEXT).identical
    as_2fb46cc = replay(run, context=CONTEXT, api="2fb46cc")
    assert as_2fb46cc.divergences and as_2fb46cc.outcomes[0].error  # no SHOW_VARS, no answer dict


def test_rlms_child_rlms_are_replayed_over_the_prompt_they_were_given() -> None:
    """rlms (max_depth > 1) keeps a child RLM's iterations in its sub-call's metadata; the child's
    context is the prompt its parent passed to rlm_query."""
    run = load_run(DATA / "rlms_nested.jsonl")
    root, child = run.nodes
    assert (child.node_id, child.parent_id, child.depth) == ("root.1", "root", 1)
    assert child.steps[0].where == "line 2, code block 1, sub-call 1, iteration 1, code block 1"
    assert [(s.kind, s.reply, s.child) for s in root.steps[0].subcalls] == [
        ("child", "2", "root.1"),
        ("any", "hi", ""),
    ]
    fixed = replay(run, profile="fixed", isolation="inline", context=FIXTURE_CONTEXT)
    assert fixed.identical, fixed.render(every=True)
    assert [o.step.node for o in fixed.outcomes] == ["root", "root.1"]
    upstream = replay(
        run, profile="upstream-without:minimal_env", isolation="inline", context=FIXTURE_CONTEXT
    )
    assert [o.diverged for o in upstream.outcomes] == [False, True]  # the child's `import re`
    assert "__import__ not found" in (upstream.divergences[0].observation or "")


def test_a_closed_pipe_ends_the_output_quietly() -> None:
    """`rlm-compat replay ... | head`: a reader that went away is no traceback (exit 141, as Unix tools)."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # every write to stdout now fails with EPIPE, deterministically
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from rlm_compat.tools.cli import main; sys.exit(main())",
                "replay",
                str(DATA / "rlms_run.jsonl"),
                "--all",
                "--profile",
                "upstream",
                "--context-file",
                str(DATA / "context.txt"),
            ],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
    assert done.returncode == 141


def test_the_format_flags_offer_every_reader() -> None:
    from rlm_compat.tools.formats.arguments import FORMAT_CHOICES
    from rlm_compat.tools.replay.foreign import FORMATS

    assert FORMAT_CHOICES == FORMATS
