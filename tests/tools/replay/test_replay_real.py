"""Replay reads the logs people actually have (issue 24 item 6).

The files in tests/data/replay/real/ were written by real models through rlms, dspy.RLM and the
applications built on them (dspy.RLM's verbose log in a notebook, LA3D/rlm's event logs and eval
results, fabric-rlm's trajectories) and collected verbatim from public repositories
(PROVENANCE.json: source, commit, path, licence). Every one is read and replayed under both
profiles: identical or diverging, never a refusal; together they cover every format and source of
the real-trajectory corpus (real_corpus/SOURCES.json).
The last test runs rlms itself against the loopback server and reads the log it wrote; it needs
rlms from PyPI, so it runs when RLM_COMPAT_RLMS_TESTS names a version (.ci/run sets it for the
default Python) and fails, not skips, under RLM_COMPAT_CI=1 when rlms cannot be had.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from locations import DATA, ROOT

from rlm_compat.errors import TrajectoryError
from rlm_compat.testing import ScriptedChatServer
from rlm_compat.tools.replay.foreign import FORMATS, detect_format, load_run
from rlm_compat.tools.replay.replayer import replay

ServerFactory = Callable[..., ScriptedChatServer]

REAL = DATA / "replay" / "real"
PROVENANCE = json.loads((REAL / "PROVENANCE.json").read_text(encoding="utf-8"))["files"]
REPLAYED = PROVENANCE
"""Every real file is one ``rlm-compat replay`` reads."""
SOURCES = json.loads((ROOT / "real_corpus" / "SOURCES.json").read_text(encoding="utf-8"))["sources"]
PERMISSIVE = ("MIT", "Apache-2.0", "BSD", "CC-BY")
RLMS_VERSION = os.environ.get("RLM_COMPAT_RLMS_TESTS", "")


def test_every_real_file_has_provenance_and_a_redistributable_licence() -> None:
    listed = {entry["file"] for entry in PROVENANCE}
    assert listed == {p.name for p in REAL.iterdir() if p.name != "PROVENANCE.json"}
    for entry in PROVENANCE:
        assert entry["licence"].startswith(PERMISSIVE), entry
        assert len(entry["commit"]) == 40 and entry["source"].count("/") == 1 and entry["model"]
    assert {e["format"] for e in REPLAYED} == set(FORMATS) - {"rlm_compat"}


def test_every_format_and_source_of_the_corpus_has_a_real_file_here() -> None:
    """A representative per corpus source and format: replaying it is replaying what the corpus holds."""
    same = {"la3d-kag": "la3d-events"}  # LA3D's KAG runs write the same event lines
    corpus = {(s["repo"], same.get(f.get("format", s["format"]), f.get("format", s["format"])))
              for s in SOURCES for f in s["files"]}  # fmt: skip
    assert corpus <= {(e["source"], e["format"]) for e in REPLAYED}


@pytest.mark.parametrize("entry", REPLAYED, ids=lambda e: e["file"])
@pytest.mark.parametrize("profile", ["fixed", "upstream"])
def test_real_files_are_read_and_replayed_under_both_profiles(entry: dict[str, Any], profile: str) -> None:
    path = REAL / entry["file"]
    assert detect_format(path) == entry["format"]
    run = load_run(path)
    assert run.steps and run.root.model in ("", entry["model"])
    report = replay(run, profile=profile, isolation="inline", same_context=False)
    assert len(report.outcomes) == len(run.steps)
    assert all(o.observation is not None for o in report.outcomes)  # every step ran
    assert report.render(every=True).startswith("replay of ")  # a verdict, not a crash


def test_newer_rlms_lines_are_understood_or_skipped_with_a_notice(tmp_path: Path) -> None:
    run = load_run(REAL / "rlms_alexzhang13_trace-log-example.jsonl")
    assert run.context == "Generate a random number between 1 and 100."  # the first run_context prompt
    assert "completion_context" in run.extra_names  # its jupyter REPL's name for the context
    assert any("6 runs in one log" in n for n in run.notices)
    lines = (REAL / "rlms_alexzhang13_trace-log-example.jsonl").read_text(encoding="utf-8").splitlines()
    future = [lines[0], json.dumps({"type": "checkpoint", "state": {}}), *lines[1:]]
    first = json.loads(lines[2])
    first["new_field"] = 1
    future[3] = json.dumps(first)
    path = tmp_path / "future.jsonl"
    path.write_text("\n".join(future) + "\n", encoding="utf-8")
    notices = load_run(path).notices
    assert "skipped lines of type 'checkpoint' (first at line 2, 1 line(s))" in notices
    assert any(n.startswith("ignored fields of iteration lines: new_field") for n in notices)


def test_replay_cli_prints_the_notices_and_a_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    from rlm_compat.tools.cli import main

    status = main(
        ["replay", str(REAL / "dspy_jameshwade_dspy-rlm-run-3.json"), "--no-context", "--isolation", "inline"]
    )
    out, err = capsys.readouterr()
    assert status in (0, 1) and "Traceback" not in out + err
    assert "notice: ignored fields of the entries: is_final, iteration, success" in err
    assert "step(s) diverge" in out or "identical" in out


def test_a_dspy_verbose_log_in_a_notebook_is_read_as_dspy_ran_it(tmp_path: Path) -> None:
    """Qredence/fleet-rlm's notebook: five dspy.RLM runs logged with verbose=True in its outputs."""
    path = REAL / "dspylog_qredence_fleet-rlm_rlm-dspy-modal_d54cc645.ipynb.json"
    run = load_run(path)
    assert [len(n.steps) for n in run.nodes] == [2, 5, 6, 3, 5]
    assert all(not n.parent_id for n in run.nodes) and "SUBMIT" in run.extra_names
    assert "regex_extract" in run.tools  # the app's own tool: its results are not in the log
    codes = [s.code for s in run.steps]
    assert [s.seq for s in run.steps] == list(range(1, 22))
    assert [s.node for s in run.steps[:3]] == ["root", "root", "run-2"]
    assert not any(c.startswith("```") for c in codes) and codes[0].startswith("def fibonacci(n):")
    assert any('regex_extract(docs, r"```' in c for c in codes)  # backticks inside the code are kept
    assert any(n.startswith("5 runs in one file") for n in run.notices)
    outcomes = replay(run, profile="fixed", isolation="inline", same_context=False).outcomes
    assert [o.error for o in outcomes[:2]] == [False, False]  # the Fibonacci run, as the model meant
    assert "0, 1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89" in str(outcomes[0].observation)
    # the same log as a text file (one cell's stream, as a logging handler writes it)
    cell = json.loads(path.read_text(encoding="utf-8"))["cells"]
    text = next(
        "".join(o["text"])
        for c in cell
        for o in c.get("outputs", [])
        if "RLM iteration 1/20" in "".join(o.get("text", []))
    )
    (log := tmp_path / "rlm.log").write_text(text, encoding="utf-8")
    assert detect_format(log) == "dspy-log"
    assert [s.code for s in load_run(log).steps] == [s.code for s in run.nodes[1].steps]


def test_a_newer_dspy_log_gives_each_step_its_logged_output() -> None:
    """dspy's own tutorial (stanfordnlp/dspy): its log adds ``Output (N chars):`` after each step."""
    run = load_run(REAL / "dspylog_stanfordnlp_dspy_cohort_analysis_dc80be77.ipynb.json")
    observations = [s.observation for s in run.steps]
    assert len(observations) == 5 and observations[-1] is None  # the SUBMIT step logs no output
    assert str(observations[0]).startswith("=== USERS ===\n(10000, 7)")
    assert str(observations[1]).startswith("Overall churn rate: 0.2377 (23.77%)")
    assert [s.error for s in run.steps] == [False, False, False, False, None]
    report = replay(run, profile="fixed", isolation="inline", same_context=False)
    assert report.divergences and report.divergences[0].step.number == 1  # its DataFrames are not in the log


def test_interleaved_runs_of_a_threaded_evaluation_are_not_stitched_together(tmp_path: Path) -> None:
    """Concurrent runs (dspy.Evaluate with threads) interleave their iterations in one log: each
    step becomes its own run instead of being glued to another run's earlier steps."""
    cells = json.loads(
        (REAL / "dspylog_qredence_fleet-rlm_rlm-dspy-modal_d54cc645.ipynb.json").read_text(encoding="utf-8")
    )["cells"]
    logs = ["".join(o["text"]) for c in cells for o in c.get("outputs", []) if o.get("name") == "stderr"]
    first, second = (text for text in logs if "RLM iteration 1/20" in text or "RLM iteration 1/30" in text)

    def records(text: str) -> list[str]:
        starts = [
            m.start() for m in re.finditer(r"^\S+ \S+ INFO dspy\.predict\.rlm: RLM iteration", text, re.M)
        ]
        return [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)], strict=True)]

    mixed = [r for pair in zip(records(first), records(second), strict=False) for r in pair]
    (log := tmp_path / "threads.log").write_text("".join(mixed), encoding="utf-8")
    run = load_run(log)
    assert len(run.nodes) == len(mixed) and all(len(n.steps) == 1 for n in run.nodes)
    assert any("interleave" in n for n in run.notices)


@pytest.mark.parametrize(
    "entry", [e for e in REPLAYED if e["format"] not in ("rlms", "dspy")], ids=lambda e: e["file"]
)
def test_a_cut_application_log_is_read_or_refused_with_a_typed_error(
    entry: dict[str, Any], tmp_path: Path
) -> None:
    """A log cut anywhere (a crashed writer, a partial download) reads as far as it goes or gets a
    TrajectoryError naming the file, never another exception."""
    data = (REAL / entry["file"]).read_bytes()
    cut = tmp_path / "cut"
    for size in range(len(data) // 7, len(data), len(data) // 7):
        cut.write_bytes(data[:size])
        try:
            run = load_run(cut, entry["format"])
        except TrajectoryError as exc:
            assert str(cut) in str(exc)
        else:
            assert run.steps


def test_an_la3d_event_log_keeps_the_task_and_names_the_tools_it_cannot_serve(tmp_path: Path) -> None:
    path = REAL / "la3d_events_4_uniprot_mnemonic_id.jsonl"
    run = load_run(path)
    assert run.root.query == "Select the UniProtKB entry with the mnemonic 'A4_HUMAN'"
    assert run.root.context_chars == 1896 and len(run.steps) == 5
    assert {"sparql_query", "sparql_slice"} <= set(run.tools)
    report = replay(run, profile="fixed", isolation="inline", same_context=False)
    served = [o for o in report.outcomes if "sparql_query(" in o.step.code]
    assert served and all("does not hold what the tool sparql_query" in str(o.observation) for o in served)
    lines = path.read_text(encoding="utf-8").splitlines()
    future = [lines[0], json.dumps({"event_type": "checkpoint", "timestamp": "t", "data": {}}), *lines[1:]]
    (copy := tmp_path / "events.jsonl").write_text("\n".join(future) + "\n", encoding="utf-8")
    assert "skipped lines of event_type 'checkpoint'" in load_run(copy).notices


def test_la3d_eval_and_fabric_files_give_the_code_its_recorded_inputs() -> None:
    evals = load_run(REAL / "la3d_eval_uniprot_bacteria_taxa_001_2026-01-22T15-23-33.json")
    assert evals.root.inputs == {
        "query": "Select all bacterial taxa and their scientific name from UniProt taxonomy."
    }
    assert len(evals.steps) == 8 and not any(s.code.startswith("```") for s in evals.steps if not s.error)
    fabric = load_run(REAL / "fabric_arithmetic.jsonl")
    assert fabric.root.inputs == {"question": "What is 17 * 23 + 5?"}
    first = replay(fabric, profile="upstream", isolation="inline").outcomes[0]
    assert not first.diverged and first.observation == "What is 17 * 23 + 5?"  # print(question)


def _rlms_target(tmp_path: Path) -> Path:
    """rlms from PyPI, unpacked without its dependencies (its OpenAI client is ours: openai)."""
    target = tmp_path / "rlms"
    command = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target)]
    done = subprocess.run([*command, f"rlms=={RLMS_VERSION}"], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        message = f"pip could not install rlms=={RLMS_VERSION}: {done.stderr[-500:]}"
        if os.environ.get("RLM_COMPAT_CI") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return target


@pytest.mark.skipif(not RLMS_VERSION, reason="RLM_COMPAT_RLMS_TESTS (an rlms version, e.g. 0.1.1) is not set")
def test_a_log_written_by_rlms_itself_is_read_and_replayed(
    chat_server: ServerFactory, tmp_path: Path
) -> None:
    """rlms run for real against the loopback server: its own log, not our fixture."""
    replies = [
        "```repl\nimport re\nnums = re.findall(r'\\d+', context)\nprint(nums)\n```",
        "```repl\ntotal = 0\nfor n in nums:\n    total += int(n)\nprint(llm_query(f'say {total}'))\n```",
        "FINAL(60)",
    ]

    def rlms_script(request: dict[str, Any]) -> str:
        messages = request["messages"]
        if messages[0]["role"] != "system":
            return "it is 60"
        return replies[min(sum(1 for m in messages if m["role"] == "assistant"), 2)]

    target = _rlms_target(tmp_path)
    server = chat_server(rlms_script)
    client = (
        "import sys\nfrom rlm import RLM\nfrom rlm.logger import RLMLogger\n"
        "logger = RLMLogger(log_dir=sys.argv[2])\n"
        "RLM(backend='openai', backend_kwargs={'model_name': 'gpt-4o-mini', 'base_url': sys.argv[1], "
        "'api_key': 'sk-loopback'}, environment='local', max_iterations=5, logger=logger)"
        ".completion('Numbers 10, 20 and 30.', root_prompt='total?')\n"
    )
    logs = tmp_path / "logs"
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "PYTHONPATH": str(target)}
    done = subprocess.run(
        [sys.executable, "-c", client, server.base_url, str(logs)],
        env=env,
        timeout=120,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (log,) = logs.glob("*.jsonl")
    digest = hashlib.sha256(log.read_bytes()).hexdigest()
    assert detect_format(log) == "rlms", digest
    run = load_run(log)
    assert [s.code.splitlines()[0] for s in run.steps] == ["import re", "total = 0"]
    assert replay(run, profile="fixed", isolation="inline", context="Numbers 10, 20 and 30.").identical
    upstream = replay(run, profile="upstream", isolation="inline", context="Numbers 10, 20 and 30.")
    assert [o.error for o in upstream.outcomes] == [True, True]
